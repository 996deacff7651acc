import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logfs import Store
from logfs.core.errors import OffsetOutOfRangeError, ReadOnlyError, RecordTooLargeError


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as store:
        yield store


def small_topic(store, name="t", **config):
    settings = {"segment.bytes": 4096, "index.interval.bytes": 256, **config}
    store.create_topic(name, 1, {k: str(v) for k, v in settings.items()})
    return store.log(name, 0)


@pytest.mark.parametrize("codec", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_offset_reads_back_across_segments(store, codec):
    log = small_topic(store, **{"compression.type": codec})
    rng = random.Random(7)
    expected = []
    for _ in range(120):
        values = [
            bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))
            for _ in range(rng.randrange(1, 9))
        ]
        first = log.append(values)
        assert first == len(expected)
        expected += values
    assert len(log.segments) > 3
    for offset, value in enumerate(expected):
        assert log.read(offset).value == value
    assert [r.value for r in log.scan()] == expected
    assert [r.offset for r in log.scan(17, 40)] == list(range(17, 40))


def test_keys_headers_and_timestamps(store):
    log = small_topic(store)
    first = log.append(
        [b"v1", None], keys=[b"k1", None], headers=[[("h", b"x")], []], timestamp=[1000, 900]
    )
    a, b = log.read(first), log.read(first + 1)
    assert (a.key, a.value, a.headers, a.timestamp) == (b"k1", b"v1", (("h", b"x"),), 1000)
    assert (b.key, b.value, b.headers, b.timestamp) == (None, None, (), 900)


def test_out_of_range(store):
    log = small_topic(store)
    log.append([b"a"])
    for offset in (-1, 1, 10**12):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(offset)


def test_record_too_large_leaves_nothing(store):
    log = small_topic(store, **{"max.message.bytes": 1000})
    log.append([b"ok"])
    size = log.size_bytes
    with pytest.raises(RecordTooLargeError):
        log.append([b"fine", b"x" * 2000])
    assert log.next_offset == 1 and log.size_bytes == size
    # many small records that together exceed the limit are split into batches
    log.append([b"y" * 100] * 50)
    assert log.next_offset == 51


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=80), st.integers(-5, 10_010))
def test_offset_for_time_matches_brute_force(tmp_path_factory, stamps, target):
    with Store(tmp_path_factory.mktemp("d")) as store:
        log = small_topic(store, **{"segment.bytes": 600, "index.interval.bytes": 64})
        for i in range(0, len(stamps), 3):
            chunk = stamps[i : i + 3]
            log.append([b"v%d" % (i + j) for j in range(len(chunk))], timestamp=chunk)
        expected = next((o for o, t in enumerate(stamps) if t >= target), None)
        assert log.offset_for_time(target) == expected


@pytest.mark.parametrize("keep_from", [0, 1, 57, 150, 299, 300])
def test_retention_keeps_the_segments_from_a_mirrors_position(store, keep_from):
    log = small_topic(store, **{"retention.bytes": 1, "retention.ms": "1"})
    for i in range(300):
        log.append([b"%050d" % i], timestamp=1_000_000 + i)
    bases = [s.base_offset for s in log.segments]
    log.enforce_retention(2_000_000, keep_from)
    # everything below the segment holding keep_from may go, nothing from it on
    holder = max(b for b in bases if b <= keep_from)
    assert log.log_start_offset == holder
    assert list(log.scan(holder))[0].offset == holder
    log.enforce_retention(2_000_000)  # without it, retention takes every inactive segment
    assert log.log_start_offset == bases[-1]


def test_retention_by_bytes_and_time(store):
    log = small_topic(store, **{"retention.bytes": 8192})
    now = 1_000_000
    for i in range(300):
        log.append([b"%050d" % i], timestamp=now + i)
    before = len(log.segments)
    deleted = log.enforce_retention(now + 300)
    assert deleted > 0 and len(log.segments) == before - deleted
    assert log.size_bytes <= 8192 + 4096
    assert log.log_start_offset == log.segments[0].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0)
    store.set_topic_config("t", {"segment.bytes": "4096", "retention.ms": "10"})
    log.enforce_retention(now + 10_000)
    assert len(log.segments) == 1  # the active segment is never deleted
    assert next(log.scan()).offset == log.log_start_offset


