"""Limits on what the shape of DATA can make the daemon hold or do: the
descriptor budget, partitions per topic and per data directory, flushes that
cannot run, deletion of every valid topic name, and work per request."""

from __future__ import annotations

import errno
import json
import os
import resource
import struct
import subprocess
import time
from pathlib import Path

import pytest
from mount_helpers import LOGFS, Daemon, sh
from waiting import wait_for

from logfs.core.errors import PartitionLimitError
from logfs.core.log import Limits, Owner, Store, deletion
from logfs.core.storage import DESCRIPTORS

LONG = "t" * 240 + "-" + "x" * 8  # 249 characters, Kafka's longest topic name
NOFILE = 1024  # the default `ulimit -n`


def partitions(topic: Path) -> list[str]:
    return sorted(n for n in os.listdir(topic) if n.isdigit())


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def under_ulimit(n: int = NOFILE) -> tuple[str, ...]:
    """A command prefix: the daemon runs with soft and hard RLIMIT_NOFILE ``n``."""
    return ("bash", "-c", f'ulimit -n {n} && exec "$@"', "ulimit")


def health(mnt: Path) -> tuple[str, dict]:
    value = os.getxattr(mnt, "user.logfs.health").decode()
    return value, json.loads(os.getxattr(mnt, "user.logfs.failures"))


def wait_ready(mnt: Path, timeout: float = 600) -> None:
    wait_for(lambda: health(mnt)[0] != "recovering", "recovered", timeout=timeout)


# ---------------------------------------------------------------- descriptor budget


def test_tiny_segments_stay_under_the_descriptor_budget(tmp_path, monkeypatch):
    before = open_fds()
    with Store(tmp_path / "data", defaults={"segment.bytes": "14"}) as store:
        monkeypatch.setattr(DESCRIPTORS, "limit", 20)  # once the store has sized it
        store.create_topic("t", 2)
        for i in range(600):
            store.log("t", i % 2).append([b"line %d" % i])
        assert store.log("t", 0).segment_count >= 300
        assert len(DESCRIPTORS) <= 20
        assert open_fds() - before <= 3 * 20 + 2  # the segments' files, the lock
        store.flush()
        log = store.log("t", 1)
        values = [log.read(offset).value for offset in range(300)]
        assert values == [b"line %d" % i for i in range(1, 600, 2)]
    with Store(tmp_path / "data") as store:  # reopened: every record there
        assert store.log("t", 0).next_offset == 300


