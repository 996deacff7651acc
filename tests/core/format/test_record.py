"""Conformance of `logfs.core.format.record` with an independent Kafka codec (kafka-python).

Batches logfs writes must decode, CRC included, in kafka-python's
`DefaultRecordBatch`; batches kafka-python's `DefaultRecordBatchBuilder`
writes must decode in logfs. CRCs are checked against kafka-python's
pure-Python CRC-32C, not the C library logfs may share with it.
"""

from __future__ import annotations

import contextlib
import random
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.errors import CorruptRecordError as KafkaCorruptRecordError
from kafka.record._crc32c import crc as kafka_crc32c
from kafka.record.default_records import (
    DefaultRecordBase,
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)
from kafka.record.util import decode_varint, encode_varint

from logfs.core.errors import CorruptRecordError
from logfs.core.format import compression, decoding, record
from logfs.core.format.decoding import decode_records, record_at
from logfs.core.format.record import (
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    Record,
    encode_batch,
    read_header,
    verify_crc,
)

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
CODEC_IDS = [compression.NAMES[c] for c in CODECS]
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)

# ---------------------------------------------------------------- helpers


def kafka_decode(batch: bytes) -> tuple[DefaultRecordBatch, list[Record]]:
    """kafka-python's view of one whole batch, after checking its CRC."""
    kbatch = DefaultRecordBatch(batch)
    assert kbatch.validate_crc(), "kafka-python rejects the CRC"
    records = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kbatch]
    return kbatch, records


def kafka_build(
    records: list[tuple[int, int, bytes | None, bytes | None, list]],
    codec: int = compression.NONE,
    *,
    base_offset: int = 0,
    leader_epoch: int = 0,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
) -> bytes:
    """A batch as a Kafka producer builds it and a broker stamps it.

    ``records`` are (offset delta, timestamp, key, value, headers). The broker
    assigns the base offset and leader epoch afterwards; the CRC does not cover
    them, so they are rewritten in place without recomputing it.
    """
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for delta, timestamp, key, value, headers in records:
        assert builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers)
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, record.LOG_OVERHEAD, leader_epoch)
    return bytes(batch)


def expected(records, base_offset: int) -> list[Record]:
    return [
        Record(base_offset + delta, ts, key, value, tuple(headers))
        for delta, ts, key, value, headers in records
    ]


def logfs_decode(batch: bytes) -> tuple[BatchHeader, list[Record]]:
    header = read_header(batch)
    verify_crc(batch, header)
    return header, decode_records(batch, header)


def restamp(batch: bytes, *, codec: int, body: bytes, records_count: int | None = None) -> bytes:
    """``batch`` with its records section replaced by ``body`` (already in
    ``codec``), and its length, attributes and CRC made consistent again."""
    header = read_header(batch)
    attributes = (header.attributes & ~record.CODEC_MASK) | codec
    new = bytearray(
        HEADER.pack(
            *header._replace(
                batch_length=HEADER_SIZE - record.LOG_OVERHEAD + len(body),
                attributes=attributes,
                crc=0,
                records_count=header.records_count if records_count is None else records_count,
            )
        )
    )
    new += body
    struct.pack_into(
        ">I", new, record.CRC_OFFSET, kafka_crc32c(bytes(new[record.ATTRIBUTES_OFFSET :]))
    )
    return bytes(new)


def compressible(i: int) -> bytes:
    return b'{"order": %d, "item": "espresso", "qty": 2, "note": "no sugar"}' % i


