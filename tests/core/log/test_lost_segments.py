"""Segment files removed or replaced under a live writer, or missing at the
next open: no offset is ever handed out twice. A live writer's partition goes
offline with the reason and leaves an empty segment at its next offset; the
next open goes on at the highest offset handed out, past a gap, and `check`
reports the missing range."""

from __future__ import annotations

import os

import pytest
from txn_helpers import append_txn

from logfs import Store
from logfs.core.errors import CorruptRecordError, LogFailedError, OffsetOutOfRangeError
from logfs.core.log import FromStream
from logfs.core.storage import segment_name
from logfs.core.tools.offline import check


def filled(data, n: int = 100, **config) -> None:
    with Store(data) as store:
        store.create_topic("t", 1, {k.replace("_", "."): v for k, v in config.items()})
        store.create_topic("other")
        log = store.log("t", 0)
        for i in range(n):  # a batch each: small segments roll often
            log.append([b"r%d" % i])
        store.log("other", 0).append([b"o"])


def remove_segments(data, topic: str = "t", *, last: int | None = None) -> list[int]:
    """Remove the segments' files (the last ``last`` only, if given); their bases."""
    directory = data / f"{topic}-0"
    bases = sorted({int(n.split(".")[0]) for n in os.listdir(directory) if n.endswith(".log")})
    gone = bases if last is None else bases[-last:]
    for name in os.listdir(directory):
        if name.endswith((".log", ".index", ".timeindex")) and int(name.split(".")[0]) in gone:
            os.unlink(directory / name)
    return gone


def test_a_partition_whose_segments_are_all_gone_goes_on_at_the_offsets_handed_out(tmp_path):
    data = tmp_path / "data"
    filled(data)
    remove_segments(data)
    assert any("offsets 0..99 are missing" in p for p in check(data))
    with Store(data) as store:
        log = store.log("t", 0)
        assert store.failures() == {}
        assert log.log_start_offset == log.next_offset == 100
        assert log.append([b"again"]) == 100  # never an offset below 100 again
        store.log("other", 0).append([b"fine"])
    with Store(data) as store:
        assert store.log("t", 0).read(100).value == b"again"


def test_the_last_segments_gone_leave_a_gap_that_reads_and_check_see(tmp_path):
    data = tmp_path / "data"
    filled(data, segment_bytes=300)
    with Store(data) as store:
        assert store.log("t", 0).segment_count > 3
    gone = remove_segments(data, last=2)
    with Store(data) as store:
        log = store.log("t", 0)
        assert log.next_offset == 100
        assert log.read(gone[0] - 1).value == b"r%d" % (gone[0] - 1)  # what remains is served
        with pytest.raises(CorruptRecordError):
            log.read(gone[0])  # the gap: as damage, not as an offset out of range
        assert log.append([b"on"]) == 100
    problems = check(data)
    assert any(f"offsets {gone[0]}..99 are missing" in p for p in problems), problems


def test_the_active_segment_removed_under_a_live_writer(tmp_path):
    data = tmp_path / "data"
    filled(data)
    with Store(data) as store:
        log = store.log("t", 0)
        log.flush()
        os.unlink(log.segment_file(log.segment_names()[1]))  # its .log
        log.append([b"into a removed file"])  # offset 100: acknowledged, then lost
        assert log.check_files() is False
        assert "removed" in store.failures()["t-0"]
        with pytest.raises(LogFailedError):
            log.append([b"more"])
        with pytest.raises(LogFailedError):
            log.flush()
        assert (data / "t-0" / segment_name(101, ".log")).exists()  # the mark
    with Store(data) as store:  # the next open goes on past every offset handed out
        log = store.log("t", 0)
        assert store.failures() == {}
        assert log.append([b"x"]) == 101


def test_the_active_segment_replaced_under_a_live_writer(tmp_path):
    data = tmp_path / "data"
    filled(data)
    with Store(data) as store:
        log = store.log("t", 0)
        path = log.segment_file(log.segment_names()[1])
        log.append([b"one more"])
        log.flush()  # the file is open
        assert log.check_files() is True
        other = tmp_path / "other.log"
        other.write_bytes(b"")
        os.replace(other, path)
        log.append([b"after the swap"])
        with pytest.raises(LogFailedError):
            log.flush()
        assert "replaced" in store.failures()["t-0"]
        assert "other-0" not in store.failures()
    with Store(data) as store:
        assert store.log("t", 0).append([b"x"]) == 102


def test_repair_keeps_the_offsets_handed_out(tmp_path):
    data = tmp_path / "data"
    filled(data, segment_bytes=300)
    gone = remove_segments(data, last=1)
    assert check(data, repair=True) == []  # nothing more a repair could do
    assert check(data) == [  # but the range stays named
        f"{data / 't-0' / segment_name(100, '.log')}: "
        f"offsets {gone[0]}..99 are missing before this segment"
    ]
    with Store(data) as store:
        assert store.log("t", 0).append([b"after the repair"]) == 100


