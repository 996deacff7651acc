"""The roll rule, Kafka's (``LogSegment.shouldRoll`` and ``timeWaitedForRoll``), written
once in a segment's books (core/storage/books.pyx): as tables of numbers, then through
every append path — `Log.append`, `append_packed`, `append_batches` and the line path."""

from __future__ import annotations

import pytest

from logfs.core.config import TopicConfig
from logfs.core.format.record import HEADER_SIZE, encode_batch
from logfs.core.log import Log
from logfs.core.storage.books import should_roll, time_waited_for_roll

NOW = 1_700_000_000_000
DAY = 24 * 3600 * 1000

ROLL = [
    # segment size, batch size, waited, index full, offset overflow -> roll?
    # (segment.bytes=1000, segment.ms=100)
    (0, 5000, 0, False, False, False),  # an empty segment takes any batch
    (500, 500, 0, False, False, False),
    (501, 500, 0, False, False, True),
    (10, 10, 101, False, False, True),
    (10, 10, 100, False, False, False),
    (10, 10, -DAY, False, False, False),  # a batch older than the first waits for nothing
    (0, 10, 10_000, False, False, False),  # an empty segment never rolls on age
    (10, 10, 0, True, False, True),
    (0, 10, 0, True, False, True),  # a full index rolls whatever the size (Kafka's)
    (10, 10, 0, False, True, True),
]


@pytest.mark.parametrize("size, batch, waited, full, overflow, expected", ROLL)
def test_should_roll(size, batch, waited, full, overflow, expected):
    assert should_roll(size, batch, 1000, waited, 100, full, overflow) is expected


WAITED = [
    # now, the batch's max timestamp, the first batch's, created -> waited
    (NOW, 0, 0, NOW - DAY, 0),  # stamped long ago, both: no time passed between them
    (NOW, 5000, 0, NOW - DAY, 5000),  # an old segment, a batch 5 s after its first
    (NOW, NOW - DAY, NOW, NOW - 10, -DAY),  # a batch older than the first one
    (NOW, NOW + DAY, NOW, NOW - 10, DAY),  # from the future: the message time counts
    (NOW, NOW, NOW + DAY, NOW - 10, -DAY),  # the first batch from the future
    (NOW, 0, -1, NOW - 7000, 7000),  # the first batch has no timestamp: the clock counts
    (NOW, -1, -1, NOW - 7000, 7000),
]


@pytest.mark.parametrize("now, message, first, created, waited", WAITED)
def test_time_waited_for_roll(now, message, first, created, waited):
    assert time_waited_for_roll(now, message, first, created) == waited


def log_of(tmp_path, clock=lambda: NOW, **config) -> Log:
    properties = {k.replace("_", "."): str(v) for k, v in config.items()}
    return Log(tmp_path / "t-0", "t", 0, TopicConfig.from_properties(properties), clock=clock)