# Hypothesis strategies for one record's parts.
values = st.one_of(
    st.none(),
    st.binary(max_size=200),
    st.sampled_from([b"", b"\n", b"a\nb\n", b"\r\n\x00\xff", b"line\n" * 40]),
)
keys = st.one_of(st.none(), st.binary(max_size=40))
header_lists = st.lists(
    st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
timestamps = st.integers(0, 1 << 42)
record_parts = st.lists(st.tuples(keys, values, header_lists, timestamps), min_size=1, max_size=20)

# ---------------------------------------------------------------- layout


def test_header_is_61_bytes_in_kafkas_field_order():
    assert HEADER.size == HEADER_SIZE == 61
    assert HEADER.format == DefaultRecordBase.HEADER_STRUCT.format
    assert len(BatchHeader._fields) == 13


@pytest.mark.parametrize(
    "name, offset",
    [
        ("LENGTH_OFFSET", 8),
        ("LOG_OVERHEAD", 12),
        ("MAGIC_OFFSET", 16),
        ("CRC_OFFSET", 17),
        ("ATTRIBUTES_OFFSET", 21),
    ],
)
def test_field_offsets(name, offset):
    assert getattr(record, name) == offset


def test_field_offsets_agree_with_kafka_python():
    assert record.CRC_OFFSET == DefaultRecordBase.CRC_OFFSET
    assert record.ATTRIBUTES_OFFSET == DefaultRecordBase.ATTRIBUTES_OFFSET
    assert record.LOG_OVERHEAD == DefaultRecordBase.AFTER_LEN_OFFSET
    assert record.CODEC_MASK == DefaultRecordBase.CODEC_MASK
    assert record.TIMESTAMP_TYPE_BIT == DefaultRecordBase.TIMESTAMP_TYPE_MASK
    assert record.TRANSACTIONAL_BIT == DefaultRecordBase.TRANSACTIONAL_MASK
    assert record.CONTROL_BIT == DefaultRecordBase.CONTROL_MASK


def test_read_header_reads_every_field_where_kafka_does():
    batch = kafka_build(
        [(0, 1000, b"k", b"v", []), (4, 999, None, b"w", [])],
        base_offset=12345678901,
        leader_epoch=17,
        producer=(424242, 3, 77),
        transactional=True,
    )
    header = read_header(batch)
    kbatch = DefaultRecordBatch(batch)
    assert header.base_offset == kbatch.base_offset == 12345678901
    assert header.size == kbatch.size_in_bytes == len(batch)
    assert header.partition_leader_epoch == kbatch.leader_epoch == 17
    assert header.magic == kbatch.magic == 2
    assert header.crc == kbatch.crc
    assert header.attributes == kbatch.attributes
    assert header.last_offset_delta == kbatch.last_offset_delta == 4
    assert header.last_offset == kbatch.last_offset
    assert header.next_offset == kbatch.next_offset == 12345678906
    assert header.base_timestamp == kbatch.first_timestamp == 1000
    assert header.max_timestamp == kbatch.max_timestamp == 1000
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (424242, 3, 77)
    assert header.records_count == kbatch.records_count == 2
    assert header.is_transactional and kbatch.is_transactional
    assert not header.is_control
    assert header.codec == compression.NONE
    assert header.timestamp_type == kbatch.timestamp_type == record.CREATE_TIME


# ---------------------------------------------------------------- varints


def kafka_varint(n: int) -> bytes:
    out = bytearray()
    encode_varint(n, out.append)
    return bytes(out)


@pytest.mark.parametrize(
    "n, size",
    [
        (0, 1),
        (-1, 1),
        (63, 1),
        (-64, 1),
        (64, 2),
        (8191, 2),
        (8192, 3),
        (16383, 3),  # the last value logfs takes from its table
        (16384, 3),
        (-16385, 3),
        ((1 << 31) - 1, 5),
        (-(1 << 31), 5),
        ((1 << 63) - 1, 10),
        (-(1 << 63), 10),
    ],
)
def test_varint_extremes(n, size):
    encoded = record.varint(n)
    assert len(encoded) == size
    assert encoded == kafka_varint(n)
    assert decoding.read_varint(encoded, 0) == (n, size)


@settings(max_examples=300)
@given(INT64)
def test_varint_matches_kafka_python(n):
    encoded = record.varint(n)
    assert encoded == kafka_varint(n)
    assert decode_varint(bytearray(encoded), 0) == (n, len(encoded))


@settings(max_examples=300)
@given(INT64, st.binary(max_size=3), st.binary(max_size=3))
def test_varint_round_trip_inside_a_buffer(n, before, after):
    buf = before + kafka_varint(n) + after
    assert decoding.read_varint(buf, len(before)) == (n, len(buf) - len(after))


def test_varint_longer_than_ten_bytes_is_corrupt():
    with pytest.raises(CorruptRecordError):
        decoding.read_varint(b"\xff" * 11, 0)


# ---------------------------------------------------------------- CRC-32C


@settings(max_examples=100)
@given(st.binary(max_size=2000))
def test_crc32c_matches_kafka_python_pure_python(data):
    assert record.crc32c(data) == kafka_crc32c(data)
    assert record.computed_crc(b"\0" * record.ATTRIBUTES_OFFSET + data) == kafka_crc32c(data)


def test_crc32c_takes_memoryviews_and_bytearrays():
    # The codec hands the CRC slices of buffers, not bytes.
    data = bytes(range(256)) * 9
    assert record.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert record.crc32c(memoryview(data)[21:]) == kafka_crc32c(data[21:])
    assert record.crc32c(bytearray(data)) == kafka_crc32c(data)


# ---------------------------------------------------------------- logfs writes, kafka reads


def test_plain_values_decode_in_kafka():
    values = [b"a", b"", None, b"x\ny\n", b"\x00\xff" * 100]
    batch = encode_batch(1000, values, timestamps=1_700_000_000_123)
    kbatch, records = kafka_decode(batch)
    assert records == [
        Record(1000 + i, 1_700_000_000_123, None, v, ()) for i, v in enumerate(values)
    ]
    assert kbatch.base_offset == 1000 and kbatch.last_offset == 1004
    assert kbatch.records_count == 5
    assert kbatch.compression_type == compression.NONE
    assert kbatch.timestamp_type == record.CREATE_TIME
    assert kbatch.producer_id == -1 and kbatch.base_sequence == -1


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_keys_headers_and_timestamps_decode_in_kafka(codec):
    values = [compressible(i) for i in range(50)] + [None, b"", b"two\nlines"]
    n = len(values)
    keys = [None if i % 7 == 0 else b"customer-%d" % (i % 5) for i in range(n)]
    headers = [
        [] if i % 3 else [("trace", b"%032x" % i), ("empty", b""), ("null", None), ("ünï", b"x")]
        for i in range(n)
    ]
    stamps = [1_700_000_000_000 + (i * 37) % 1000 - 500 for i in range(n)]  # not monotonic
    batch = encode_batch(
        987654321, values, keys=keys, headers=headers, timestamps=stamps, codec=codec
    )
    kbatch, records = kafka_decode(batch)
    assert kbatch.compression_type == codec
    assert kbatch.first_timestamp == min(stamps)
    assert kbatch.max_timestamp == max(stamps)
    assert records == [
        Record(987654321 + i, stamps[i], keys[i], values[i], tuple(headers[i])) for i in range(n)
    ]
    assert logfs_decode(batch)[1] == records
    if codec != compression.NONE:
        assert len(batch) < sum(len(v or b"") for v in values), "compression had no effect"


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_log_append_time_decodes_in_kafka(codec):
    batch = encode_batch(
        5,
        [b"a", b"b", b"c"],
        keys=[b"k", None, b"k"],
        timestamps=1_700_000_000_999,
        codec=codec,
        timestamp_type=LOG_APPEND_TIME,
    )
    kbatch, records = kafka_decode(batch)
    assert kbatch.timestamp_type == LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [1_700_000_000_999] * 3
    assert [r.offset for r in records] == [5, 6, 7]
    header, ours = logfs_decode(batch)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert ours == records
    assert [record_at(batch, header, offset) for offset in (5, 6, 7)] == records


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_large_batches_span_many_compression_blocks(codec):
    # Over 64 KiB (lz4 blocks) and 32 KiB (xerial snappy blocks), compressible or not.
    rng = random.Random(codec)
    values = [compressible(i) * 50 for i in range(60)] + [rng.randbytes(70_000)]
    batch = encode_batch(0, values, codec=codec, timestamps=1)
    _, records = kafka_decode(batch)
    assert [r.value for r in records] == values
    assert [r.value for r in logfs_decode(batch)[1]] == values


@settings(max_examples=60, deadline=None)
@given(
    parts=record_parts,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 1 << 62),
    one_timestamp=st.booleans(),
)
def test_any_logfs_batch_decodes_in_kafka(parts, codec, base_offset, one_timestamp):
    keys_ = [k for k, _, _, _ in parts]
    values_ = [v for _, v, _, _ in parts]
    headers_ = [h for _, _, h, _ in parts]
    stamps = parts[0][3] if one_timestamp else [t for _, _, _, t in parts]
    batch = encode_batch(
        base_offset, values_, keys=keys_, headers=headers_, timestamps=stamps, codec=codec
    )
    _, records = kafka_decode(batch)
    want = [
        Record(
            base_offset + i,
            stamps if one_timestamp else stamps[i],
            keys_[i],
            values_[i],
            tuple(headers_[i]),
        )
        for i in range(len(parts))
    ]
    assert records == want
    assert logfs_decode(batch)[1] == want


