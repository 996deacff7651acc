"""How appended values become batches: cutting, encoding, the size bounds.

Appends are cut into batches of about `TARGET_BATCH_BYTES` (the Kafka
producer's ``batch.size``): big enough that per-batch costs fade, small
enough that reading one record decodes little; never over the topic's
``max.message.bytes``. `Cutter` is the cutting rule, here and in the
`Producer`. Keyless, headerless values at one timestamp, without
compression, are encoded column-wise (`encode_packed`); everything else one
record at a time (`encode`). Both give each batch its `BatchInfo`; the
column-wise encoder can also give them as one `BatchRun` (`encode_packed_run`):
the batches back to back in one buffer and their facts as arrays, which the
log writes and indexes without a Python object per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..config import TopicConfig
from ..errors import RecordTooLargeError
from . import columnar, compression
from ._cuts import run_pieces
from .record import (
    CREATE_TIME,
    FIELD_OFFSETS,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    encode_batch,
    read_header,
)


class BatchInfo(NamedTuple):
    """What a segment needs to index a batch it is about to append."""

    size: int
    last_offset: int
    max_timestamp: int
    stream_bytes: int = 0  # its values' bytes plus one per record (see storage/stream.py)


# A batch's base offset field: its first bytes, up to the length field.
BASE_OFFSET_BYTES = FIELD_OFFSETS["batch_length"] - FIELD_OFFSETS["base_offset"]


class BatchRun(NamedTuple):
    """Batches back to back in one buffer, their `BatchInfo` fields as int64
    arrays (one element per batch): what the bulk appends hand the log.

    ``base_offsets``, when given, holds each batch's base offset field (8 bytes,
    big-endian, one batch after another), which is what is written for it
    instead of the first 8 bytes ``data`` holds: a producer's batches are
    written from a read-only request as they came (the field lies outside
    the CRC), without a copy to patch."""

    data: memoryview
    sizes: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    stream_bytes: np.ndarray
    base_offsets: bytes | None = None

    def pieces(self, start: int, end: int, ends: np.ndarray) -> list[memoryview]:
        """Batches ``start:end`` as the buffers of one write (views, no copy):
        each batch's bytes, or its base offset, then the rest of it (``ends``:
        where each batch ends in ``data``). One buffer per batch at least, as the
        general path writes them: a write the kernel takes only in part then
        ends between batches at most places (the fault tests cut writev()'s
        list of buffers short, tests/system/test_faults.py)."""
        return run_pieces(
            self.data, self.base_offsets, ends[start:end], self.sizes[start:end], start,
            BASE_OFFSET_BYTES,
        )  # fmt: skip

    def batch(self, start: int, size: int, i: int) -> memoryview | bytes:
        """Batch ``i``, at ``start`` in ``data``, whole (its base offset set)."""
        if self.base_offsets is None:
            return self.data[start : start + size]
        b = BASE_OFFSET_BYTES
        return self.base_offsets[b * i : b * (i + 1)] + self.data[start + b : start + size]

    def pairs(self) -> list[tuple[memoryview | bytes, BatchInfo]]:
        """The batches one by one with their `BatchInfo`, as the general paths take them."""
        out, position = [], 0
        columns = (self.sizes, self.last_offsets, self.max_timestamps, self.stream_bytes)
        rows = zip(*(c.tolist() for c in columns), strict=True)
        for i, (size, last, max_timestamp, stream) in enumerate(rows):
            out.append(
                (self.batch(position, size, i), BatchInfo(size, last, max_timestamp, stream))
            )
            position += size
        return out


# Upper bound of the bytes a record adds besides its key, value and header
# strings: length, attributes, timestamp and offset deltas, key and value
# lengths, header count (varints of at most 5 or 10 bytes).
RECORD_OVERHEAD = 1 + 5 + 10 + 5 + 5 + 5 + 5
HEADER_OVERHEAD = 10
TARGET_BATCH_BYTES = 16 * 1024
# Appends of at least this many plain records take the column-wise encoder.
PACKED_MIN = 32


def max_record_bytes(config: TopicConfig) -> int:
    """The largest key plus value that always fits a batch of max.message.bytes
    when alone (uncompressed, no headers)."""
    return max(0, config.max_message_bytes - HEADER_SIZE - RECORD_OVERHEAD)


def timestamp_for(config: TopicConfig, timestamp, now: int) -> tuple:
    """The records' timestamp(s) and the batch timestamp type: the append time
    for LogAppendTime topics or when the writer gave none."""
    if config.message_timestamp_type == "LogAppendTime":
        return now, LOG_APPEND_TIME
    return (now if timestamp is None else timestamp), CREATE_TIME


def encode_values(
    config: TopicConfig,
    base_offset: int,
    values,
    keys,
    headers,
    timestamp,
    timestamp_type,
    batch_bytes: int = TARGET_BATCH_BYTES,
) -> list[tuple[bytes | memoryview, BatchInfo]]:
    """Batches of at most ``batch_bytes`` (a larger record alone) for `Log.append`
    and the `Producer`: column-wise when the records allow it."""
    codec = compression.BY_NAME[config.compression_type]
    plain = keys is None and headers is None and isinstance(timestamp, int)
    if plain and codec == compression.NONE and len(values) >= PACKED_MIN:
        try:
            packed = b"\n".join(values) + b"\n"
        except TypeError:  # a null value: the general encoder
            pass
        else:
            lengths = np.fromiter(map(len, values), np.int64, len(values))
            encoded = encode_packed(
                config, base_offset, packed, lengths, timestamp, timestamp_type, batch_bytes
            )
            if encoded is not None:
                return encoded
    return encode(
        config, base_offset, values, keys, headers, timestamp, codec, timestamp_type, batch_bytes
    )


def encode_packed(
    config: TopicConfig,
    base_offset: int,
    packed: bytes | memoryview,
    lengths: np.ndarray,
    timestamp: int,
    timestamp_type: int,
    batch_bytes: int = TARGET_BATCH_BYTES,
) -> list[tuple[memoryview, BatchInfo]] | None:
    """Batches of keyless, headerless values packed each with one separator byte
    (the compiled `columnar.encode_plain`); None when a record is too near
    max.message.bytes for the size bound (the general `encode` decides then)."""
    run = encode_packed_run(
        config, base_offset, packed, lengths, timestamp, timestamp_type, batch_bytes
    )
    return None if run is None else run.pairs()


def encode_packed_run(
    config: TopicConfig,
    base_offset: int,
    packed: bytes | memoryview,
    lengths: np.ndarray,
    timestamp: int,
    timestamp_type: int,
    batch_bytes: int = TARGET_BATCH_BYTES,
    *,
    head: bytes = b"",
    gap: int = 1,
) -> BatchRun | None:
    """`encode_packed` as one `BatchRun`; ``head``, if any, is the first
    value's start, not in ``packed`` (counted in the first length); ``gap``, the
    bytes after each value (`columnar.encode_plain`)."""
    if int(lengths.max()) > max_record_bytes(config):
        return None  # near the limit: the general encoder decides exactly
    enc = columnar.encode_plain(
        packed, lengths, base_offset, min(config.max_message_bytes, batch_bytes),
        timestamp=timestamp, timestamp_type=timestamp_type, head=head, gap=gap,
    )  # fmt: skip
    return _stamped_run(enc, timestamp)


def encode_lines_run(
    config: TopicConfig,
    base_offset: int,
    text: bytes | memoryview,
    head: bytes,
    timestamp: int,
    timestamp_type: int,
    limit: int,
    batch_bytes: int = TARGET_BATCH_BYTES,
) -> BatchRun:
    """`encode_packed_run` of the ``\n``-terminated lines of ``text`` (``head``
    the first one's start), found in the same compiled pass that encodes them
    (`columnar.encode_lines`). ``limit``, the longest line taken, is at most
    `max_record_bytes`, so every record fits max.message.bytes.

    Raises:
        TooLargeError: a line longer than ``limit`` bytes.
    """
    enc = columnar.encode_lines(
        text, head, base_offset, min(config.max_message_bytes, batch_bytes),
        timestamp=timestamp, timestamp_type=timestamp_type, limit=limit,
    )  # fmt: skip
    return _stamped_run(enc, timestamp)


def _stamped_run(enc: columnar.Encoded, timestamp: int) -> BatchRun:
    """The plain encoders' batches as a `BatchRun`, every one stamped ``timestamp``."""
    times = np.full(len(enc.sizes), timestamp, np.int64)
    return BatchRun(enc.data, enc.sizes, enc.last_offsets, times, enc.stream_bytes)


class Cutter:
    """The one rule that cuts records into batches, for `encode` and the
    `Producer` alike: greedy by the records' size bounds (`record_bound`), a
    batch closed before the record that would take it past ``budget`` bytes,
    so a record larger than the budget gets a batch of its own."""

    __slots__ = ("budget", "bytes", "records")

    def __init__(self, batch_bytes: int, max_message_bytes: int) -> None:
        self.budget = min(batch_bytes, max_message_bytes) - HEADER_SIZE
        self.bytes = 0  # size bounds of the records of the open batch
        self.records = 0

    def full(self, size: int) -> bool:
        """Whether a record of ``size`` bytes (its bound) starts a new batch."""
        return self.records > 0 and self.bytes + size > self.budget

    def add(self, size: int) -> bool:
        """Count a record of ``size`` bytes in; whether it starts a new batch."""
        cut = self.full(size)
        if cut:
            self.bytes = self.records = 0
        self.bytes += size
        self.records += 1
        return cut


def record_bound(value: bytes | None, key: bytes | None = None, headers=()) -> int:
    """An upper bound of the bytes a record takes in an uncompressed records section."""
    size = RECORD_OVERHEAD + (len(value) if value is not None else 0)
    if key is not None:
        size += len(key)
    for name, header_value in headers:
        size += HEADER_OVERHEAD + len(name.encode()) + len(header_value or b"")
    return size


class Records(NamedTuple):
    """Records to encode, column by column."""

    values: Sequence[bytes | None]
    keys: Sequence[bytes | None] | None  # None: no record has a key
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None  # None: none has headers
    timestamps: int | Sequence[int]  # one for all, or one per record

    def slice(self, start: int, end: int) -> Records:
        return Records(
            self.values[start:end],
            self.keys[start:end] if self.keys is not None else None,
            self.headers[start:end] if self.headers is not None else None,
            self.timestamps if isinstance(self.timestamps, int) else self.timestamps[start:end],
        )

    def bounds(self) -> list[int]:
        """Each record's `record_bound`."""
        if self.keys is None and self.headers is None:
            return [RECORD_OVERHEAD + (len(v) if v is not None else 0) for v in self.values]
        keys = self.keys if self.keys is not None else [None] * len(self.values)
        headers = self.headers if self.headers is not None else [()] * len(self.values)
        return list(map(record_bound, self.values, keys, headers))


def encode(
    config: TopicConfig,
    base_offset: int,
    values,
    keys,
    headers,
    timestamp,
    codec,
    timestamp_type,
    batch_bytes: int = TARGET_BATCH_BYTES,
) -> list[tuple[bytes, BatchInfo]]:
    """Batches of about ``batch_bytes`` (at most max.message.bytes) holding
    ``values`` from ``base_offset``, one record at a time (`record.encode_batch`),
    cut by `Cutter`.

    Raises:
        RecordTooLargeError: a single record does not fit max.message.bytes.
    """
    records = Records(values, keys, headers, timestamp)
    cutter = Cutter(batch_bytes, config.max_message_bytes)
    out: list[tuple[bytes, BatchInfo]] = []
    start = 0
    for i, size in enumerate(records.bounds()):
        if cutter.add(size):
            out += encode_within(records.slice(start, i), base_offset + start, codec,
                                 timestamp_type, config.max_message_bytes)  # fmt: skip
            start = i
    out += encode_within(records.slice(start, len(values)), base_offset + start, codec,
                         timestamp_type, config.max_message_bytes)  # fmt: skip
    return out


def encode_within(
    records: Records, base_offset: int, codec: int, timestamp_type: int, limit: int
) -> list[tuple[bytes, BatchInfo]]:
    """``records`` as one batch, halved until each piece is at most ``limit``
    bytes: a compressed batch can come out larger than its records' bounds.

    Raises:
        RecordTooLargeError: a single record does not fit ``limit``.
    """
    batch = encode_batch(
        base_offset,
        records.values,
        keys=records.keys,
        headers=records.headers,
        timestamps=records.timestamps,
        codec=codec,
        timestamp_type=timestamp_type,
    )
    count = len(records.values)
    if len(batch) <= limit:
        if isinstance(records.timestamps, int):
            max_timestamp = records.timestamps
        else:
            max_timestamp = read_header(batch).max_timestamp
        stream = sum(len(v) for v in records.values if v is not None) + count
        return [(batch, BatchInfo(len(batch), base_offset + count - 1, max_timestamp, stream))]
    if count == 1:
        raise RecordTooLargeError(
            f"record of {len(batch)} bytes (as a batch) exceeds max.message.bytes={limit}"
        )
    middle = count // 2
    first = encode_within(records.slice(0, middle), base_offset, codec, timestamp_type, limit)
    second = records.slice(middle, count)
    return first + encode_within(second, base_offset + middle, codec, timestamp_type, limit)
