"""`Log.file_region`, the slice a Kafka Fetch sends, against an oracle that
reads every batch header of the partition: logs of batches of many sizes over
several segments, offset indexes dense and sparse (the one-header lookup and
the walk after a sparse entry), limits below, at and past a batch's size, with
and without an end offset (a last stable offset) and the first-batch rule."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logfs.core.config import TopicConfig
from logfs.core.errors import OffsetOutOfRangeError
from logfs.core.log import Log


def expected(log: Log, offset: int, max_bytes: int, end: int | None, min_one: bool):
    """(segment base, position, size) as Kafka's broker slices it, or None."""
    end = log.next_offset if end is None else min(end, log.next_offset)
    if offset >= end:
        return None
    for segment in log.segments:
        headers = [(pos, h) for pos, h, _ in segment.batches(0, verify=False)]
        holding = [(pos, h) for pos, h in headers if h.last_offset >= offset]
        if not holding:
            continue
        position, first = holding[0]
        if first.last_offset >= end:  # the batch holding the end is never sent
            return None
        stop = next((pos for pos, h in headers if h.last_offset >= end), segment.size)
        size = min(stop - position, max(max_bytes, first.size) if min_one else max_bytes)
        return (segment.base_offset, position, size) if size > 0 else None
    return None


def filled(path, sizes: list[list[int]], interval: int, segment_bytes: int) -> Log:
    config = TopicConfig.from_properties(
        {"index.interval.bytes": str(interval), "segment.bytes": str(segment_bytes)}
    )
    log = Log(path, "t", 0, config)
    for batch in sizes:
        log.append([b"v" * n for n in batch])
    return log


BATCHES = st.lists(st.lists(st.integers(0, 3000), min_size=1, max_size=5), min_size=1, max_size=40)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=BATCHES,
    interval=st.sampled_from([1, 4096, 1 << 20]),
    segment_bytes=st.sampled_from([6000, 1 << 20]),
    asks=st.lists(
        st.tuples(
            st.floats(0, 1),
            st.integers(-1, 40_000),
            st.one_of(st.none(), st.floats(0, 1.1)),
            st.booleans(),
        ),
        min_size=1,
        max_size=25,
    ),
)
def test_file_region_is_kafkas_slice(tmp_path_factory, sizes, interval, segment_bytes, asks):
    log = filled(tmp_path_factory.mktemp("t") / "t-0", sizes, interval, segment_bytes)
    try:
        bases = {s.fileno(): s.base_offset for s in log.segments}
        n = log.next_offset
        for at, max_bytes, end_at, min_one in asks:
            offset = int(at * n)
            end = None if end_at is None else int(end_at * n)
            got = log.file_region(offset, max_bytes, end, min_one_batch=min_one)
            if got is not None:
                got = (bases[got[0]], got[1], got[2])
            assert got == expected(log, offset, max_bytes, end, min_one), (offset, end)
    finally:
        log.close()


def test_the_next_fetch_starts_where_the_last_was_cut(tmp_path):
    """A consumer's walk: each fetch from the offset after the last whole batch it got."""
    log = filled(tmp_path / "t-0", [[700] * 3] * 60, 4096, 1 << 20)
    try:
        offset, seen = 0, 0
        while offset < log.next_offset:
            fd, position, size = log.file_region(offset, 10_000, None)
            headers = list(log.segments[0].batches(position, verify=False))
            whole = [h for pos, h, _ in headers if pos + h.size <= position + size]
            assert whole and whole[0].base_offset <= offset <= whole[0].last_offset
            seen += sum(h.records_count for h in whole)
            offset = whole[-1].next_offset
        assert seen == log.next_offset
        assert log.file_region(log.next_offset, 10_000, None) is None
        with pytest.raises(OffsetOutOfRangeError):
            log.file_region(log.next_offset + 1, 10_000, None)
    finally:
        log.close()
