"""How appended values become batches: cutting, encoding, the size bounds.

Appends are cut into batches of about `TARGET_BATCH_BYTES` (the Kafka
producer's ``batch.size``): big enough that per-batch costs fade, small
enough that reading one record decodes little; never over the topic's
``max.message.bytes``. Keyless, headerless values at one timestamp, without
compression, are encoded column-wise (`encode_packed`); everything else one
record at a time (`encode`). Both give each batch its `BatchInfo`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from ..config import TopicConfig
from ..errors import RecordTooLargeError
from . import columnar, compression
from .record import CREATE_TIME, HEADER_SIZE, LOG_APPEND_TIME, encode_batch, read_header


class BatchInfo(NamedTuple):
    """What a segment needs to index a batch it is about to append."""

    size: int
    last_offset: int
    max_timestamp: int
    stream_bytes: int = 0  # its values' bytes plus one per record (see storage/stream.py)


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
    if int(lengths.max()) > max_record_bytes(config):
        return None  # near the limit: the general encoder decides exactly
    enc = columnar.encode_plain(
        packed, lengths, base_offset, min(config.max_message_bytes, batch_bytes),
        timestamp=timestamp, timestamp_type=timestamp_type,
    )  # fmt: skip
    out, position = [], 0
    for size, last, stream in zip(enc.sizes, enc.last_offsets, enc.stream_bytes, strict=True):
        batch = enc.data[position : position + size]
        out.append((batch, BatchInfo(size, last, timestamp, stream)))
        position += size
    return out


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
    ``values`` from ``base_offset``, one record at a time (`record.encode_batch`).

    Raises:
        RecordTooLargeError: a single record does not fit max.message.bytes.
    """
    limit = config.max_message_bytes
    target = min(limit, batch_bytes)
    out = []
    base = base_offset
    for start, end in _chunks(values, keys, headers, target - HEADER_SIZE):
        batch = _encode_chunk(
            base, start, end, values, keys, headers, timestamp, codec, timestamp_type
        )
        if len(batch) > limit:
            if end - start == 1:
                raise RecordTooLargeError(
                    f"record of {len(batch)} bytes (as a batch) exceeds max.message.bytes={limit}"
                )
            middle = (start + end) // 2  # a compressed batch came out larger than estimated
            out += _encode_pieces(
                limit,
                base,
                start,
                middle,
                end,
                values,
                keys,
                headers,
                timestamp,
                codec,
                timestamp_type,
            )
        else:
            out.append(_with_info(batch, base + end - start - 1, timestamp, values[start:end]))
        base = out[-1][1].last_offset + 1
    return out


def _encode_pieces(limit, base, start, middle, end, *args):
    first = _encode_chunk(base, start, middle, *args)
    second = _encode_chunk(base + middle - start, middle, end, *args)
    if max(len(first), len(second)) > limit:
        raise RecordTooLargeError(f"records do not fit max.message.bytes={limit}")
    timestamp = args[3]
    values = args[0]
    return [
        _with_info(first, base + middle - start - 1, timestamp, values[start:middle]),
        _with_info(second, base + end - start - 1, timestamp, values[middle:end]),
    ]


def _encode_chunk(
    base, start, end, values, keys, headers, timestamp, codec, timestamp_type
) -> bytes:
    return encode_batch(
        base,
        values[start:end],
        keys=keys[start:end] if keys is not None else None,
        headers=headers[start:end] if headers is not None else None,
        timestamps=timestamp if isinstance(timestamp, int) else timestamp[start:end],
        codec=codec,
        timestamp_type=timestamp_type,
    )


def _with_info(batch: bytes, last_offset: int, timestamp, values) -> tuple[bytes, BatchInfo]:
    max_ts = timestamp if isinstance(timestamp, int) else read_header(batch).max_timestamp
    stream = sum(len(v) for v in values if v is not None) + len(values)
    return batch, BatchInfo(len(batch), last_offset, max_ts, stream)


def _chunks(values, keys, headers, budget: int) -> Iterator[tuple[int, int]]:
    """Cut records into runs whose size bound fits ``budget`` bytes."""
    if keys is None and headers is None:
        sizes = [RECORD_OVERHEAD + (len(v) if v is not None else 0) for v in values]
    else:
        sizes = []
        for i, v in enumerate(values):
            size = RECORD_OVERHEAD + (len(v) if v is not None else 0)
            if keys is not None and keys[i] is not None:
                size += len(keys[i])
            if headers is not None:
                size += sum(
                    HEADER_OVERHEAD + len(k.encode()) + len(hv or b"") for k, hv in headers[i]
                )
            sizes.append(size)
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if total + size > budget and i > start:
            yield start, i
            start, total = i, 0
        total += size
    yield start, len(sizes)
