"""Kafka RecordBatch v2 (magic 2): the byte layout, encode and decode.

A batch is a 61-byte header followed by the records section, which is
compressed as a whole when the codec bits say so. All integers big-endian::

    base offset              int64   offset of the first record
    batch length             int32   bytes after this field (LOG_OVERHEAD = 12 before it)
    partition leader epoch   int32
    magic                    int8    2
    crc                      uint32  CRC-32C of everything from attributes to the end
    attributes               int16   bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
                                     4 transactional, 5 control, 6 delete horizon
    last offset delta        int32   last offset - base offset
    base timestamp           int64   (first timestamp in Kafka >= 3; we write the minimum)
    max timestamp            int64
    producer id              int64   -1 when idempotence is off
    producer epoch           int16   -1
    base sequence            int32   -1
    records count            int32

Each record in the records section is::

    length          varint   bytes of the rest of this record
    attributes      int8     unused, 0
    timestamp delta varlong  timestamp - base timestamp
    offset delta    varint   offset - base offset
    key length      varint   -1 for a null key
    key             bytes
    value length    varint   -1 for a null value
    value           bytes
    header count    varint
    headers         (key length varint, key utf-8, value length varint, value) * count

varints are zig-zag encoded LEB128, as in protobuf. The CRC covers the
attributes field to the end of the batch, so the base offset and the leader
epoch can be rewritten without recomputing it, exactly as Kafka does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import repeat
from typing import NamedTuple

from crc32c import crc32c  # CRC-32C with the CPU's instructions

from ..errors import CorruptRecordError
from . import compression

MAGIC = 2

_FIELDS = (
    ("q", "base_offset"),
    ("i", "batch_length"),
    ("i", "partition_leader_epoch"),
    ("b", "magic"),
    ("I", "crc"),
    ("h", "attributes"),
    ("i", "last_offset_delta"),
    ("q", "base_timestamp"),
    ("q", "max_timestamp"),
    ("q", "producer_id"),
    ("h", "producer_epoch"),
    ("i", "base_sequence"),
    ("i", "records_count"),
)
HEADER = struct.Struct(">" + "".join(code for code, _ in _FIELDS))


def _offset_of(field: str) -> int:
    codes = [code for code, _ in _FIELDS]
    names = [name for _, name in _FIELDS]
    return struct.calcsize(">" + "".join(codes[: names.index(field)]))


# Where each field starts, by name: what the compiled modules read the layout from
# (format/binary.pxd), so that this struct stays its one definition.
FIELD_OFFSETS = {name: _offset_of(name) for _, name in _FIELDS}
LENGTH_OFFSET = _offset_of("batch_length")
LOG_OVERHEAD = _offset_of("partition_leader_epoch")  # base offset + batch length
MAGIC_OFFSET = _offset_of("magic")
CRC_OFFSET = _offset_of("crc")
ATTRIBUTES_OFFSET = _offset_of("attributes")
PRODUCER_ID_OFFSET = _offset_of("producer_id")
_PRODUCER_ID = struct.Struct(">q")
HEADER_SIZE = HEADER.size

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

CREATE_TIME, LOG_APPEND_TIME = 0, 1
NO_TIMESTAMP = -1
# The smallest record: its length (1 byte), attributes, timestamp delta, offset delta,
# key length (-1), value length (-1) and header count, one byte each.
MIN_RECORD_BYTES = 7


class Record(NamedTuple):
    """One record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class BatchHeader(NamedTuple):
    """The 61-byte header of a batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def idempotent(batches: Sequence[bytes | memoryview]) -> bool:
    """Whether a batch of ``batches`` (each at least `HEADER_SIZE` long) carries
    a producer id, read without parsing the rest of the headers."""
    ids = map(_PRODUCER_ID.unpack_from, batches, repeat(PRODUCER_ID_OFFSET))
    return any(producer >= 0 for (producer,) in ids)


def transactional(batches: Sequence[bytes | memoryview]) -> bool:
    """Whether a batch of ``batches`` has the transactional bit, read without
    parsing the rest of the headers."""
    low = ATTRIBUTES_OFFSET + 1  # the attributes' low byte (a big-endian int16)
    return any(batch[low] & TRANSACTIONAL_BIT for batch in batches)


def read_header(buf: bytes | memoryview, pos: int = 0, position: int | None = None) -> BatchHeader:
    """Parse and sanity-check the header at ``buf[pos:]`` (not the CRC).

    Args:
        position: the batch's position in its file, for error messages.

    Raises:
        CorruptRecordError: too short, wrong magic or an impossible length.
    """
    where = pos if position is None else position
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at position {where}: {len(buf) - pos} bytes, header needs {HEADER_SIZE}"
        )
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"batch at position {where}: magic {header.magic}, expected {MAGIC}"
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at position {where}: batch length {header.batch_length} is too small"
        )
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError(
            f"batch at position {where}: negative offset delta or record count"
        )
    return header


def computed_crc(batch: bytes | memoryview) -> int:
    """CRC-32C of a whole batch's attributes..end."""
    return crc32c(batch[ATTRIBUTES_OFFSET:])


def verify_crc(batch: bytes | memoryview, header: BatchHeader, position: int = 0) -> None:
    """Raise `CorruptRecordError` naming both CRCs unless the batch is intact."""
    crc = computed_crc(batch)
    if crc != header.crc:
        raise CorruptRecordError(
            f"batch at position {position}: stored crc 0x{header.crc:08x} != computed 0x{crc:08x}"
        )


