import bisect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from logfs.core.errors import CorruptIndexError
from logfs.core.storage.index import (
    OFFSET_ENTRY,
    TIME_ENTRY,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
)


def test_entry_layouts():
    assert OFFSET_ENTRY.itemsize == 8
    assert TIME_ENTRY.itemsize == 12


def test_empty_index_answers_base(tmp_path):
    index = OffsetIndex(str(tmp_path / "x.index"), 100, 1 << 20, writable=True)
    assert index.lookup(150) == OffsetPosition(100, 0)


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=200, unique=True), st.integers(0, 1200))
def test_lookup_is_largest_lower_bound(tmp_path_factory, deltas, target):
    path = tmp_path_factory.mktemp("idx") / "00000000000000000050.index"
    index = OffsetIndex(str(path), 50, 1 << 20, writable=True)
    offsets = sorted(50 + d for d in deltas)
    for i, offset in enumerate(offsets):
        index.append(offset, i * 10)
    index.close()
    reloaded = OffsetIndex(str(path), 50, 1 << 20, writable=False)
    reloaded.load()
    i = bisect.bisect_right(offsets, 50 + target) - 1
    expected = OffsetPosition(offsets[i], i * 10) if i >= 0 else OffsetPosition(50, 0)
    assert reloaded.lookup(50 + target) == expected
    j = bisect.bisect_left(offsets, 50 + target)  # the first entry at or past it
    after = OffsetPosition(offsets[j], j * 10) if j < len(offsets) else None
    assert reloaded.first_at_least(50 + target) == after


def test_file_format_is_big_endian_relative(tmp_path):
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(str(path), 1000, 1 << 20, writable=True)
    index.append(1005, 4200)
    index.close()
    assert path.read_bytes() == (5).to_bytes(4, "big") + (4200).to_bytes(4, "big")
    tpath = tmp_path / "00000000000000001000.timeindex"
    tindex = TimeIndex(str(tpath), 1000, 1 << 20, writable=True)
    tindex.maybe_append(1_700_000_000_000, 1005)
    tindex.maybe_append(1_600_000_000_000, 1006)  # not larger: no entry
    tindex.close()
    assert tpath.read_bytes() == (1_700_000_000_000).to_bytes(8, "big") + (5).to_bytes(4, "big")


def test_kafka_preallocated_zero_tail_is_ignored(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    entries = np.array([(10, 4100), (20, 8300)], dtype=OFFSET_ENTRY).tobytes()
    path.write_bytes(entries + bytes(8 * 1000))
    index = OffsetIndex(str(path), 0, 10 << 20, writable=False)
    index.load()
    assert len(index) == 2 and index.lookup(25) == OffsetPosition(20, 8300)


def test_out_of_order_or_partial_index_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(np.array([(20, 8300), (10, 4100)], dtype=OFFSET_ENTRY).tobytes())
    with pytest.raises(CorruptIndexError, match="order"):
        OffsetIndex(str(path), 0, 1 << 20, writable=False).load()
    path.write_bytes(bytes(13))
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(str(path), 0, 1 << 20, writable=False).load()


def test_full_index(tmp_path):
    index = OffsetIndex(str(tmp_path / "a.index"), 0, 16, writable=True)
    index.append(1, 10)
    assert not index.is_full
    index.append(2, 20)
    assert index.is_full


def test_check_rejects_positions_outside_the_log(tmp_path):
    """Regression (found by the corruption property test): a garbled entry at
    position -2**31 passed the check and recovery then read at that position."""
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(np.array([(0, -(2**31))], dtype=OFFSET_ENTRY).tobytes())
    index = OffsetIndex(str(path), 0, 1 << 20, writable=False)
    index.load()
    with pytest.raises(CorruptIndexError, match="position -2147483648"):
        index.check(1000)
    path.write_bytes(np.array([(5, 100), (9, 1000)], dtype=OFFSET_ENTRY).tobytes())
    index.load()
    with pytest.raises(CorruptIndexError, match="log is 1000 bytes"):
        index.check(1000)
    index.check(1001)


def test_entries_are_pending_until_write_pending(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(str(path), 0, 1 << 20, writable=True)
    index.append(5, 100)
    index.fileno()  # the fd to fsync: writes nothing by itself
    assert path.read_bytes() == b""
    index.write_pending()
    assert path.read_bytes() == np.array([(5, 100)], dtype=OFFSET_ENTRY).tobytes()
    index.append(9, 200)
    index.close()  # closing writes what is pending
    assert len(path.read_bytes()) == 2 * OFFSET_ENTRY.itemsize


@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(1, 9000), st.integers(1, 500), st.integers(-1, 10_000)),
            min_size=1,
            max_size=40,
        ),
        min_size=1,
        max_size=5,
    ),  # fmt: skip
    st.integers(0, 8192),
)
def test_bulk_indexing_is_kafkas_batch_by_batch_rule(tmp_path_factory, appends, interval):
    """A segment's books (`SegmentTail`) against Kafka's rule applied one batch at a
    time: update the running max timestamp, then index when more than
    index.interval.bytes were appended since the last entry. The same entries
    whether the batches come many at once (`appended_batches`, and opening's
    `index_batches`) or one by one (`appended`, the line path's)."""
    from logfs.core.config import TopicConfig
    from logfs.core.storage.segment import LogSegment

    path = tmp_path_factory.mktemp("bulk")
    config = TopicConfig(index_interval_bytes=interval)
    bulk = LogSegment(str(path), 0, config, writable=True)
    single = LogSegment(str(path), 1 << 40, config, writable=True)
    offsets, times = [], []
    max_ts, offset_of_max, since, position, next_offset = -1, 0, 0, 0, 0
    for batches in appends:
        sizes, lasts, stamps = [], [], []
        for size, count, ts in batches:
            last = next_offset + count - 1
            if ts > max_ts:
                max_ts, offset_of_max = ts, last
            if since > interval:
                offsets.append((last, position))
                if not times or (max_ts > times[-1][0] and offset_of_max > times[-1][1]):
                    times.append((max_ts, offset_of_max))
                since = 0
            since += size
            position += size
            next_offset = last + 1
            sizes.append(size)
            lasts.append(last)
            stamps.append(ts)
            single.tail.appended(size, last + (1 << 40), ts, 1)
        columns = (np.array(c, np.int64) for c in (sizes, lasts, stamps, [1] * len(sizes)))
        bulk.tail.appended_batches(*columns)
    for segment, base in ((bulk, 0), (single, 1 << 40)):
        got = segment.offset_index
        assert [got.entry(i) for i in range(len(got))] == [(o + base, p) for o, p in offsets]
        got = segment.time_index
        assert [got.entry(i) for i in range(len(got))] == [(t, o + base) for t, o in times]
        assert (segment.max_timestamp, segment.tail.offset_of_max) == (max_ts, offset_of_max + base)
        assert (segment.size, segment.next_offset) == (position, next_offset + base)
        assert segment.tail.bytes_since_index_entry == since
        segment.close(write=False)
