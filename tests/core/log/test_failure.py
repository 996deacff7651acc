"""I/O errors in the store: which ones take a partition offline, and what
offline means (docs/reliability.md, "Disk failures"). Errors are injected by
replacing the os functions the store calls; tests/system/test_faults.py injects the
same errors into a running daemon with libfiu."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import trio

from logfs import Store
from logfs.core.errors import LogFailedError, LogfsError
from logfs.core.log.partitioner import partition_for_key
from logfs.core.log.store import RECOVERY_POINT_FILE, read_checkpoint
from logfs.daemon import Flusher, parse_options


def eio(*args):
    raise OSError(errno.EIO, "Input/output error")


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


def two_partitions(data, **config):
    store = Store(data)
    store.create_topic("t", 2, {k: str(v) for k, v in config.items()})
    return store


def test_a_failed_fsync_takes_the_partition_offline_until_it_is_reopened(data, monkeypatch):
    store = two_partitions(data)
    bad, good = store.log("t", 0), store.log("t", 1)
    bad.append([b"durable"])
    bad.flush()
    bad.append([b"maybe"])
    with monkeypatch.context() as m:
        m.setattr(os, "fsync", eio)
        m.setattr(os, "fdatasync", eio)
        with pytest.raises(OSError):
            bad.flush()
    assert bad.failure == "fsync failed: EIO (Input/output error)"
    # fsync works again, but a retry proves nothing: it is refused, the point stays
    with pytest.raises(LogFailedError, match="t-0 is offline"):
        bad.flush()
    assert bad.recovery_point == 1 and not bad.flush_due(10**15)
    with pytest.raises(LogFailedError):
        bad.append([b"more"])
    with pytest.raises(LogFailedError):
        bad.append_batches([])
    assert bad.read(0).value == b"durable"  # below the recovery point: served
    with pytest.raises(LogFailedError):
        bad.read(1)
    with pytest.raises(LogFailedError):
        list(bad.raw_batches(0))
    assert [r.value for r in bad.scan(0, 1)] == [b"durable"]
    good.append([b"other"])  # the other partition is not touched
    good.flush()
    assert good.recovery_point == 1 and store.failures() == {"t-0": bad.failure}
    store.close()  # flushes what it can, checkpoints the frozen point
    assert read_checkpoint(data / RECOVERY_POINT_FILE)[("t", 0)] == 1

    with Store(data) as store:  # reopening recovers from offset 1, re-validating the rest
        log = store.log("t", 0)
        assert log.failure is None and [r.value for r in log.scan()] == [b"durable", b"maybe"]
        log.append([b"again"])
        assert log.recovery_point == 2 and store.failures() == {}


def test_a_failed_segment_write_is_undone_and_takes_the_partition_offline(data, monkeypatch):
    store = two_partitions(data)
    log = store.log("t", 0)
    log.append([b"a"])
    size = log.active_segment.size
    with monkeypatch.context() as m:
        m.setattr(os, "writev", eio)
        with pytest.raises(OSError) as e:
            log.append([b"b"])
    assert e.value.errno == errno.EIO and log.failure.startswith("appending to a segment")
    assert os.path.getsize(log.active_segment.log_path) == size and log.next_offset == 1
    store.close()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_on_write_is_clean_and_the_partition_stays_online(data, monkeypatch, code):
    store = two_partitions(data)
    log = store.log("t", 0)
    log.append([b"a"])
    real = os.writev

    def short(fd, buffers):  # the kernel wrote part of the batch, then ran out of room
        real(fd, [bytes(buffers[0])[:5]])
        raise OSError(code, os.strerror(code))

    with monkeypatch.context() as m:
        m.setattr(os, "writev", short)
        with pytest.raises(OSError) as e:
            log.append([b"b" * 100])
    assert e.value.errno == code and log.failure is None
    log.append([b"c"])
    log.flush()
    assert [r.value for r in log.scan()] == [b"a", b"c"]
    store.close()


def test_a_torn_batch_that_cannot_be_cut_off_takes_the_partition_offline(data, monkeypatch):
    store = two_partitions(data)
    log = store.log("t", 0)
    real = os.writev

    def torn(fd, buffers):
        real(fd, [bytes(buffers[0])[:5]])
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "writev", torn)
        m.setattr(os, "ftruncate", eio)
        with pytest.raises(OSError) as e:
            log.append([b"b" * 100])
    assert e.value.errno == errno.EIO and "cutting off" in log.failure
    store.close()
    with Store(data) as store:  # recovery cuts the torn batch
        log = store.log("t", 0)
        assert log.next_offset == 0 and log.active_segment.size == 0


def test_a_full_disk_writing_an_index_fails_the_flush_only(data, monkeypatch):
    store = two_partitions(data, **{"index.interval.bytes": 1})
    log = store.log("t", 0)
    for value in (b"a", b"b", b"c"):
        log.append([value])
    assert len(log.active_segment.offset_index) >= 1
    real = os.write

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("index"):
            real(fd, bytes(data)[:3])  # a torn entry, cut off again
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    with monkeypatch.context() as m:
        m.setattr(os, "write", full)
        with pytest.raises(OSError):
            log.flush()
    assert log.failure is None and log.recovery_point == 0
    assert os.path.getsize(log.active_segment.index_path) % 8 == 0
    log.flush()  # room again: the entries still pending are written
    assert log.recovery_point == 3
    store.close()
    with Store(data) as store:
        assert [store.log("t", 0).read(n).value for n in range(3)] == [b"a", b"b", b"c"]


def test_a_failed_retention_delete_takes_the_partition_offline(data, monkeypatch):
    store = two_partitions(data, **{"segment.bytes": 200, "retention.bytes": 200})
    log = store.log("t", 0)
    for i in range(20):
        log.append([b"%040d" % i])
    with monkeypatch.context() as m:
        m.setattr(os, "rename", eio)
        with pytest.raises(OSError):
            log.enforce_retention()
    assert log.failure.startswith("deleting segment 0 (retention)")
    assert log.enforce_retention() == 0
    store.close()
    with Store(data) as store:  # the next open deletes what retention could not
        log = store.log("t", 0)
        assert log.failure is None and log.enforce_retention() > 0
        assert log.read(19).value == b"%040d" % 19


def test_a_failed_checkpoint_keeps_the_old_one_and_is_visible(data, monkeypatch):
    store = two_partitions(data)
    log = store.log("t", 0)
    log.append([b"a"])
    log.flush()
    store.checkpoint()
    log.append([b"b"])
    log.flush()
    with monkeypatch.context() as m:
        m.setattr(os, "replace", eio)
        with pytest.raises(OSError):
            store.checkpoint()
    assert store.checkpoint_failure == "EIO (Input/output error)"
    assert read_checkpoint(data / RECOVERY_POINT_FILE)[("t", 0)] == 1  # the old one
    assert log.failure is None  # data is durable; only recovery starts earlier
    store.checkpoint()
    assert store.checkpoint_failure is None
    assert read_checkpoint(data / RECOVERY_POINT_FILE)[("t", 0)] == 2
    store.close()


def test_unkeyed_topic_appends_avoid_an_offline_partition(data, monkeypatch):
    store = two_partitions(data)
    with monkeypatch.context() as m:
        m.setattr(os, "fsync", eio)
        m.setattr(os, "fdatasync", eio)
        store.log("t", 0).append([b"x"])
        with pytest.raises(OSError):
            store.log("t", 0).flush()
    for _ in range(6):
        [(partition, _, _)] = store.append_to_topic("t", [b"v"])
        assert partition == 1
        assert store.append_packed_to_topic("t", b"v\n", np.array([1]))[0] == 1
    key = next(k for k in (b"%d" % i for i in range(99)) if partition_for_key(k, 2) == 0)
    with pytest.raises(LogFailedError):  # a key that belongs to the offline partition
        store.append_to_topic("t", [b"v"], [key])
    store.close()


def test_recovery_reads_the_tail_from_the_disk_not_the_page_cache(data, monkeypatch):
    store = two_partitions(data)
    log = store.log("t", 0)
    log.append([b"a"])
    log.flush()
    store.checkpoint()
    position = log.active_segment.size
    log.append([b"b"])
    for fd in store._lock_fds:  # a crash: nothing flushed or checkpointed
        os.close(fd)
    store._lock_fds = ()
    advised = []
    real = os.posix_fadvise
    monkeypatch.setattr(
        os,
        "posix_fadvise",
        lambda fd, off, n, how: advised.append((off, n, how)) or real(fd, off, n, how),
    )
    with Store(data) as store:
        assert store.log("t", 0).next_offset == 2
    assert (position, 0, os.POSIX_FADV_DONTNEED) in advised


def test_the_flusher_takes_an_offline_partition_out_and_goes_on(data):
    store = two_partitions(data, **{"flush.ms": 0})
    bad, good = store.log("t", 0), store.log("t", 1)
    failing = True

    bad_dir = os.path.realpath(bad.dir)

    def in_bad(fd: int) -> bool:  # by path prefix: the temp dir's own name may hold "t-0"
        path = os.readlink(f"/proc/self/fd/{fd}")
        return path == bad_dir or path.startswith(bad_dir + "/")

    def fsync(fd):
        if failing and in_bad(fd):
            raise OSError(errno.EIO, "Input/output error")
        os.fsync(fd)

    async def sync(ticket):
        ticket.sync(fsync)

    async def test():
        nonlocal failing
        flusher = Flusher(store, sync=sync)
        bad.append([b"a"])
        good.append([b"a"])
        assert await flusher.flush_due() == 2
        assert bad.failure and bad.recovery_point == 0 and good.recovery_point == 1
        failing = False
        with pytest.raises(LogFailedError):  # the retry that would now "succeed"
            await flusher.flush_log(bad)
        good.append([b"b"])
        assert await flusher.flush_due() == 1 and good.recovery_point == 2
        assert bad.recovery_point == 0 and flusher.errors == 1

    trio.run(test)
    store.close()


def test_mount_options_for_the_flushers_intervals():
    options = parse_options(
        {"log.retention.check.interval.ms": "250", "log.flush.offset.checkpoint.interval.ms": "1"}
    )
    assert options.tasks["flusher"] == {"retention_interval": 0.25, "checkpoint_interval": 0.001}
    assert options.defaults == {}
    for bad in ("0", "-5", "soon", None):
        with pytest.raises(LogfsError, match="expected a positive integer"):
            parse_options({"log.retention.check.interval.ms": bad})


def test_a_failed_fsync_while_recovering_opens_the_partition_offline(data, monkeypatch):
    store = two_partitions(data)
    store.log("t", 0).append([b"a"])
    store.log("t", 0).flush()
    store.checkpoint()
    store.log("t", 0).append([b"b"])
    for fd in store._lock_fds:  # a crash: "b" is neither flushed nor checkpointed
        os.close(fd)
    store._lock_fds = ()
    monkeypatch.setattr(os, "fdatasync", eio)
    with Store(data) as store:  # the mount comes up; the partition does not
        log = store.log("t", 0)
        assert log.failure == "fsync failed: EIO (Input/output error)"
        assert log.recovery_point == 1 and log.read(0).value == b"a"
        assert store.log("t", 1).failure is None