def test_flush_advances_recovery_point(store):
    log = small_topic(store, **{"flush.messages": 3})
    log.append([b"a", b"b"])
    assert not log.flush_due(log.last_flush_ms) and log.unflushed_messages == 2
    log.append([b"c"])
    assert log.flush_due(log.last_flush_ms)
    log.flush()
    assert log.recovery_point == 3 and log.unflushed_messages == 0


def test_read_only_store_refuses_writes(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("t")
        store.log("t", 0).append([b"a"])
    with Store(tmp_path, read_only=True) as store:
        with pytest.raises(ReadOnlyError):
            store.log("t", 0).append([b"b"])
        with pytest.raises(ReadOnlyError):
            store.create_topic("u")
        assert store.log("t", 0).read(0).value == b"a"


def test_roll_on_segment_ms(tmp_path):
    clock = [1_000]
    with Store(tmp_path) as store:
        store.create_topic("t", 1, {"segment.ms": "100"})
        log = store.log("t", 0)
        log.clock = lambda: clock[0]
        log.append([b"a"], timestamp=1_000)
        clock[0] = 1_050
        log.append([b"b"], timestamp=1_050)
        assert len(log.segments) == 1
        clock[0] = 1_200
        log.append([b"c"], timestamp=1_200)
        assert [s.base_offset for s in log.segments] == [0, 2]


def test_what_the_mount_sees_of_the_segments(store):
    log = small_topic(store)
    assert (log.segment_count, log.active_base_offset) == (1, 0)
    for i in range(100):
        log.append([b"%050d" % i])
    assert log.segment_count == len(log.segments) > 1
    assert log.active_base_offset == log.segments[-1].base_offset > 0
    files = {n: log.segment_file(n) for n in log.segment_names()}
    on_disk = [n for n in os.listdir(log.dir) if n.endswith((".log", ".index", ".timeindex"))]
    # the active segment's indexes may not be on disk yet; their names are listed
    assert set(on_disk) <= set(files) and len(files) == 3 * log.segment_count
    assert all(os.path.isabs(p) and os.path.basename(p) == n for n, p in files.items())


def test_stream_of_a_reopened_log_is_counted_then_read(tmp_path):
    values = [b"value %d" % i + b"x" * (i % 13) for i in range(600)]
    expected = b"".join(v + b"\n" for v in values)
    with Store(tmp_path) as store:
        log = small_topic(store)
        for i in range(0, len(values), 10):
            log.append(values[i : i + 10])
        assert log.stream.uncounted() == [] and log.stream.size() == len(expected)
    with Store(tmp_path) as store:
        log = store.log("t", 0)
        uncounted = log.stream.uncounted()
        assert len(uncounted) > 1 and log.stream.size() is None
        for each in uncounted:
            log.stream.set_counted(each, log.stream.count(each))
        assert log.stream.uncounted() == []
        assert log.stream.size() == len(expected)
        for target in (0, 1, len(expected) // 2, len(expected) - 1):
            offset, position = log.stream.locate(target)
            assert position <= target
            assert position == sum(len(v) + 1 for v in values[:offset])
            data, after = log.stream.lines(offset, 1 << 20)
            assert bytes(data) == expected[position : position + len(data)]
            assert after > offset and bytes(data).count(b"\n") == after - offset
        assert log.stream.locate(len(expected)) == (log.next_offset, len(expected))


def test_stream_lines_below_the_first_segment(store):
    log = small_topic(store, **{"retention.bytes": 0})
    for i in range(100):
        log.append([b"%050d" % i])
    assert log.enforce_retention() > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.stream.lines(0, 1 << 20)