@settings(max_examples=60, deadline=None)
@given(values_=st.lists(values, min_size=1, max_size=30), stamp=timestamps)
def test_fast_path_batch_decodes_in_kafka(values_, stamp):
    # No keys, headers or per-record timestamps: logfs's shortcut encoder.
    batch = encode_batch(7, values_, timestamps=stamp)
    _, records = kafka_decode(batch)
    assert records == [Record(7 + i, stamp, None, v, ()) for i, v in enumerate(values_)]


# ---------------------------------------------------------------- kafka writes, logfs reads


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_batches_decode_in_logfs(codec):
    n = 40
    records = [
        (
            i,
            1_600_000_000_000 + (i * 7919) % 5000,  # varied, not monotonic: negative deltas
            None if i % 4 == 0 else b"user-%d" % (i % 3),
            compressible(i) if i % 9 else (None if i % 2 else b""),
            [(f"h{j}", None if j == 1 else b"v%d" % j) for j in range(i % 3)],
        )
        for i in range(n)
    ]
    batch = kafka_build(records, codec, base_offset=500, leader_epoch=3)
    header, decoded = logfs_decode(batch)
    assert header.codec == codec
    assert header.base_offset == 500 and header.last_offset == 500 + n - 1
    assert header.records_count == n
    assert decoded == expected(records, 500)
    # Offsets in the middle of a (compressed) batch are present and addressable.
    assert 520 in [r.offset for r in decoded]
    for want in decoded:
        assert record_at(batch, header, want.offset) == want
    assert record_at(batch, header, 499) is None
    assert record_at(batch, header, 500 + n) is None


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_batches_with_offset_gaps(codec):
    # Compaction leaves gaps inside batches: offset deltas 0, 3, 4, 10.
    records = [(d, 1000 + d, b"k%d" % d, compressible(d) * 3, []) for d in (0, 3, 4, 10)]
    batch = kafka_build(records, codec, base_offset=100)
    header, decoded = logfs_decode(batch)
    assert [r.offset for r in decoded] == [100, 103, 104, 110]
    assert header.last_offset == 110 and header.next_offset == 111
    assert decoded == expected(records, 100)
    assert record_at(batch, header, 104) == decoded[2]
    assert record_at(batch, header, 101) is None
    assert record_at(batch, header, 109) is None


