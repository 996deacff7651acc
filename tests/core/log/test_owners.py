"""Topics' owners kept in DATA (log/owners.py) and carried by the partition
directories on disk (storage/ownership.py): they survive reopening, die with
the topic, are put back when the store opens a partition, and `logfs check`
reports a directory that disagrees."""

from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest

from logfs import Store
from logfs.core.log import Owner
from logfs.core.storage import ownership
from logfs.core.tools.offline import check

ALICE = Owner(5001, 5001, 0o700)
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory a group takes root")


def mode_of(path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


@pytest.mark.parametrize(
    ("mode", "on_disk"),
    [
        (0o700, 0o700),
        (0o750, 0o750),
        (0o755, 0o755),
        (0o740, 0o700),
        (0o705, 0o705),
        (0o1777, 0o755),
    ],
)
def test_directory_modes_give_r_x_only_to_classes_that_may_read(mode, on_disk):
    assert ownership.directory_mode(mode) == on_disk


def test_the_owner_is_kept_in_data_and_read_back(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", partitions=2, owner=ALICE)
        store.create_topic("plain")
        assert store.topic_owner("t") == ALICE
        assert store.topic_owner("plain") is None  # follows DATA
    kept = json.loads((data / "config" / "t.owner").read_text())
    assert kept == {"owner": [5001, 5001, "0700"]}
    assert not (data / "config" / "plain.owner").exists()
    with Store(data, read_only=True) as store:
        assert store.topic_owner("t") == ALICE
    with Store(data) as store:
        store.set_topic_owner("t", ALICE._replace(mode=0o750))
    with Store(data) as store:
        assert store.topic_owner("t").mode == 0o750
        store.delete_topic("t")
        assert store.topic_owner("t") is None
        assert not (data / "config" / "t.owner").exists()
        store.create_topic("t")  # a new life: nothing of the old owner
        assert store.topic_owner("t") is None


def test_a_file_left_by_a_crash_is_removed_and_a_bad_one_follows_data(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", owner=ALICE)
    (data / "config" / "gone.owner").write_text('{"owner": [1, 1, "0700"]}\n')
    (data / "config" / "t.owner").write_text("{not json")
    with Store(data) as store:
        assert store.topic_owner("t") is None
    assert not (data / "config" / "gone.owner").exists()


@root_only
def test_partition_directories_carry_the_owner_on_disk(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", partitions=2, owner=ALICE)
        store.log("t", 0).append([b"secret"])
        for p in (0, 1):
            assert mode_of(data / f"t-{p}") == (0, 5001, 0o700)
        store.add_partitions("t", 3)
        assert mode_of(data / "t-2") == (0, 5001, 0o700)  # new partitions too
        store.set_topic_owner("t", ALICE._replace(gid=5002, mode=0o750))
        assert mode_of(data / "t-1") == (0, 5002, 0o750)
    # someone changed a directory behind the daemon's back: check says so, opening mends it
    os.chmod(data / "t-0", 0o755)
    problems = check(data)
    assert len(problems) == 1 and "t-0" in problems[0] and "0755" in problems[0], problems
    with Store(data) as store:
        assert store.log("t", 0).next_offset == 1
    assert mode_of(data / "t-0") == (0, 5002, 0o750)
    assert check(data) == []


@root_only
def test_files_made_later_are_behind_the_directory(shared):
    """A roll's new segments are made by the daemon with its own modes; the
    directory keeps others out of them all the same, while a topic open to
    others (the control) is read by them."""
    data = shared / "data"
    with Store(data, defaults={"segment.bytes": "100"}) as store:
        data.chmod(0o755)
        store.create_topic("t", owner=ALICE)
        store.create_topic("open", owner=ALICE._replace(mode=0o755))
        for topic in ("t", "open"):
            log = store.log(topic, 0)
            for i in range(20):
                log.append([b"record %d" % i])
            assert len(log.segments) > 1

    def read_as_nobody(topic: str) -> int:
        script = f"cat {data}/{topic}-0/*.log > /dev/null"
        cmd = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
        return subprocess.run([*cmd, "sh", "-c", script], capture_output=True).returncode

    assert read_as_nobody("open") == 0
    assert read_as_nobody("t") != 0