def test_a_mark_after_earlier_segments_is_kept_below_an_old_recovery_point(tmp_path):
    """The active segment lost after a roll, its offsets never fsynced: the mark at
    the next offset is all that says how far offsets went, and recovery keeps it."""
    data = tmp_path / "data"
    filled(data)
    with Store(data) as store:
        log = store.log("t", 0)
        log.roll()
        log.append([b"a", b"b"])  # 100, 101: not fsynced, the recovery point stays at 100
        os.unlink(log.segment_file(segment_name(100, ".log")))
        assert log.check_files() is False
    with Store(data) as store:
        log = store.log("t", 0)
        assert log.next_offset == 102
        assert log.append([b"c"]) == 102


def test_a_gap_at_the_log_end_reads_as_damage_never_as_the_end(tmp_path):
    """Offsets handed out whose records are lost, with nothing after them yet: every
    read below the log end fails as damage (the mount's EIO, Kafka's
    CORRUPT_MESSAGE); at the end, reads answer as at any log's end."""
    data = tmp_path / "data"
    filled(data, segment_bytes=300)
    lost = remove_segments(data, last=2)[0]
    with Store(data) as store:
        log = store.log("t", 0)
        assert log.next_offset == 100
        for offset in (lost, 99):
            with pytest.raises(CorruptRecordError, match=f"t-0 at offset {offset}"):
                log.read(offset)
            with pytest.raises(CorruptRecordError, match=f"t-0 at offset {offset}"):
                log.file_region(offset, 1 << 20)  # a Fetch
        with pytest.raises(CorruptRecordError, match=f"t-0 at offset {lost}"):
            list(log.raw_batches(0))
        assert [r.value for r in log.scan(0, lost)] == [b"r%d" % i for i in range(lost)]
        with pytest.raises(CorruptRecordError, match=f"offsets {lost}..99 are missing"):
            log.stream.check_end()  # a reader at the stream's last byte
        with pytest.raises(CorruptRecordError):
            FromStream(log, 0).check_end()
        with pytest.raises(CorruptRecordError):
            FromStream(log, lost)  # from/<n> of a lost offset
        with pytest.raises(OffsetOutOfRangeError):
            log.read(100)
        assert log.file_region(100, 1 << 20) is None
        FromStream(log, 100).check_end()  # from the end on: nothing is missing
        assert log.append([b"on"]) == 100
        log.stream.check_end()  # records follow the gap now: the stream ends with them
        with pytest.raises(CorruptRecordError):
            log.file_region(lost, 1 << 20)  # still damage, never a skip to offset 100
    with Store(data) as store:  # the same after a reopen
        log = store.log("t", 0)
        with pytest.raises(CorruptRecordError, match=f"t-0 at offset {lost}"):
            log.read(lost)
        assert log.read(100).value == b"on"


def test_a_compacted_log_cut_at_its_end_reads_its_holes_as_absent(tmp_path):
    """Holes are a compacted log's own (the cleaner leaves them): a missing offset
    there is no record, not damage, wherever it is."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "300"})
        log = store.log("c", 0)
        for i in range(60):
            log.append([b"v%d" % i], keys=[b"k%d" % i])
    lost = remove_segments(data, "c", last=1)[0]
    with Store(data) as store:
        log = store.log("c", 0)
        assert log.next_offset == 60
        with pytest.raises(OffsetOutOfRangeError):
            log.read(lost)
        assert log.file_region(lost, 1 << 20) is None
        assert len(list(log.raw_batches(0))) == lost
        log.stream.check_end()


def test_an_open_transaction_ends_the_stream_before_a_gap_at_the_log_end(tmp_path):
    """A stream (as a ``read_committed`` Fetch) ends at the first offset of an open
    transaction: lost records past it are not reached, so its end is no error."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append([b"before"])
        assert append_txn(log, [b"open"], 1000, 0, 0) == 1
        for i in range(3):
            log.append([b"after %d" % i])
    segment = data / "t-0" / segment_name(0, ".log")
    with open(segment, "r+b") as f:
        f.truncate(os.path.getsize(segment) - 1)  # the last batch torn: offset 4 lost
    with Store(data) as store:
        log = store.log("t", 0)
        assert (log.next_offset, log.last_stable_offset) == (5, 1)
        with pytest.raises(CorruptRecordError, match="t-0 at offset 4"):
            log.read(4)
        log.stream.check_end()
        assert log.file_region(4, 1 << 20, log.last_stable_offset) is None
