"""Segment files removed or replaced under a live writer, or missing at the
next open: no offset is ever handed out twice. A live writer's partition goes
offline with the reason and leaves an empty segment at its next offset; the
next open goes on at the highest offset handed out, past a gap, and `check`
reports the missing range."""

from __future__ import annotations

import os

import pytest

from logfs import Store
from logfs.core.errors import LogFailedError, LogfsError
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
        with pytest.raises(LogfsError):
            log.read(gone[0])  # the gap: as an offset out of range
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
