"""The mount's ``<topic>/<p>/groups/<group>`` files against OffsetFetch and
OffsetCommit of Kafka's clients: cat reads a group's committed offset,
writing a number commits it, with or without the Kafka listener."""

from __future__ import annotations

import errno
import subprocess

import confluent_kafka as ck
import pytest
from kafka_helpers import Served, mounted
from mount_helpers import Daemon


def fetched(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """The group's committed offset by OffsetFetch (confluent-kafka)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([ck.TopicPartition(topic, partition)], 30)[0].offset
    finally:
        c.close()


def sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)


def test_group_files_agree_with_offset_fetch_and_commit(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt, "partitions=2") as (_, bootstrap):
        p = ck.Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            p.produce("gt", value=b"%d" % i, partition=0)
        assert p.flush(30) == 0
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "app"})
        c.commit(offsets=[ck.TopicPartition("gt", 0, 6)], asynchronous=False)
        groups = mnt / "gt" / "0" / "groups"
        # cat of the mount's group file equals OffsetFetch.
        assert (groups / "app").read_text() == f"{fetched(bootstrap, 'app', 'gt')}\n" == "6\n"
        assert sorted(p.name for p in groups.iterdir()) == ["app"]
        assert not list((mnt / "gt" / "1" / "groups").iterdir())
        # Writing a number commits it: OffsetFetch sees it.
        assert sh(f"echo 3 > {groups / 'app'}").returncode == 0
        assert fetched(bootstrap, "app", "gt") == 3
        # A new group's file is a new group's commit.
        assert sh(f"echo 8 > {groups / 'fresh'}").returncode == 0
        assert fetched(bootstrap, "fresh", "gt") == 8
        assert sorted(p.name for p in groups.iterdir()) == ["app", "fresh"]
        # Not a number: EINVAL, nothing committed.
        assert sh(f"echo soon > {groups / 'app'}").returncode != 0
        with pytest.raises(OSError) as refused, open(groups / "app", "w") as f:
            f.write("12 o'clock\n")
        assert refused.value.errno == errno.EINVAL
        assert (groups / "app").read_text() == "3\n"
        # A group with a member owns its commits: EBUSY.
        member = ck.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "busy", "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        })  # fmt: skip
        member.subscribe(["gt"])
        while (m := member.poll(0.5)) is None or m.error():
            pass
        member.commit(m, asynchronous=False)
        assert (groups / "busy").read_text() == f"{m.offset() + 1}\n"
        with pytest.raises(OSError) as refused, open(groups / "busy", "w") as f:
            f.write("0\n")  # committed at close(), which says why not
        assert refused.value.errno == errno.EBUSY
        assert (groups / "busy").read_text() == f"{m.offset() + 1}\n"
        member.close()
        assert sh(f"echo 0 > {groups / 'busy'}").returncode == 0  # left: the group is empty
        assert fetched(bootstrap, "busy", "gt") == 0
        c.close()


def test_group_files_without_the_listener_persist_in_consumer_offsets(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        (mnt / "plain").mkdir()
        subprocess.run(["sh", "-c", f"echo 5 > {mnt / 'plain' / '0' / 'groups' / 'tail'}"],
                       check=True, timeout=60)  # fmt: skip
        assert (mnt / "plain" / "0" / "groups" / "tail").read_text() == "5\n"
        assert sorted(p.name for p in mnt.iterdir()) == [".state", "plain"]
    with Served(data) as served:
        assert fetched(served.bootstrap, "tail", "plain") == 5