def test_a_segment_of_kafka_batches_walks_by_header_size():
    batches, want = [], []
    base = 0
    for i, codec in enumerate(CODECS * 2):
        records = [(d, 10 * i + d, None, compressible(base + d), []) for d in range(i + 1)]
        batches.append(kafka_build(records, codec, base_offset=base))
        want += expected(records, base)
        base += i + 1
    segment = memoryview(b"".join(batches))
    got, pos = [], 0
    while pos < len(segment):
        header = read_header(segment, pos)
        batch = segment[pos : pos + header.size]
        verify_crc(batch, header, pos)
        got += decode_records(batch, header)
        pos += header.size
    assert pos == len(segment)
    assert got == want


@settings(max_examples=60, deadline=None)
@given(
    parts=record_parts,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 1 << 62),
    gaps=st.lists(st.integers(1, 3), min_size=20, max_size=20),
)
def test_any_kafka_batch_decodes_in_logfs(parts, codec, base_offset, gaps):
    deltas, delta = [], 0
    for gap in gaps[: len(parts)]:
        deltas.append(delta)
        delta += gap
    records = [(d, t, k, v, h) for d, (k, v, h, t) in zip(deltas, parts, strict=False)]
    batch = kafka_build(records, codec, base_offset=base_offset)
    header, decoded = logfs_decode(batch)
    assert decoded == expected(records, base_offset)
    middle = decoded[len(decoded) // 2]
    assert record_at(batch, header, middle.offset) == middle


def test_an_empty_batch_left_by_compaction_decodes_to_nothing():
    # Compaction may keep a batch whose records are all gone (for its producer state).
    batch = kafka_build([(0, 1, None, b"v", [])], producer=(9, 0, 0))
    empty = restamp(batch, codec=compression.NONE, body=b"", records_count=0)
    header, decoded = logfs_decode(empty)
    assert decoded == [] == kafka_decode(empty)[1]
    assert header.producer_id == 9
    assert record_at(empty, header, 0) is None


def test_a_transaction_marker_decodes_as_a_control_batch():
    # A COMMIT marker: key (version 0, type 1), value (version 0, coordinator epoch 5).
    key, value = struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5)
    batch = kafka_build(
        [(0, 1000, key, value, [])], base_offset=77, producer=(5, 1, -1), transactional=True
    )
    attributes = read_header(batch).attributes | record.CONTROL_BIT
    marker = bytearray(batch)
    struct.pack_into(">h", marker, record.ATTRIBUTES_OFFSET, attributes)
    crc = kafka_crc32c(bytes(marker[record.ATTRIBUTES_OFFSET :]))
    struct.pack_into(">I", marker, record.CRC_OFFSET, crc)
    header, decoded = logfs_decode(bytes(marker))
    assert header.is_control and header.is_transactional
    assert decoded == [Record(77, 1000, key, value, ())]
    (theirs,) = DefaultRecordBatch(bytes(marker))
    assert theirs.commit and theirs.offset == 77


