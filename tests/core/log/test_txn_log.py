"""A partition's producer state, transactions and what read_committed readers see,
through the Store API: snapshots across rolls and restarts, markers and
``.txnindex``, the last stable offset, the stream and the live keys, recovery,
retention, the cleaner and ``logfs check``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from txn_helpers import append_txn, producer_batch

from logfs.core.errors import (
    InvalidBatchError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from logfs.core.log import FromStream, Store, clean_store
from logfs.core.storage import snapshot, txnindex
from logfs.core.tools.offline import check

SMALL = {"segment.bytes": "300"}  # a roll every few batches


def snapshots(log) -> list[int]:
    return snapshot.snapshot_offsets(log.dir)


def stream_text(log) -> bytes:
    stream = log.stream
    for segment in stream.uncounted():
        stream.set_counted(segment, stream.count(segment))
    out, offset = b"", log.log_start_offset
    while offset < log.next_offset:
        lines, after = stream.lines(offset, 1 << 20)
        if after <= offset:
            break
        out, offset = out + bytes(lines), after
    assert len(out) == stream.size()
    return out


KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from txn_helpers import append_txn, producer_batch
from logfs.core.log import Store
store = Store({data!r})
store.create_topic("t")
log = store.log("t", 0)
batches = [producer_batch(v, 1000, 0, s) for v, s in (([b"a", b"b"], 0), ([b"c", b"d"], 2))]
assert [log.append_batches([b]) for b in batches] == [0, 2]
log.roll()  # both batches are in an older segment now; the roll's snapshot is at 4
assert log.append_batches([producer_batch([b"e"], 1000, 0, 4)]) == 4
os.kill(os.getpid(), signal.SIGKILL)  # no clean close, no snapshot at the log end
"""