def test_a_store_raises_the_soft_open_file_limit_to_the_hard_one(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        with Store(tmp_path / "data"):
            assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def build_many_segments(data: Path, count: int) -> None:
    """A partition of ``count`` one-record segments: one written by the store,
    the others its copies with their base offsets set (not under the CRC)."""
    with Store(data) as store:
        store.create_topic("big", 1)
        store.log("big", 0).append([b"hello"])
    part = data / "big-0"
    batch = (part / "00000000000000000000.log").read_bytes()
    for name in os.listdir(part):
        os.unlink(part / name)
    for i in range(count):
        fd = os.open(part / f"{i:020d}.log", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, struct.pack(">q", i) + batch[8:])
        os.close(fd)
    (data / "recovery-point-offset-checkpoint").write_text(f"0\n1\nbig 0 {count}\n")
    (data / "log-start-offset-checkpoint").write_text("0\n1\nbig 0 0\n")


def test_a_mount_of_100000_segments_serves_under_ulimit_1024(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    build_many_segments(data, 100_000)
    started = time.monotonic()
    with Daemon(data, mnt, prefix=under_ulimit()) as daemon:
        wait_ready(mnt)
        ready = time.monotonic() - started
        assert (mnt / "big/0/offset/99999").read_bytes() == b"hello"
        assert (mnt / "big/0/offset/0").read_bytes() == b"hello"
        sh(f"echo appended >> {mnt}/big/0/append")
        assert (mnt / "big/0/offset/100000").read_bytes() == b"appended"
        state = json.loads((mnt / "big/0/state").read_text())
        assert state["segments"] == 100_000 and state["next_offset"] == 100_001
        assert health(mnt) == ("ok", {})
        print(f"100,000 segments: mounted and recovered in {ready:.1f} s")
        limits = Path(f"/proc/{daemon.pid}/limits").read_text()
        assert f"Max open files            {NOFILE}" in limits
    assert "Too many open files" not in daemon.output()


def test_one_line_writes_to_tiny_segments_under_ulimit_1024(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "segment.bytes=14", prefix=under_ulimit()) as daemon:
        sh(
            f"mkdir {mnt}/t && for i in $(seq 3000); do echo $i >> {mnt}/t/0/append; done",
            timeout=300,
        )
        sh(f"sync {mnt}/t/0/append")  # fsync: every segment is flushed
        state = json.loads((mnt / "t/0/state").read_text())
        assert state["next_offset"] == state["recovery_point"] == 3000
        assert state["segments"] >= 1000
        assert health(mnt) == ("ok", {})
    assert "Too many open files" not in daemon.output()
    with Daemon(data, mnt, prefix=under_ulimit()):  # DATA mounts again
        assert (mnt / "t/0/offset/2999").read_bytes() == b"3000"


# ---------------------------------------------------------------- partition limits


def test_partition_limits_refuse_and_create_nothing(tmp_path, caplog):
    limits = Limits(max_partitions=8, max_partitions_per_topic=5)
    with Store(tmp_path / "data", limits=limits) as store:
        with pytest.raises(PartitionLimitError, match="logfs.max.partitions.per.topic=5"):
            store.create_topic("wide", 6, config={"retention.ms": "1000"})
        assert "wide" not in store.topics()
        assert not list((tmp_path / "data").glob("wide-*"))
        assert not (tmp_path / "data/config/wide.properties").exists()
        store.create_topic("a", 5)
        with pytest.raises(PartitionLimitError, match="max.broker.partitions=8"):
            store.create_topic("b", 4)
        store.create_topic("b", 3)
        with pytest.raises(PartitionLimitError):
            store.add_partitions("b", 4)
        assert store.partitions("b") == [0, 1, 2]
        assert sorted(p.name for p in (tmp_path / "data").glob("b-*")) == ["b-0", "b-1", "b-2"]
    assert "refused: " in caplog.text


def test_one_user_cannot_take_every_partition(tmp_path, caplog):
    """logfs.max.partitions.per.user counts the partitions of the topics a user
    owns, whatever face made them; root and topics that follow DATA are not counted."""
    alice, bob = Owner(1000, 1000, 0o755), Owner(1001, 1001, 0o755)
    with Store(tmp_path / "data", limits=Limits(max_partitions_per_user=5)) as store:
        store.create_topic("a1", 3, owner=alice)
        with pytest.raises(PartitionLimitError, match="logfs.max.partitions.per.user=5"):
            store.create_topic("a2", 3, owner=alice)
        assert "a2" not in store.topics() and not list((tmp_path / "data").glob("a2-*"))
        store.create_topic("a2", 2, owner=alice)  # exactly the share
        with pytest.raises(PartitionLimitError):
            store.add_partitions("a2", 3)
        store.create_topic("b", 5, owner=bob)  # another user's share is their own
        store.create_topic("root", 20, owner=Owner(0, 0, 0o755))
        store.create_topic("data", 20)  # follows DATA's owner
        store.delete_topic("a1")  # a deleted topic gives its partitions back
        store.add_partitions("a2", 5)
        assert store.partitions("a2") == [0, 1, 2, 3, 4]
    assert "refused: 3 more partitions for user 1000, who owns 3" in caplog.text


def test_a_creation_that_fails_midway_leaves_nothing(tmp_path, monkeypatch):
    with Store(tmp_path / "data") as store:
        real_mkdir = Path.mkdir

        def mkdir(self, *args, **kwargs):
            if self.name == "t-2":
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir)
        with pytest.raises(OSError):
            store.create_topic("t", 4, config={"retention.ms": "1000"})
        monkeypatch.undo()
        assert "t" not in store.topics()
        assert not list((tmp_path / "data").glob("t-*"))
        assert not (tmp_path / "data/config/t.properties").exists()
        store.create_topic("t", 4)  # and the name is free
        assert store.partitions("t") == [0, 1, 2, 3]


def test_mkdir_past_a_partition_limit_is_enospc_and_creates_nothing(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    options = ("logfs.max.partitions.per.topic=100", "max.broker.partitions=150")
    with Daemon(data, mnt, *options) as daemon:
        sh(f"mkdir {mnt}/t")
        done = sh(f"mkdir {mnt}/t/25000", check=False)
        assert done.returncode != 0 and "No space left on device" in done.stderr
        assert partitions(mnt / "t") == ["0"]
        sh(f"mkdir {mnt}/t/99")  # up to the limit
        assert len(partitions(mnt / "t")) == 100
        done = sh(f"mkdir {mnt}/u && mkdir {mnt}/u/50", check=False)
        assert "No space left on device" in done.stderr  # 101 + 50 > 150
        assert partitions(mnt / "u") == ["0"]
        assert len(list(data.glob("u-*"))) == 1
    assert "refused: 25001 partitions in topic 't'" in daemon.output()
    assert "past max.broker.partitions=150" in daemon.output()


def test_a_bad_limit_option_is_refused(tmp_path):
    (tmp_path / "mnt").mkdir()
    done = subprocess.run(
        [*LOGFS, "mount", tmp_path / "data", tmp_path / "mnt", "-o", "max.broker.partitions=x"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "max.broker.partitions=x" in done.stderr


# ---------------------------------------------------------------- flushes that cannot run


def test_a_flush_that_cannot_open_its_files_shows_and_recovers(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append([b"a"])
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        fillers = []
        try:
            with pytest.raises(OSError) as e:
                while True:
                    fillers.append(os.open("/dev/null", os.O_RDONLY))
            assert e.value.errno == errno.EMFILE
            with pytest.raises(OSError) as e:
                log.flush()
            assert e.value.errno == errno.EMFILE
        finally:
            for fd in fillers:
                os.close(fd)
        assert log.failure is None and log.flush_failure.startswith("EMFILE")
        assert store.flush_failures() == {"t-0": f"flush cannot run: {log.flush_failure}"}
        assert log.recovery_point == 0
        log.flush()
        assert log.flush_failure is None and log.recovery_point == 1
        assert (soft, hard) == resource.getrlimit(resource.RLIMIT_NOFILE)


def test_a_mount_whose_flusher_runs_out_of_descriptors_says_so(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "flush.ms=50") as daemon:
        sh(f"mkdir {mnt}/t && echo a >> {mnt}/t/0/append")
        wait_for(
            lambda: json.loads((mnt / "t/0/state").read_text())["recovery_point"] == 1, "flushed"
        )
        used = len(os.listdir(f"/proc/{daemon.pid}/fd"))
        limits = resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE, (used, limits[1]))
        try:
            with open(mnt / "t/0/append", "ab") as f:  # opened before the descriptors ran out
                f.write(b"b\n")
                f.flush()
                wait_for(lambda: health(mnt)[0] == "degraded", "degraded")
                failures = health(mnt)[1]
                assert failures["t-0"].startswith("flush cannot run: EMFILE")
                state = json.loads((mnt / "t/0/state").read_text())
                assert state["recovery_point"] == 1 and state["status"] == "online"
                assert state["flush_failure"].startswith("EMFILE")
        finally:
            resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE, limits)
        wait_for(lambda: health(mnt) == ("ok", {}), "healthy again")
        assert json.loads((mnt / "t/0/state").read_text())["recovery_point"] == 2
    assert "flushing t-0 cannot run: EMFILE" in daemon.output()
    assert "flushing works again" in daemon.output()
    with Daemon(data, mnt):
        assert (mnt / "t/0/offset/1").read_bytes() == b"b"


# ---------------------------------------------------------------- deleting long names


def test_a_topic_of_249_characters_is_deleted_whole(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic(LONG, 2, config={"retention.ms": "100000"})
        store.log(LONG, 1).append([b"old"])
        assert store.topic_overrides(LONG) == {"retention.ms": "100000"}
    with Store(data) as store:  # its settings file has a name that fits
        assert store.topic_overrides(LONG) == {"retention.ms": "100000"}
        store.delete_topic(LONG)
        assert LONG not in store.topics()
        store.create_topic(LONG, 2)
        assert store.log(LONG, 1).next_offset == 0 and store.topic_overrides(LONG) == {}
    assert sorted(os.listdir(data / "config")) == []
    with Store(data) as store:
        assert store.log(LONG, 1).next_offset == 0 and store.topic_overrides(LONG) == {}
    assert not [n for n in os.listdir(data) if n.endswith("-delete")]


def test_a_topic_that_fails_to_delete_stays_whole(tmp_path, monkeypatch):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic(LONG, 3, config={"retention.ms": "100000"})
        for p in range(3):
            store.log(LONG, p).append([b"v%d" % p])
        real_rename = os.rename

        def rename(source, target):
            if str(source).endswith("-2"):
                raise OSError(errno.EIO, "Input/output error")
            return real_rename(source, target)

        monkeypatch.setattr(deletion.os, "rename", rename)
        with pytest.raises(OSError):
            store.delete_topic(LONG)
        monkeypatch.undo()
        assert store.partitions(LONG) == [0, 1, 2]
        assert [store.log(LONG, p).read(0).value for p in range(3)] == [b"v0", b"v1", b"v2"]
        store.log(LONG, 0).append([b"more"])
        assert store.topic_overrides(LONG) == {"retention.ms": "100000"}
    assert not (data / deletion.DELETING_FILE).exists()
    with Store(data) as store:
        assert store.partitions(LONG) == [0, 1, 2] and store.log(LONG, 0).next_offset == 2


def test_an_interrupted_deletion_is_finished_at_the_next_open(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic(LONG, 2, config={"retention.ms": "100000"})
        store.create_topic("kept", 1)
        store.log(LONG, 0).append([b"old"])
    # what a crash in the middle of a deletion leaves: the topic marked, one
    # partition renamed aside, the other not yet
    (data / deletion.DELETING_FILE).write_text(LONG + "\n")
    aside = deletion.delete_dir_name(LONG, 0)
    assert len(aside) <= 255
    os.rename(data / f"{LONG}-0", data / aside)
    with Store(data) as store:
        assert list(store.topics()) == ["kept"]
    assert sorted(os.listdir(data / "config")) == []
    assert not (data / aside).exists() and not (data / f"{LONG}-1").exists()
    assert not (data / deletion.DELETING_FILE).exists()


def test_rmdir_of_a_249_character_topic_on_a_mount(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        sh(f"mkdir {mnt}/{LONG} && echo old >> {mnt}/{LONG}/0/append")
        sh(f"echo retention.ms=100000 > {mnt}/{LONG}/config")
        sh(f"rmdir {mnt}/{LONG}")
        assert LONG not in os.listdir(mnt)
        sh(f"mkdir {mnt}/{LONG} && echo new >> {mnt}/{LONG}/0/append")
        assert sh(f"cat {mnt}/{LONG}/0/stream").stdout == "new\n"
    with Daemon(data, mnt):
        assert sh(f"cat {mnt}/{LONG}/0/stream").stdout == "new\n"
        assert "retention.ms=100000" not in (mnt / LONG / "config").read_text()
        sh(f"rmdir {mnt}/{LONG}")
    with Daemon(data, mnt):
        assert LONG not in os.listdir(mnt)


# ---------------------------------------------------------------- work per request


def test_listings_and_lookups_do_not_sort_per_call(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("wide", 5000)
        for i in range(3000):
            store.create_topic(f"t{i}")
        started = time.monotonic()
        for _ in range(2000):
            assert store.topics()["wide"] == 5000
            assert store.partitions("t7") == [0]
            store.log("wide", 4999)
        assert time.monotonic() - started < 1.0  # 2000 of each: no sort of 8000 partitions
        assert list(store.topics())[:3] == ["t0", "t1", "t10"]  # sorted by name
        store.delete_topic("t1")
        assert "t1" not in store.topics() and len(store.topics()) == 3000


def test_a_large_topic_does_not_slow_another_users_state(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Store(data) as store:
        store.create_topic("wide", 5000)
        store.create_topic("small")
    with Daemon(data, mnt):
        wait_ready(mnt)
        started = time.monotonic()
        assert len(partitions(mnt / "wide")) == 5000
        listing = time.monotonic() - started
        started = time.monotonic()
        for _ in range(20):
            json.loads((mnt / "small/0/state").read_text())
        state = (time.monotonic() - started) / 20
        print(f"ls of 5000 partitions {listing * 1e3:.0f} ms, cat state {state * 1e3:.1f} ms")
        assert listing < 2.0 and state < 0.1