@pytest.mark.parametrize("stamp", [0, NOW - 400 * DAY])
def test_batches_stamped_long_ago_fill_each_segment_to_segment_bytes(tmp_path, stamp):
    """The benchmark's producer batches, stamped 0: with the wall clock each one
    started a segment of its own; by message time they fill segments as any do."""
    log = log_of(tmp_path, segment_bytes=64 << 10, segment_ms=3_600_000)
    batch = encode_batch(0, [b"v" * 100] * 150, timestamps=stamp)
    for _ in range(60):  # 20 segments of 3
        log.append_batches([batch])
    per_segment = (64 << 10) // len(batch)  # as many whole batches as segment.bytes holds
    sizes = [s.size for s in log.segments]
    assert sizes == [per_segment * len(batch)] * (60 // per_segment)
    assert log.next_offset == 60 * 150 and [r.value for r in log.scan(8999)] == [b"v" * 100]
    log.close()


def test_a_batch_stamped_segment_ms_after_the_first_rolls(tmp_path):
    """Message time against the first batch's: the clock does not move here."""
    log = log_of(tmp_path, segment_ms=1000)
    log.append([b"a"], timestamp=5000)
    log.append([b"b"], timestamp=6000)  # 1000 ms after the first: not more than segment.ms
    log.append([b"c"], timestamp=1000)  # older than the first: waits for nothing
    assert log.segment_count == 1
    log.append([b"d"], timestamp=6001)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.append([b"e"], timestamp=7000)  # the new segment's age counts from "d"
    assert log.segment_count == 2
    log.close()


def test_a_segment_whose_first_batch_has_no_timestamp_rolls_on_the_clock(tmp_path):
    """Kafka's exception: no timestamp in the first batch, so the log's clock
    against when the segment was created."""
    clock = [NOW]
    log = log_of(tmp_path, clock=lambda: clock[0], segment_ms=1000)
    log.append([b"a"], timestamp=-1)
    clock[0] += 1000
    log.append([b"b"], timestamp=NOW + 10 * DAY)
    assert log.segment_count == 1
    clock[0] += 1
    log.append([b"c"], timestamp=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_segment_jitter_rolls_each_segment_sooner_by_its_own_draw(tmp_path):
    """segment.jitter.ms: each segment rolls segment.ms less its own random share
    (below min(segment.jitter.ms, segment.ms)) after its first batch, as Kafka's
    ``rollJitterMs``; without it, exactly at segment.ms."""
    log = log_of(tmp_path, segment_ms=1000, segment_jitter_ms=600)
    rolled_at = []
    for stamp in range(0, 200_000, 10):  # a batch every 10 ms of message time
        before = log.segment_count
        log.append([b"x"], timestamp=stamp)
        if log.segment_count > before:
            rolled_at.append(stamp)
    firsts = [0, *rolled_at]
    waits = [b - a for a, b in zip(firsts, firsts[1:], strict=False)]
    assert all(400 < w <= 1010 for w in waits), waits  # segment.ms less a jitter below 600
    assert len(set(waits)) > 1  # drawn per segment, not once
    log.close()


def test_the_first_timestamp_of_a_reopened_segment_is_read_from_its_file(tmp_path):
    log = log_of(tmp_path, segment_ms=1000)
    log.append([b"a"], timestamp=5000)
    log.close()
    log = log_of(tmp_path, segment_ms=1000)
    assert log.active_segment.first_timestamp == 5000
    log.append([b"b"], timestamp=5900)
    assert log.segment_count == 1
    log.append([b"c"], timestamp=6001)
    assert log.segment_count == 2
    log.close()


def test_the_line_path_rolls_where_the_general_path_does(tmp_path):
    """The line path asks the same rule; a roll due sends it to the general path,
    which rolls: by size, and by time against the first batch's."""
    clock = [NOW]
    log = log_of(tmp_path, clock=lambda: clock[0], segment_bytes=1000, segment_ms=1000)
    value = b"x" * 100
    size = HEADER_SIZE + 8 + len(value)  # one record of 100 bytes as a batch
    taken = [log.append_line(value) for _ in range(1000 // size)]
    assert None not in taken and log.segment_count == 1
    assert log.append_line(value) is None  # over segment.bytes: declined
    log.append([value])
    assert log.segment_count == 2
    assert log.append_line(value) is not None
    clock[0] += 1001
    assert log.append_line(value) is None  # segment.ms after the first batch: declined
    log.append([value])
    assert log.segment_count == 3
    log.close()


@pytest.mark.parametrize("line", [False, True], ids=["general", "line"])
def test_a_full_index_rolls_the_segment(tmp_path, line):
    """segment.index.bytes=24: three offset entries; with index.interval.bytes=0
    every batch after the first adds one, so the fifth batch starts a segment."""
    log = log_of(tmp_path, segment_index_bytes=24, index_interval_bytes=0)
    for i in range(4):
        assert (log.append_line(b"v") if line else log.append([b"v"])) == i
    assert log.segment_count == 1 and log.active_segment.offset_index.is_full
    if line:
        assert log.append_line(b"v") is None  # declined: the general path rolls
    log.append([b"v"])
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert not log.active_segment.offset_index.is_full
    log.close()
