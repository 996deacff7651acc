"""The column-wise codec (core/format/columnar.py) against the record-at-a-time one
(core/format/record.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logfs import Store
from logfs.core.errors import CorruptRecordError
from logfs.core.format import columnar, compression
from logfs.core.format.decoding import decode_records
from logfs.core.format.record import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    encode_batch,
    read_header,
)

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
    packed = separator.join(values) + separator
    enc = columnar.encode_plain(
        packed, lengths, base, budget, timestamp=1_700_000_000_000, timestamp_type=ts_type
    )
    start, position = 0, 0
    for size, last, stream_bytes in zip(enc.sizes, enc.last_offsets, enc.stream_bytes, strict=True):
        end = last - base + 1
        expected = encode_batch(
            base + start, values[start:end], timestamps=1_700_000_000_000, timestamp_type=ts_type
        )
        assert bytes(enc.data[position : position + size]) == expected
        assert size <= budget or end - start == 1  # filled up to the budget...
        if end < len(values):  # ...and no further: the next record did not fit
            fuller = encode_batch(base + start, values[start : end + 1], timestamps=0)
            assert len(fuller) > budget
        assert stream_bytes == sum(len(v) + 1 for v in values[start:end])
        position += size
        start = end
    assert start == len(values) and position == len(enc.data)


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
    cols = columnar.decode(pieces)
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
    counts = columnar.stream_bytes(cols, len(pieces)).tolist()
    assert sum(counts) == len(lines)
    if codec == compression.NONE:  # the zero-copy path over a region of whole batches
        region = data
        positions, pos = [], 0
        for header, _ in pieces:
            positions.append(pos)
            pos += header.size
        region_cols = columnar.decode_region(region, positions, [h for h, _ in pieces])
        assert columnar.value_lines(region_cols) == lines
    assert columnar.value_lines(cols) == lines


def test_decode_rejects_a_record_running_past_its_batch():
    batch = bytearray(encode_batch(0, [b"abc", b"defg"]))
    batch[61] = 0x7E  # first record's length: 63, far past the batch
    header = read_header(batch)
    with pytest.raises(CorruptRecordError):
        columnar.decode([(header, memoryview(batch))])


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
