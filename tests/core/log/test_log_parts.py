"""The partition log's collaborators on their own: the failure state, what is
not durable yet and its flush tickets, the live keys and the keys changed
since someone last looked; and the guards every append passes, in one order."""

from __future__ import annotations

import errno
import logging
import os

import numpy as np
import pytest

from logfs import Store
from logfs.core.errors import (
    InvalidBatchError,
    InvalidRecordError,
    LogFailedError,
    ReadOnlyError,
)
from logfs.core.format.record import encode_batch
from logfs.core.log.failure import Failure
from logfs.core.log.keys import LiveKeys
from logfs.core.log.unflushed import FlushTicket, Unflushed

EIO = OSError(errno.EIO, "Input/output error")


def open_fds(tmp_path, n: int) -> list[int]:
    return [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(n)]


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError as e:
        assert e.errno == errno.EBADF
        return False
    return True


# ---------------------------------------------------------------- Failure


def test_a_failure_keeps_its_first_cause_and_logs_it_once(caplog):
    failure = Failure("t-3")
    failure.require_online()  # online: nothing raised
    with caplog.at_level(logging.ERROR):
        failure.fail("fsync", EIO, recovery_point=7)
        failure.fail("appending to a segment", OSError(errno.ENOSPC, "No space left"), 9)
    assert failure.reason == "fsync failed: EIO (Input/output error)"
    assert [r.getMessage() for r in caplog.records if "offline" in r.getMessage()] == [
        "t-3 is offline: fsync failed: EIO (Input/output error). Records from offset 7 on "
        "are not known to be on disk; appends and fsync() answer EIO until a remount or "
        "`logfs check --repair` recovers it from there"
    ]
    with pytest.raises(LogFailedError, match=r"t-3 is offline after an I/O error \(fsync failed"):
        failure.require_online()


# ---------------------------------------------------------------- FlushTicket


def test_a_ticket_syncs_every_descriptor_in_order_and_closes_them(tmp_path):
    fds = open_fds(tmp_path, 3)
    synced = []
    ticket = FlushTicket(list(fds), next_offset=5, messages=2)
    ticket.sync(synced.append)
    assert synced == fds and ticket.error is None
    assert not any(is_open(fd) for fd in fds) and ticket.fds == []


def test_a_ticket_stops_at_the_first_failed_fsync_keeps_it_and_closes_everything(tmp_path):
    fds = open_fds(tmp_path, 4)
    synced, errors = [], iter([EIO, OSError(errno.ENOSPC, "No space left")])

    def fsync(fd):  # the second and third descriptors fail
        if fd in fds[1:3]:
            raise next(errors)
        synced.append(fd)

    ticket = FlushTicket(list(fds), next_offset=5, messages=2)
    ticket.sync(fsync)  # never raises: the log decides what a failure means
    assert ticket.error is EIO and synced == fds[:1]
    assert not any(is_open(fd) for fd in fds)


def test_unflushed_counts_records_and_hands_out_what_to_sync(tmp_path):
    with Store(tmp_path / "data", defaults={"segment.bytes": "200"}) as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append([b"x" * 100])
        log.append([b"y" * 100])  # rolls: two segments to sync
        segments = list(log.segments)
        assert len(segments) == 2
        unflushed = Unflushed(now_ms=1000)
        for segment in segments:
            unflushed.appended(segment, messages=1)
        unflushed.directory = True
        ticket = unflushed.ticket(log.dir, next_offset=2)
        # each segment's .log, .index and .timeindex, and the directory, by path
        assert len(ticket.fds) == 3 * len(segments) + 1
        inodes = {os.stat(path).st_ino for path in ticket.fds}
        assert inodes == {os.stat(p).st_ino for p in map(log.segment_file, log.segment_names())} | {
            os.stat(log.dir).st_ino
        }
        assert (ticket.next_offset, ticket.messages) == (2, 2)
        assert unflushed.segments == {} and not unflushed.directory
        ticket.sync()
        unflushed.appended(segments[-1], messages=3)  # appended while the ticket synced
        unflushed.completed(ticket, now_ms=2000)
        assert (unflushed.messages, unflushed.last_flush_ms) == (3, 2000)


def test_a_log_whose_fsync_fails_goes_offline_and_its_recovery_point_stays(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append([b"a"])
        log.flush()
        log.append([b"b"])
        ticket = log.prepare_flush()
        ticket.sync(lambda fd: (_ for _ in ()).throw(EIO))
        with pytest.raises(OSError) as e:
            log.complete_flush(ticket)
        assert e.value is EIO
        assert log.failure == "fsync failed: EIO (Input/output error)"
        assert log.recovery_point == 1 and log.unflushed_messages == 1
        with pytest.raises(LogFailedError):
            log.prepare_flush()


# ---------------------------------------------------------------- LiveKeys


def keyed_batch(base_offset: int, keys: list[bytes], values: list[bytes | None]) -> bytes:
    return encode_batch(base_offset, values, keys=keys, timestamps=1000)


def test_live_keys_note_changes_only_once_watched_and_give_each_out_once():
    keys = LiveKeys()
    assert keys.get([], 0) == {}
    keys.appended([keyed_batch(0, [b"a"], [b"1"])])
    assert keys.take_changed() == set()  # nobody watches
    assert keys.get([], 0, watch=True) == {b"a": 0}
    keys.appended([keyed_batch(1, [b"b", b"a"], [b"2", None])])
    assert keys.get([], 0) == {b"b": 1}  # a's tombstone removed it
    assert keys.take_changed() == {b"a", b"b"}
    assert keys.take_changed() == set()


def test_the_mount_takes_the_keys_a_compacted_log_changed(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("c", config={"cleanup.policy": "compact"})
        log = store.log("c", 0)
        log.append([b"1"], keys=[b"a"])
        assert log.live_keys(watch=True) == {b"a": 0}
        log.append([b"2", b"3"], keys=[b"b", b"a"])
        assert log.take_changed_keys() == {b"a", b"b"}
        assert log.take_changed_keys() == set()
        assert log.live_keys() == {b"a": 2, b"b": 1}


# ---------------------------------------------------------------- the appends' guards


@pytest.mark.parametrize("append", ["append", "append_packed", "append_batches"])
def test_every_append_checks_writable_then_online_then_keys(tmp_path, append):
    def call(log, count):
        if append == "append":
            return log.append([b"v"] * count)
        if append == "append_packed":
            return log.append_packed(b"v\n" * count, np.ones(count, np.int64))
        return log.append_batches([encode_batch(0, [b"v"] * count)] if count else [])

    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("c", config={"cleanup.policy": "compact"})
        store.log("c", 0).fail("a write", EIO)  # offline and compacted: writable is first
    with Store(data, read_only=True) as reader:
        for count in (0, 1):
            with pytest.raises(ReadOnlyError):
                call(reader.log("c", 0), count)
    with Store(data) as store:
        log = store.log("c", 0)
        log.fail("a write", EIO)
        for count in (0, 1):  # offline comes before the keys and the empty append
            with pytest.raises(LogFailedError):
                call(log, count)
    with Store(data) as store:
        log = store.log("c", 0)
        assert call(log, 0) == 0  # nothing to append, nothing to refuse
        with pytest.raises(InvalidBatchError if append == "append_batches" else InvalidRecordError):
            call(log, 1)