def crc_matches(batch: bytes | memoryview, header: BatchHeader) -> bool:
    """Whether a whole batch's bytes have the CRC its header stores (`verify_crc`
    without the error, for reports that go on past a bad batch)."""
    try:
        verify_crc(batch, header)
    except CorruptRecordError:
        return False
    return True


def pack_header_into(
    buf: bytearray | memoryview,
    position: int,
    base_offset: int,
    size: int,
    attributes: int,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    last_offset_delta: int | None = None,
) -> None:
    """Write the header of the batch at ``buf[position:position + size]``, whose
    records section is already in place, and then its CRC over that section.

    The batch is written as a producer without idempotence writes it: leader
    epoch, producer id, producer epoch and base sequence all -1.

    Args:
        size: bytes of the whole batch, header included.
        count: records in the batch.
        last_offset_delta: default ``count - 1`` (records at consecutive offsets).
    """
    if last_offset_delta is None:
        last_offset_delta = count - 1
    HEADER.pack_into(
        buf, position, base_offset, size - LOG_OVERHEAD, -1, MAGIC, 0, attributes,
        last_offset_delta, base_timestamp, max_timestamp, -1, -1, -1, count,
    )  # fmt: skip
    write_crc(buf, position, size)


def write_crc(buf: bytearray | memoryview, position: int, size: int) -> None:
    """Store the CRC of the batch at ``buf[position:position + size]`` in its
    header, once every byte it covers is in place."""
    crc = crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : position + size])
    struct.pack_into(">I", buf, position + CRC_OFFSET, crc)


# ---------------------------------------------------------------- varints


def _encode_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL_VARINTS = [_encode_varint(i) for i in range(1 << 14)]


def varint(n: int) -> bytes:
    """Zig-zag LEB128 bytes of a signed integer."""
    return _SMALL_VARINTS[n] if 0 <= n < 16384 else _encode_varint(n)


# ---------------------------------------------------------------- encode


def encode_batch(
    base_offset: int,
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    timestamps: int | Sequence[int] = 0,
    codec: int = compression.NONE,
    timestamp_type: int = CREATE_TIME,
) -> bytes:
    """One batch holding ``values`` at offsets from ``base_offset``.

    Args:
        timestamps: one timestamp for every record, or one per record.
        codec: compression codec id (see `compression`).
        timestamp_type: LOG_APPEND_TIME sets the batch's timestamp type bit.
    """
    count = len(values)
    if count == 0:
        raise ValueError("a batch holds at least one record")
    if isinstance(timestamps, int):
        base_ts = max_ts = timestamps
        deltas: Sequence[int] | None = None
    else:
        base_ts, max_ts = min(timestamps), max(timestamps)
        deltas = [t - base_ts for t in timestamps]
    body = _encode_records(values, keys, headers, deltas)
    if codec != compression.NONE:
        body = compression.compress(codec, body)
    attributes = codec | (TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0)
    batch = bytearray(HEADER_SIZE + len(body))
    batch[HEADER_SIZE:] = body
    pack_header_into(batch, 0, base_offset, len(batch), attributes, count, base_ts, max_ts)
    return bytes(batch)


def _encode_records(values, keys, headers, deltas) -> bytes:
    out = []
    append = out.append
    if keys is None and headers is None and deltas is None:
        # The common append path: no key, no headers, one timestamp.
        for delta, value in enumerate(values):
            value_part = b"\x01" if value is None else varint(len(value))
            rest = b"\x00\x00" + varint(delta) + b"\x01" + value_part
            length = len(rest) + (0 if value is None else len(value)) + 1
            append(varint(length) + rest)
            if value is not None:
                append(value)
            append(b"\x00")
        return b"".join(out)
    for delta, value in enumerate(values):
        key = keys[delta] if keys is not None else None
        parts = [b"\x00", varint(deltas[delta] if deltas is not None else 0), varint(delta)]
        parts += _bytes_field(key) + _bytes_field(value)
        record_headers = headers[delta] if headers is not None else ()
        parts.append(varint(len(record_headers)))
        for hkey, hvalue in record_headers:
            parts += _bytes_field(hkey.encode()) + _bytes_field(hvalue)
        record = b"".join(parts)
        append(varint(len(record)) + record)
    return b"".join(out)


def _bytes_field(data: bytes | None) -> list[bytes]:
    return [b"\x01"] if data is None else [varint(len(data)), data]


# ---------------------------------------------------------------- the records section


def records_section(
    batch: bytes | memoryview, header: BatchHeader, limit: int = compression.READ_LIMIT
) -> bytes | memoryview:
    """The records section of a whole batch, decompressed (at most ``limit``
    bytes; uncompressed: a slice of ``batch``, no copy).

    Raises:
        CorruptRecordError: it does not decompress, decompresses to more than
            ``limit`` bytes (`compression.DecompressedTooLargeError`), or is too
            short for the records the header claims: every record takes at least
            `MIN_RECORD_BYTES`, so a claim is checked before anything is sized by it.
    """
    body = batch[HEADER_SIZE : header.size]
    if header.codec != compression.NONE:
        body = compression.decompress(header.codec, bytes(body), limit)
    if header.records_count > len(body) // MIN_RECORD_BYTES:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} claims {header.records_count} records "
            f"in {len(body)} bytes of records (at most {len(body) // MIN_RECORD_BYTES})"
        )
    return body