def _java_like(codec: int, body: bytes) -> bytes:
    """The records section compressed the ways other Kafka producers do."""
    if codec == compression.SNAPPY:
        return snappy.compress(body)  # raw snappy, no xerial framing (librdkafka, Kafka reads it)
    if codec == compression.LZ4:
        return lz4.frame.compress(body, block_linked=False, content_checksum=True, store_size=True)
    if codec == compression.ZSTD:
        cobj = zstandard.ZstdCompressor(level=1).compressobj()  # a stream: no content size
        return cobj.compress(body) + cobj.flush()
    raise AssertionError(codec)


@pytest.mark.parametrize("codec", [compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_other_producers_compression_framings_decode(codec):
    records = [(i, 1000 + i, b"k", compressible(i), [("h", b"v")]) for i in range(30)]
    plain = kafka_build(records, base_offset=42)
    batch = restamp(plain, codec=codec, body=_java_like(codec, plain[HEADER_SIZE:]))
    kbatch, theirs = kafka_decode(batch)
    header, ours = logfs_decode(batch)
    assert header.codec == kbatch.compression_type == codec
    assert ours == theirs == expected(records, 42)


# ---------------------------------------------------------------- corruption


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP], ids=["none", "gzip"])
def test_flipping_any_byte_from_the_crc_on_is_caught(codec):
    batch = encode_batch(
        10, [b"alpha", b"beta"], keys=[b"k", None], headers=[[("h", b"1")], []], codec=codec
    )
    for pos in range(record.CRC_OFFSET, len(batch)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(batch)
            bad[pos] ^= mask
            header = BatchHeader._make(HEADER.unpack_from(bad))  # as stored, unchecked
            stored, computed = header.crc, kafka_crc32c(bytes(bad[record.ATTRIBUTES_OFFSET :]))
            assert stored != computed
            with pytest.raises(CorruptRecordError) as info:
                verify_crc(bytes(bad), header, 4096)
            message = str(info.value)
            assert f"0x{stored:08x}" in message and f"0x{computed:08x}" in message, message
            assert "4096" in message
            assert not DefaultRecordBatch(bytes(bad)).validate_crc()


@settings(max_examples=100, deadline=None)
@given(
    parts=record_parts,
    codec=st.sampled_from(CODECS),
    data=st.data(),
)
def test_any_flip_after_the_crc_field_is_caught(parts, codec, data):
    batch = encode_batch(
        0, [v for _, v, _, _ in parts], keys=[k for k, _, _, _ in parts], codec=codec
    )
    pos = data.draw(st.integers(record.ATTRIBUTES_OFFSET, len(batch) - 1), label="pos")
    mask = data.draw(st.integers(1, 255), label="mask")
    bad = bytearray(batch)
    bad[pos] ^= mask
    header = read_header(batch)
    with pytest.raises(CorruptRecordError) as info:
        verify_crc(bytes(bad), header)
    computed = kafka_crc32c(bytes(bad[record.ATTRIBUTES_OFFSET :]))
    assert f"0x{header.crc:08x}" in str(info.value)
    assert f"0x{computed:08x}" in str(info.value)


def test_base_offset_and_leader_epoch_are_outside_the_crc():
    batch = bytearray(encode_batch(0, [b"a", b"b"], timestamps=5))
    struct.pack_into(">qii", batch, 0, 1 << 40, len(batch) - record.LOG_OVERHEAD, 99)
    header, records = logfs_decode(bytes(batch))
    assert header.partition_leader_epoch == 99
    assert [r.offset for r in records] == [1 << 40, (1 << 40) + 1]
    assert kafka_decode(bytes(batch))[1] == records


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_truncated_batches_are_corrupt(codec):
    values = [compressible(i) * 30 for i in range(12)]  # 60+ KiB: several snappy blocks
    batch = encode_batch(0, values, keys=[b"k"] * 12, codec=codec)
    for length in range(len(batch)):
        cut = batch[:length]
        with pytest.raises(CorruptRecordError):
            header = read_header(cut)
            decode_records(cut, header)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_truncated_batches_fail_their_crc(codec):
    batch = encode_batch(0, [compressible(i) for i in range(20)], codec=codec)
    header = read_header(batch)
    for length in range(HEADER_SIZE, len(batch)):
        with pytest.raises(CorruptRecordError):
            verify_crc(batch[:length], header)


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("magic", 1, "magic"),
        ("magic", 3, "magic"),
        ("batch_length", 10, "batch length"),
        ("last_offset_delta", -1, "negative"),
        ("records_count", -1, "negative"),
    ],
)
def test_impossible_headers_are_corrupt(field, value, words):
    header = read_header(encode_batch(0, [b"a"]))
    bad = HEADER.pack(*header._replace(**{field: value})) + b"\0" * 20
    with pytest.raises(CorruptRecordError, match=words):
        read_header(b"\0" * 7 + bad, 7)


