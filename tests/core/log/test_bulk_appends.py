"""The bulk appends (`append_packed`, `append_lines`, `append_batches`) write their batches as
one `BatchRun`: the roll rule asked over arrays (`SegmentTail.roll_point`),
each segment's share written at once and indexed in bulk. Checked against
the general path, batch by batch, which must leave the same files."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logfs.core.config import TopicConfig
from logfs.core.errors import TooLargeError
from logfs.core.format import frame_lengths, line_lengths
from logfs.core.format.batching import BatchRun
from logfs.core.format.record import TIMESTAMP_TYPE_BIT, encode_batch, read_header, verify_crc
from logfs.core.format.validate import prepare_run
from logfs.core.log import Log

NOW = 1_700_000_000_000


def log_of(path, clock=lambda: NOW, **config) -> Log:
    properties = {k.replace("_", "."): str(v) for k, v in config.items()}
    return Log(path, "t", 0, TopicConfig.from_properties(properties), clock=clock)


def files_of(log: Log) -> list[tuple[int, bytes, list]]:
    """Each segment's base offset, file bytes and index entries."""
    out = []
    for segment in log.segments:
        with open(segment.log_path, "rb") as f:
            data = f.read()
        entries = [
            [index.entry(i) for i in range(len(index))]
            for index in (segment.offset_index, segment.time_index)
        ]
        out.append((segment.base_offset, data, entries))
    return out


SMALL = {"segment_bytes": 3000, "index_interval_bytes": 500}


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.binary(min_size=0, max_size=300).filter(lambda v: b"\n" not in v),
        min_size=32,
        max_size=200,
    )
)
def test_packed_lines_leave_the_files_the_general_path_leaves(tmp_path_factory, values):
    """`append_packed` (one run, rolled over arrays) against `append` of the
    same values (batch by batch): same segments, bytes and index entries."""
    base = tmp_path_factory.mktemp("packed")
    general, bulk = log_of(base / "a", **SMALL), log_of(base / "b", **SMALL)
    general.append(values)
    packed = b"".join(v + b"\n" for v in values)
    bulk.append_packed(packed, line_lengths(packed, len(packed)))
    assert files_of(bulk) == files_of(general)
    assert len(general.segments) > 1 or len(packed) < 3000
    assert bulk.next_offset == len(values)
    assert [r.value for r in bulk.scan(0, len(values))] == values
    general.close()
    bulk.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=200))
def test_packed_frames_leave_the_files_the_general_path_leaves(tmp_path_factory, values):
    """``append.bin`` frames cut in one compiled pass (`frame_lengths`) and encoded
    where they lie (`append_packed` with the next frame's length as each value's
    gap) against `append` of the same values: same segments, bytes and index
    entries; any bytes, newlines included; few frames go through the general encoder."""
    base = tmp_path_factory.mktemp("frames")
    general, bulk = log_of(base / "a", **SMALL), log_of(base / "b", **SMALL)
    general.append(values)
    data = b"".join(len(v).to_bytes(4, "big") + v for v in values) + b"\0\0"  # a frame begun
    lengths, used = frame_lengths(data, 300)
    assert lengths.tolist() == [len(v) for v in values] and used == len(data) - 2
    bulk.append_packed(memoryview(data)[4:used], lengths, gap=4)
    assert files_of(bulk) == files_of(general)
    assert [r.value for r in bulk.scan(0, len(values))] == values
    with pytest.raises(TooLargeError):
        frame_lengths(data, max(len(v) for v in values) - 1)
    general.close()
    bulk.close()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 40), st.integers(0, 3000)),  # records, their time in ms
        min_size=1,
        max_size=30,
    )
)
def test_producer_batches_roll_as_when_appended_one_by_one(tmp_path_factory, shapes):
    """Many batches of one `append_batches` roll where they would one at a time:
    by size (pending bytes counted) and by time against the first batch's."""
    base = tmp_path_factory.mktemp("batches")
    batches = [
        encode_batch(0, [b"%05d" % i * 10] * n, timestamps=NOW + ms)
        for i, (n, ms) in enumerate(shapes)
    ]
    config = {"segment_bytes": 4000, "segment_ms": 1000, "index_interval_bytes": 700}
    single, bulk = log_of(base / "a", **config), log_of(base / "b", **config)
    for batch in batches:
        single.append_batches([batch])
    assert bulk.append_batches(batches) == 0
    assert files_of(bulk) == files_of(single)
    assert bulk.next_offset == sum(n for n, _ in shapes)
    single.close()
    bulk.close()


