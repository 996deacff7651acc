"""Kafka's time rules for segments, on an injected clock: the last time-index
entry is written when a segment is closed or rolled, so time retention works
after a reopen; a segment without a time entry is as old as its ``.log`` file's
modification time; a segment's age (segment.ms) counts from its first batch's
timestamp, by the log's clock."""

from __future__ import annotations

import os

from logfs.core.config import TopicConfig
from logfs.core.log import Log
from logfs.core.storage.index import TimeIndex

T0 = 1_000_000_000  # far from the wall clock: a reading of the wall clock shows
MINUTE = 60_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path, clock, **overrides) -> Log:
    config = TopicConfig.from_properties(
        {"segment.bytes": "1000", "index.interval.bytes": "4096", **overrides}
    )
    return Log(path, "t", 0, config, clock=clock)


def test_time_retention_deletes_an_expired_segment_after_a_reopen(tmp_path):
    clock = Clock(T0)
    log = open_log(tmp_path, clock, **{"retention.ms": str(10 * MINUTE)})
    for i in range(40):
        log.append([b"record %03d" % i] * 5)
    active = log.active_base_offset
    assert log.segment_count > 2
    log.close()
    # every segment's time index ends with its largest timestamp, the active one's too
    for name in sorted(os.listdir(tmp_path)):
        if name.endswith(".timeindex"):
            index = TimeIndex(str(tmp_path / name), int(name[:20]), 1 << 20, writable=False)
            index.load()
            assert index.last is not None and index.last.timestamp == T0, name

    clock.now = T0 + 5 * MINUTE
    log = open_log(tmp_path, clock, **{"retention.ms": str(10 * MINUTE)})
    log.append([b"later"] * 200)  # rolls: the segment active at close is an old one now
    assert log.active_base_offset != active
    assert log.enforce_retention() == 0  # nothing is 10 minutes old yet
    log.close()

    clock.now = T0 + 11 * MINUTE
    log = open_log(tmp_path, clock, **{"retention.ms": str(10 * MINUTE)})
    deleted = log.enforce_retention()
    assert deleted > 0
    assert log.log_start_offset > active  # the segment active at the first close went too
    assert [r.value for r in log.scan()][-1] == b"later"
    log.close()


def test_a_segment_without_timestamps_ages_by_its_file_time(tmp_path):
    clock = Clock(T0)
    log = open_log(tmp_path, clock, **{"retention.ms": str(10 * MINUTE)})
    for i in range(20):  # records without timestamps (-1), as old clients wrote them
        log.append([b"untimed %03d" % i] * 5, timestamp=-1)
    old = [s.log_path for s in log.segments[:-1]]
    log.close()
    for path in old:  # written 20 minutes before the clock's now
        os.utime(path, ns=((T0 - 20 * MINUTE) * 1_000_000,) * 2)
    log = open_log(tmp_path, clock, **{"retention.ms": str(10 * MINUTE)})
    assert log.enforce_retention() == len(old)
    log.close()


def test_segment_age_counts_from_the_first_batch_by_the_logs_clock(tmp_path):
    """A multi-batch append into an empty segment: the age is from its first batch's
    timestamp (the log's clock), not from the wall clock when the segment was made."""
    clock = Clock(T0)
    log = open_log(
        tmp_path,
        clock,
        **{
            "segment.ms": str(MINUTE),
            "segment.bytes": str(1 << 20),
            "max.message.bytes": "600",
        },
    )
    log.append([b"x" * 100] * 20)  # several batches, the first into the empty segment
    assert log.segment_count == 1
    clock.now = T0 + MINUTE // 2
    log.append([b"young"])
    assert log.segment_count == 1
    clock.now = T0 + 2 * MINUTE
    log.append([b"old enough to roll"])
    assert log.segment_count == 2
    log.close()
