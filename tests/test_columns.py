"""The column-wise codec against the record-at-a-time one, and stream accounting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logfs import Store
from logfs.core import columnar as columns
from logfs.core import compression
from logfs.core import lines as stream
from logfs.core.config import TopicConfig
from logfs.core.errors import CorruptRecordError
from logfs.core.log import Log
from logfs.core.record import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    decode_records,
    encode_batch,
    read_header,
)
from logfs.mount.files import StreamFile

values_st = st.lists(st.binary(max_size=300), min_size=1, max_size=200)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split(data) -> list[tuple]:
    out, pos = [], 0
    while pos < len(data):
        header = read_header(data, pos)
        out.append((header, memoryview(data)[pos : pos + header.size]))
        pos += header.size
    return out


@SETTINGS
@given(
    values_st,
    st.integers(64, 20_000),
    st.integers(0, 2**40),
    st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
    st.binary(min_size=1, max_size=1),
)
def test_encode_plain_matches_encode_batch(values, budget, base, ts_type, separator):
    lengths = np.array([len(v) for v in values], np.int64)
    cuts = columns.plain_cuts(lengths, budget, 36)
    packed = separator.join(values) + separator
    enc = columns.encode_plain(
        packed, lengths, base, cuts, timestamp=1_700_000_000_000, timestamp_type=ts_type
    )
    start, position = 0, 0
    for end, size, last, stream_bytes in zip(
        cuts, enc.sizes, enc.last_offsets, enc.stream_bytes, strict=True
    ):
        expected = encode_batch(
            base + start, values[start:end], timestamps=1_700_000_000_000, timestamp_type=ts_type
        )
        assert bytes(enc.data[position : position + size]) == expected
        assert last == base + end - 1
        assert stream_bytes == sum(len(v) + 1 for v in values[start:end])
        position += size
        start = end
    assert start == len(values) and position == len(enc.data)


@given(st.lists(st.integers(0, 5000), max_size=300), st.integers(1, 20_000))
def test_plain_cuts_fit_the_budget(lengths, budget):
    lengths = np.array(lengths, np.int64)
    cuts = columns.plain_cuts(lengths, budget, 36)
    assert cuts == sorted(set(cuts)) and (cuts[-1] if cuts else 0) == len(lengths)
    start = 0
    for end in cuts:
        sizes = lengths[start:end] + 36
        assert end > start and (end - start == 1 or sizes.sum() <= budget)
        start = end


record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=3000)),
    st.lists(
        st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
    ),
)


@SETTINGS
@given(
    st.lists(st.lists(record_st, min_size=1, max_size=40), min_size=1, max_size=5),
    st.sampled_from([compression.NONE, compression.GZIP, compression.ZSTD]),
    st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
)
def test_decode_matches_decode_records(batches, codec, ts_type):
    data, base = b"", 0
    for records in batches:
        keys, values, headers = (list(x) for x in zip(*records, strict=True))
        timestamps = [1000 + i for i in range(len(records))]
        data += encode_batch(
            base, values, keys=keys, headers=headers, timestamps=timestamps, codec=codec,
            timestamp_type=ts_type,
        )  # fmt: skip
        base += len(records) + 3  # gaps between batches, as after compaction
    pieces = split(data)
    cols = columns.decode(pieces)
    expected = [r for h, b in pieces for r in decode_records(b, h)]
    assert cols.offset.tolist() == [r.offset for r in expected]
    assert cols.timestamp.tolist() == [r.timestamp for r in expected]
    buf = cols.buf.tobytes()
    for i, record in enumerate(expected):
        ks, kl, vs, vl = (int(a[i]) for a in (cols.key_start, cols.key_len, cols.value_start,
                                              cols.value_len))  # fmt: skip
        assert (None if kl < 0 else buf[ks : ks + kl]) == record.key
        assert (None if vl < 0 else buf[vs : vs + vl]) == record.value
    lines = b"".join((r.value or b"") + b"\n" for r in expected)
    counts = columns.stream_bytes(cols, len(pieces)).tolist()
    assert sum(counts) == len(lines)
    if codec == compression.NONE:  # the zero-copy path over a region of whole batches
        region = bytearray(data + columns.PAD)
        positions, pos = [], 0
        for header, _ in pieces:
            positions.append(pos)
            pos += header.size
        region_cols = columns.decode_region(region, positions, [h for h, _ in pieces])
        assert columns.value_lines(region_cols) == lines
    assert columns.value_lines(cols) == lines


def test_decode_rejects_a_record_running_past_its_batch():
    batch = bytearray(encode_batch(0, [b"abc", b"defg"]))
    batch[61] = 0x7E  # first record's length: 63, far past the batch
    header = read_header(batch)
    with pytest.raises(CorruptRecordError):
        columns.decode([(header, memoryview(batch))])


def test_append_packed_reads_back_like_append(tmp_path):
    lines = [b"line %d " % i + b"x" * (i % 50) for i in range(5000)]
    with Store(tmp_path) as store:
        store.create_topic("t", 2)
        packed = b"\n".join(lines) + b"\n"
        lengths = np.array([len(v) for v in lines], np.int64)
        assert store.log("t", 0).append_packed(packed, lengths) == 0
        store.log("t", 1).append(lines)
        one, two = store.log("t", 0), store.log("t", 1)
        assert [r.value for r in one.scan()] == lines == [r.value for r in two.scan()]
        assert one.read(4321).value == lines[4321]


def whole_stream(log) -> bytes:
    return b"".join((r.value or b"") + b"\n" for r in log.scan())


def test_stream_size_and_lines_after_reopen(tmp_path):
    config = {"segment.bytes": 16 * 1024}
    with Store(tmp_path) as store:
        store.create_topic("t", 1, config=config)
        log = store.log("t", 0)
        for i in range(30):
            log.append([b"v%d-%d" % (i, j) + b"y" * (j % 13) for j in range(200)])
        log.append([None, b"", b"with\nnewline"])
        assert len(log.segments) > 3
        expected = whole_stream(log)
        assert stream.size(log) == len(expected)
    with Store(tmp_path) as store:
        log = store.log("t", 0)
        assert stream.size(log) is None  # loaded segments are counted on first need
        for segment in stream.uncounted(log):
            segment.stream.loaded = stream.count_loaded(
                segment.log_path, segment.stream.loaded_size
            )
        assert stream.size(log) == len(expected)
        log.append([b"after reopen"] * 40)
        expected += b"after reopen\n" * 40
        assert stream.size(log) == len(expected)
        for position in (0, 1, 5000, len(expected) // 2, len(expected) - 3):
            offset, start = stream.locate(log, position)
            assert start <= position and expected[start:].startswith(
                whole_stream_from(log, offset)[:100]
            )
        got, offset = b"", log.log_start_offset
        while offset < log.next_offset:
            data, offset = stream.lines_from(log.segment_for(offset), offset)
            got += data
        assert got == expected


def whole_stream_from(log, offset) -> bytes:
    return b"".join((r.value or b"") + b"\n" for r in log.scan(offset))


def test_stream_starts_at_a_log_start_inside_the_first_segment(tmp_path):
    values = [b"value %d" % i + b"z" * (i % 7) for i in range(500)]
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig())
    log.append(values)
    log.close()
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig(), recovery_point=500, log_start_offset=123)
    for segment in stream.uncounted(log):
        segment.stream.loaded = stream.count_loaded(segment.log_path, segment.stream.loaded_size)
    expected = b"".join(v + b"\n" for v in values[123:])
    assert stream.size(log) == len(expected)
    assert stream.locate(log, 0) == (123, 0)
    reader = StreamFile("t", 0)
    got = b"".join(bytes(reader.read(log, pos, 1000)) for pos in range(0, len(expected), 1000))
    assert got == expected
    assert bytes(StreamFile("t", 0).read(log, 10, 20)) == expected[10:30]
    log.close()