def test_a_roll_due_before_the_first_batch_of_a_run(tmp_path):
    """A full segment: the run's first batch starts the next segment."""
    log = log_of(tmp_path, segment_bytes=2000)
    batch = encode_batch(0, [b"x" * 900], timestamps=NOW)
    log.append_batches([batch, batch])
    log.append_batches([batch, batch, batch])
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert [s.size for s in log.segments] == [2 * len(batch), 2 * len(batch), len(batch)]
    log.close()


def test_a_log_append_time_topic_rewrites_only_what_changes(tmp_path):
    """LogAppendTime: every batch gets the append time and the type bit, its CRC
    recomputed; base offsets follow one another."""
    batches = [encode_batch(0, [b"a", b"b"], timestamps=NOW - 5), encode_batch(0, [b"c"])]
    config = TopicConfig.from_properties({"message.timestamp.type": "LogAppendTime"})
    run, count = prepare_run(batches, config, 10, NOW)
    assert isinstance(run, BatchRun) and count == 3
    assert run.last_offsets.tolist() == [11, 12] and run.max_timestamps.tolist() == [NOW, NOW]
    position = 0
    for size, first in zip(run.sizes.tolist(), [10, 12], strict=True):
        batch = run.data[position : position + size]
        header = read_header(batch)
        verify_crc(batch, header, position)
        assert header.base_offset == first and header.max_timestamp == NOW
        assert header.attributes & TIMESTAMP_TYPE_BIT
        position += size


def test_create_time_batches_keep_their_bytes_but_the_base_offset(tmp_path):
    """CreateTime, the header's max timestamp already the records' largest: only
    the base offset field (outside the CRC) changes."""
    batches = [
        encode_batch(0, [b"a"], timestamps=NOW),
        encode_batch(0, [b"b", b"c"], timestamps=NOW),
    ]
    run, count = prepare_run(batches, TopicConfig(), 7, NOW)
    assert count == 3 and run.last_offsets.tolist() == [7, 9]
    data = bytes(run.data)
    assert data[8 : len(batches[0])] == batches[0][8:]
    assert data[len(batches[0]) + 8 :] == batches[1][8:]
    assert np.array_equal(run.stream_bytes, [2, 4])


def test_an_empty_call_appends_nothing(tmp_path):
    log = log_of(tmp_path)
    assert log.append_batches([]) == 0
    assert log.next_offset == 0 and log.active_segment.size == 0
    log.close()


@pytest.mark.parametrize("check_first", [True, False])
def test_roll_point_asks_the_rule_from_where_it_is_told(tmp_path, check_first):
    """`roll_point`: the first batch is asked only if told to, the others after
    the bytes before them in the run."""
    log = log_of(tmp_path, segment_bytes=1000)
    log.append_batches([encode_batch(0, [b"x" * 900], timestamps=NOW)])
    batch = encode_batch(0, [b"y" * 300], timestamps=NOW)
    run, _ = prepare_run([batch] * 4, log.config, log.next_offset, NOW)
    segment = log.active_segment
    assert segment.roll_point(run, 0, NOW, check_first) == (0 if check_first else 1)
    assert segment.roll_point(run, 3, NOW, False) == 4
    log.close()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.binary(max_size=300).filter(lambda v: b"\n" not in v), min_size=32, max_size=200),
    st.integers(0, 300),
)
def test_a_head_held_apart_makes_the_same_records(tmp_path_factory, values, cut):
    """`append_packed` with the first value's start given apart (``head``, a
    partial line held from an earlier write) appends what it would joined."""
    base = tmp_path_factory.mktemp("head")
    joined, apart = log_of(base / "a", **SMALL), log_of(base / "b", **SMALL)
    packed = b"".join(v + b"\n" for v in values)
    lengths = line_lengths(packed, len(packed))
    joined.append_packed(packed, lengths)
    cut = min(cut, len(values[0]))
    apart.append_packed(memoryview(packed)[cut:], lengths, packed[:cut])
    assert files_of(apart) == files_of(joined)
    joined.close()
    apart.close()


