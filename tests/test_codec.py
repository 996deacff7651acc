"""The compiled codec (core/_codec.pyx) against the reference decoder (core/record.py) and
kafka-python's encoder: the same records from valid batches, the same verdict on corrupt ones."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from logfs.core import _codec, columnar
from logfs.core.config import TopicConfig
from logfs.core.errors import CorruptRecordError, InvalidBatchError
from logfs.core.record import HEADER_SIZE, decode_records, encode_batch, read_header, write_crc
from logfs.core.validate import check_batches

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=30)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(
        st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2
    ),
)
records_st = st.lists(record_st, min_size=1, max_size=30)


def test_the_codec_is_compiled():
    """No silent fallback: the module is the extension pip built, not Python source."""
    assert _codec.__file__.endswith(".so"), _codec.__file__


def encode(records, base=0) -> bytes:
    keys, values, headers = (list(x) for x in zip(*records, strict=True))
    return encode_batch(base, values, keys=keys, headers=headers, timestamps=1_700_000_000_000)


def kafka_encode(records) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )  # fmt: skip
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


def walked(batch: bytes) -> list[tuple]:
    """(offset, timestamp, key, value) of every record, found by the compiled walker."""
    cols = columnar.decode([(read_header(batch), memoryview(batch))])
    buf = cols.buf.tobytes()

    def field(start, length):
        return None if length < 0 else buf[start : start + length]

    return [
        (int(o), int(t), field(ks, kl), field(vs, vl))
        for o, t, ks, kl, vs, vl in zip(
            cols.offset,
            cols.timestamp,
            cols.key_start,
            cols.key_len,
            cols.value_start,
            cols.value_len,
            strict=True,
        )  # fmt: skip
    ]


def reference(batch: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value) for r in decode_records(batch)]


@SETTINGS
@given(records_st, st.booleans())
def test_walker_decodes_what_either_encoder_built(records, by_kafka):
    batch = kafka_encode(records) if by_kafka else encode(records)
    assert walked(batch) == reference(batch)
    assert [r[1:] for r in walked(batch)] == [
        (1_700_000_000_000 + i * by_kafka, k, v) for i, (k, v, _) in enumerate(records)
    ]
    (checked,) = check_batches([batch], TopicConfig())  # the strict walk accepts it too
    assert checked.stream_bytes == sum(len(v or b"") + 1 for _, v, _ in records)


def with_body(batch: bytes, body: bytes) -> bytes:
    """``batch`` with another records section, its length field and CRC made right."""
    out = bytearray(batch[:HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    write_crc(out, 0, len(out))
    return bytes(out)


mutation_st = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.integers(1, 5)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=3)),
)


def mutate(body: bytes, mutations) -> bytes:
    body = bytearray(body)
    for kind, at, arg in mutations:
        at %= len(body) + 1
        if kind == "set" and at < len(body):
            body[at] = arg
        elif kind == "cut":
            del body[at : at + arg]
        elif kind == "insert":
            body[at:at] = arg
    return bytes(body)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_st, st.lists(mutation_st, min_size=1, max_size=3))
def test_walker_and_reference_agree_on_corrupt_records(records, mutations):
    good = encode(records)
    batch = with_body(good, mutate(good[HEADER_SIZE:], mutations))
    try:
        expected = reference(batch)
    except CorruptRecordError:
        expected = None
    try:
        got = walked(batch)
    except CorruptRecordError:
        got = None
    assert got == expected
    if expected is None:  # what the reference cannot read, the broker's check refuses
        with pytest.raises(InvalidBatchError):
            check_batches([batch], TopicConfig())


def test_walker_reports_where_and_what():
    body = encode([(None, b"abc", [])])[HEADER_SIZE:]
    bad = bytearray(body)
    bad[4] = 2 * 7  # key length 7 in a record of 10 bytes
    data = np.frombuffer(bytes(bad), np.uint8)
    fields = np.zeros((6, 1), np.int64)
    one = np.array([0], np.int64), np.array([len(bad)], np.int64), np.array([1], np.int64)
    assert _codec.walk_records(data, *one, fields)[:3] == (_codec.Problem.KEY_LENGTH, 0, 0)
    data = np.frombuffer(body, np.uint8)
    assert _codec.walk_records(data, *one, fields)[0] == _codec.Problem.OK
    assert fields[:, 0].tolist() == [0, 0, 5, -1, 6, 3]  # ts, offset, key at/len, value at/len


@given(st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=50), st.integers(-1, 255))
def test_gather(values, separator):
    buf = b"".join(v or b"" for v in values) + b"tail"
    starts, lengths, at = [], [], 0
    for v in values:
        starts.append(at)
        lengths.append(-1 if v is None else len(v))
        at += len(v or b"")
    data = np.frombuffer(buf, np.uint8)
    starts, lengths = np.array(starts, np.int64), np.array(lengths, np.int64)
    sep = b"" if separator < 0 else bytes([separator])
    assert _codec.gather(data, starts, lengths, separator) == b"".join(
        (v or b"") + sep for v in values
    )
    joined, offsets = _codec.gather(data, starts, lengths, with_offsets=True)
    assert joined == b"".join(v or b"" for v in values)
    assert offsets.tolist() == np.cumsum([0] + [len(v or b"") for v in values]).tolist()