def test_a_retry_after_a_roll_and_a_restart_is_a_duplicate(tmp_path):
    """Five records in three batches, a roll, a kill -9 of the writer, then restarts:
    every batch retried is answered with its first offset, nothing is appended twice
    (the state comes from the roll's snapshot, then from the clean close's)."""
    data = tmp_path / "data"
    helpers = Path(__file__).resolve().parents[2] / "helpers"
    script = KILLED_WRITER.format(tests=str(helpers), data=str(data))
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    batches = [
        producer_batch([b"a", b"b"], 1000, 0, 0),
        producer_batch([b"c", b"d"], 1000, 0, 2),
        producer_batch([b"e"], 1000, 0, 4),
    ]
    for _ in range(2):  # after the kill, then after a clean close
        with Store(data) as store:
            log = store.log("t", 0)
            assert snapshot.snapshot_offsets(log.dir)[0] == 4
            assert [log.append_batches([b]) for b in batches] == [0, 2, 4]
            assert log.next_offset == 5
            with pytest.raises(OutOfOrderSequenceError):
                log.append_batches([producer_batch([b"x"], 1000, 0, 9)])
    with Store(data) as store:
        log = store.log("t", 0)
        assert log.append_batches([producer_batch([b"f"], 1000, 0, 5)]) == 5
        assert [r.value for r in log.scan()] == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_epochs_sequences_and_an_open_transaction(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append_batches([producer_batch([b"a"], 7, 3, 0)])
        with pytest.raises(InvalidProducerEpochError):
            log.append_batches([producer_batch([b"zombie"], 7, 2, 1)])
        with pytest.raises(OutOfOrderSequenceError):  # a new epoch starts at 0
            log.append_batches([producer_batch([b"b"], 7, 4, 3)])
        append_txn(log, [b"b"], 7, 4, 0)
        with pytest.raises(InvalidTxnStateError):  # a plain batch inside its transaction
            log.append_batches([producer_batch([b"c"], 7, 4, 1)])
        with pytest.raises(InvalidBatchError):  # transactional batches come from the listener
            log.append_batches([producer_batch([b"c"], 7, 4, 1, transactional=True)])
        with pytest.raises(InvalidProducerEpochError):  # a marker of a fenced epoch
            log.append_marker(7, 3, commit=True)
        assert log.next_offset == 2 and log.last_stable_offset == 1


def test_markers_the_lso_and_what_read_committed_sees(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append([b"plain0"])
        log.append_batches(
            [producer_batch([b"A1", b"A2"], 11, 0, 0, transactional=True)], transactional=True
        )  # 1, 2
        log.append_batches(
            [producer_batch([b"B1"], 22, 0, 0, transactional=True)], transactional=True
        )  # 3
        log.append([b"plain4"])  # 4: past the LSO until both decide
        assert log.last_stable_offset == 1
        assert [r.value for r in log.scan(committed=True)] == [b"plain0"]
        assert stream_text(log) == b"plain0\n"
        assert log.append_marker(22, 0, commit=False) == 5  # B aborts
        assert log.last_stable_offset == 1  # A still holds it
        assert log.append_marker(11, 0, commit=True) == 6
        assert log.last_stable_offset == 7 == log.next_offset
        assert log.aborted_transactions(0, 7) == [txnindex.AbortedTxn(22, 3, 5, 1)]
        assert [r.value for r in log.scan(committed=True)] == [b"plain0", b"A1", b"A2", b"plain4"]
        assert [r.value for r in log.scan()] == [b"plain0", b"A1", b"A2", b"B1", b"plain4"]
        assert stream_text(log) == b"plain0\nA1\nA2\nplain4\n"
        with pytest.raises(Exception, match="no record at offset 3"):
            log.read(3, committed=True)
        assert log.read(3).value == b"B1"
        from_two = FromStream(log, 2)
        assert bytes(from_two.lines(2, 1 << 20)[0]) == b"A2\nplain4\n" and from_two.size() == 10
        assert (log.dir / "00000000000000000000.txnindex").stat().st_size == 34
    with Store(data) as store:  # reopened: the same, from the files
        log = store.log("t", 0)
        assert log.aborted_transactions(0, 7) == [txnindex.AbortedTxn(22, 3, 5, 1)]
        assert stream_text(log) == b"plain0\nA1\nA2\nplain4\n"
        assert check(data) == []


def test_a_transaction_open_at_a_restart_holds_the_stream_until_it_ends(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append([b"before"])
        append_txn(log, [b"T"], 5, 0, 0)
        log.append([b"after"])
    with Store(data) as store:
        log = store.log("t", 0)
        assert log.last_stable_offset == 1 and log.open_transactions()[0].producer_id == 5
        assert stream_text(log) == b"before\n"
        log.append([b"later"])
        assert stream_text(log) == b"before\n"
        log.append_marker(5, 0, commit=True)
        assert stream_text(log) == b"before\nT\nafter\nlater\n"
        assert log.live_keys() == {}  # not compacted, but asking costs nothing wrong


def test_snapshots_at_rolls_kept_below_the_end_and_expired_producers_go(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", config=SMALL)
        log = store.log("t", 0)
        for seq in range(0, 12, 2):
            log.append_batches([producer_batch([b"x" * 40, b"y" * 40], 3, 0, seq)])
        taken = snapshots(log)
        assert taken and set(taken) <= {s.base_offset for s in log.segments}
    stray = snapshot.snapshot_path(data / "t-0", 10_000)
    stray.write_bytes(snapshot.encode([]))  # past the log end (a log cut after a crash)
    with Store(data) as store:
        log = store.log("t", 0)
        assert 10_000 not in snapshots(log)
        assert snapshots(log)[-1] == log.next_offset  # the clean close's
        assert 3 in log.producer_entries()
    now = int(time.time() * 1000)
    with Store(data) as store:
        log = store.log("t", 0)
        log.clock = lambda: now + 25 * 3600 * 1000  # a day without a batch
        log.roll()
        assert 3 not in log.producer_entries()  # forgotten at the roll's snapshot


def test_a_transaction_index_check_finds_and_repair_rebuilds(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        log = store.log("t", 0)
        append_txn(log, [b"a"], 8, 0, 0)
        log.append_marker(8, 0, commit=False)
        append_txn(log, [b"b"], 8, 0, 1)
        log.append_marker(8, 0, commit=False)
        path = log.segments[0].txn_index.path
    entries = Path(path).read_bytes()
    assert len(entries) == 2 * 34
    Path(path).write_bytes(entries[34:])  # the first aborted transaction lost
    problems = check(data)
    assert len(problems) == 1 and "no entry for the aborted transaction ending at 1" in problems[0]
    assert check(data, repair=True) == []
    assert Path(path).read_bytes() == entries


def test_the_cleaner_drops_aborted_records_and_old_markers(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("c", config={"cleanup.policy": "compact", "delete.retention.ms": "1000"})
        log = store.log("c", 0)
        log.append([b"v0"], keys=[b"k"])
        log.append_batches(
            [producer_batch([b"aborted"], 4, 0, 0, transactional=True, keys=[b"k"])],
            transactional=True,
        )
        log.append_marker(4, 0, commit=False)
        log.append_batches(
            [producer_batch([b"v1"], 4, 0, 1, transactional=True, keys=[b"j"])], transactional=True
        )
        log.append_marker(4, 0, commit=True)
        log.roll()
        assert log.live_keys() == {b"k": 0, b"j": 3}
        clean_store(store, force=True)
        assert [(r.offset, r.value) for r in log.scan()] == [(0, b"v0"), (3, b"v1")]
        assert log.live_keys() == {b"k": 0, b"j": 3}
        # the markers stay until delete.retention.ms; the commit's while its record stays
        assert [h.is_control for h, _ in log.raw_batches()] == [False, True, False, True]
        clean_store(store, force=True, now_ms=int(time.time() * 1000) + 10_000)
        kinds = [(h.base_offset, h.is_control) for h, _ in log.raw_batches()]
        assert kinds == [(0, False), (3, False), (4, True)]
    assert check(data) == []