@pytest.mark.parametrize("compressed", [False, True])
def test_a_head_held_apart_through_the_general_encoder(tmp_path, compressed):
    """A compressed topic encodes record by record: the head still starts the first value."""
    config = {"compression_type": "gzip"} if compressed else {"max_message_bytes": 320}
    log = log_of(tmp_path, **config)
    values = [b"%03d" % i * (80 if i == 5 else 1) for i in range(40)]
    packed = b"".join(v + b"\n" for v in values)
    log.append_packed(memoryview(packed)[2:], line_lengths(packed, len(packed)), packed[:2])
    assert [r.value for r in log.scan(0, 40)] == values
    log.close()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.binary(max_size=300).filter(lambda v: b"\n" not in v), min_size=1, max_size=200),
    st.integers(0, 300),
    st.sampled_from(["CreateTime", "LogAppendTime"]),
)
def test_lines_framed_as_encoded_leave_the_files_append_packed_leaves(
    tmp_path_factory, values, cut, timestamp_type
):
    """`append_lines` (the lines found in the pass that encodes them) against
    `append_packed` of the same lines: same segments, rolls, bytes, index entries."""
    base = tmp_path_factory.mktemp("lines")
    config = {**SMALL, "message_timestamp_type": timestamp_type}
    packed_log, lines_log = log_of(base / "a", **config), log_of(base / "b", **config)
    text = b"".join(v + b"\n" for v in values)
    packed_log.append_packed(text, line_lengths(text, len(text)))
    cut = min(cut, len(values[0]))
    assert lines_log.append_lines(memoryview(text)[cut:], text[:cut], limit=300) == 0
    assert files_of(lines_log) == files_of(packed_log)
    assert [r.value for r in lines_log.scan(0, len(values))] == values
    packed_log.close()
    lines_log.close()


@pytest.mark.parametrize(
    "config",
    [{"compression_type": "gzip"}, {"max_message_bytes": 180}, {}],
    ids=["compressed", "limit-past-the-batch-bound", "plain"],
)
def test_append_lines_refuses_a_long_line_and_appends_nothing(tmp_path, config):
    """A line over the limit fails the whole call on every path (the compiled
    one, and `append_packed`'s for what it does not take): nothing appended."""
    log = log_of(tmp_path, **config)
    text = b"".join(b"%04d\n" % i for i in range(40)) + b"y" * 101 + b"\n"
    with pytest.raises(TooLargeError, match="101 bytes exceeds 100"):
        log.append_lines(text, limit=100)
    with pytest.raises(TooLargeError, match="101 bytes exceeds 100"):  # the head counts
        log.append_lines(text[-101:] + text, b"x", limit=100)
    assert log.next_offset == 0 and log.segments[-1].size == 0
    assert log.append_lines(text, b"x", limit=101) == 0
    values = [r.value for r in log.scan(0, 41)]
    assert values[0] == b"x0000" and values[-1] == b"y" * 101 and len(values) == 41
    log.close()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3000)), min_size=1, max_size=30),
    st.sampled_from(["CreateTime", "LogAppendTime"]),
)
def test_batches_from_a_read_only_buffer_leave_the_files_a_copy_leaves(
    tmp_path_factory, shapes, timestamp_type
):
    """`append_batches` given the read-only buffer the batches lie in (the
    mount's request) writes them from there, base offsets apart, or patches a
    copy when their headers change (LogAppendTime): the files are those of the
    batches appended from a copy."""
    base = tmp_path_factory.mktemp("readonly")
    batches = [
        encode_batch(0, [b"%05d" % i * 10] * n, timestamps=NOW + ms)
        for i, (n, ms) in enumerate(shapes)
    ]
    config = {
        "segment_bytes": 4000, "segment_ms": 1000, "index_interval_bytes": 700,
        "message_timestamp_type": timestamp_type,
    }  # fmt: skip
    copied, in_place = log_of(base / "a", **config), log_of(base / "b", **config)
    data = b"".join(batches)
    view, position, views = memoryview(data), 0, []
    for batch in batches:
        views.append(view[position : position + len(batch)])
        position += len(batch)
    copied.append_batches(batches)
    assert in_place.append_batches(views, view) == 0
    assert files_of(in_place) == files_of(copied)
    copied.close()
    in_place.close()


def test_a_read_only_run_gives_its_base_offsets_apart():
    """Prepared where they lie in a read-only buffer: each batch whole (`pairs`)
    has its base offset and a valid CRC; written, the pieces make the same bytes."""
    batches = [encode_batch(0, [b"a", b"b"], timestamps=NOW), encode_batch(0, [b"c"])]
    data = b"".join(batches)
    view = memoryview(data)
    parts = [view[: len(batches[0])], view[len(batches[0]) :]]
    run, count = prepare_run(parts, TopicConfig(), 10, NOW, view)
    assert run.base_offsets is not None and count == 3
    position, whole = 0, []
    for (batch, info), first in zip(run.pairs(), [10, 12], strict=True):
        header = read_header(batch)
        verify_crc(batch, header, position)
        assert header.base_offset == first
        assert info.last_offset == first + header.records_count - 1
        whole.append(bytes(batch))
        position += info.size
    ends = np.cumsum(run.sizes)
    assert b"".join(bytes(p) for p in run.pieces(0, 2, ends)) == b"".join(whole)