def test_short_header_names_its_position():
    with pytest.raises(CorruptRecordError, match="position 3"):
        read_header(b"\0" * 50, 3)


@pytest.mark.parametrize("count_delta", [-1, +1])
def test_records_count_disagreeing_with_the_records_is_corrupt(count_delta):
    batch = kafka_build([(i, 1, None, b"v%d" % i, []) for i in range(3)])
    bad = restamp(
        batch, codec=compression.NONE, body=batch[HEADER_SIZE:], records_count=3 + count_delta
    )
    header = read_header(bad)
    verify_crc(bad, header)
    with pytest.raises(CorruptRecordError):
        decode_records(bad, header)


@pytest.mark.parametrize("codec", CODECS[1:], ids=CODEC_IDS[1:])
def test_garbage_compressed_records_are_corrupt(codec):
    batch = kafka_build([(0, 1, None, b"v", [])])
    bad = restamp(batch, codec=codec, body=b"\x82SNAPPY\x00 definitely not compressed")
    header = read_header(bad)
    verify_crc(bad, header)  # the CRC is fine; the content is not
    with pytest.raises(CorruptRecordError):
        decode_records(bad, header)


@settings(max_examples=200, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    body=st.binary(max_size=80),
    count=st.integers(0, 5),
)
def test_garbage_records_sections_raise_only_corrupt_record_error(codec, body, count):
    batch = kafka_build([(0, 1, None, b"v", [])])
    bad = restamp(batch, codec=codec, body=body, records_count=count)
    with contextlib.suppress(CorruptRecordError):  # anything else fails the test
        decode_records(bad)


def _record_bytes(*fields: bytes) -> bytes:
    """One record's bytes with a correct length prefix."""
    rest = b"".join(fields)
    return record.varint(len(rest)) + rest


def test_negative_header_count_is_corrupt_as_in_kafka():
    v = record.varint
    body = _record_bytes(b"\0", v(0), v(0), v(-1), v(1), b"x", v(-1))  # header count -1
    batch = restamp(kafka_build([(0, 1, None, b"x", [])]), codec=compression.NONE, body=body)
    with pytest.raises(KafkaCorruptRecordError, match="(?i)invalid number of record headers"):
        list(DefaultRecordBatch(batch))
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


def test_negative_header_key_length_is_corrupt_as_in_kafka():
    v = record.varint
    body = _record_bytes(b"\0", v(0), v(0), v(-1), v(1), b"x", v(1), v(-1), v(1), b"y")
    batch = restamp(kafka_build([(0, 1, None, b"x", [])]), codec=compression.NONE, body=body)
    with pytest.raises(KafkaCorruptRecordError, match="(?i)negative header key size"):
        list(DefaultRecordBatch(batch))
    with pytest.raises(CorruptRecordError):
        decode_records(batch)
