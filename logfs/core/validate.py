"""Batches a producer built, checked and prepared as Kafka's broker does
(its ``LogValidator``) before `Log.append_batches` appends them.

A producer builds RecordBatch v2 batches (layout in record.py) with relative
offsets and any base offset, usually 0, and hands them over whole. Every
batch of one call is checked before any is appended (`check_batches`):

- framing: the length field covers exactly the bytes given, at least the 49
  header bytes after it; magic 2; CRC-32C over attributes..end;
- attributes: a known codec; neither a control batch nor a transactional one
  (logfs has no transaction coordinator to commit or abort them);
- at least one record and ``last offset delta == records count - 1``;
- every record well-formed, after decompressing a compressed batch: the record
  lengths add up to exactly the records section, each record's fields fill
  exactly its length, offset deltas are 0, 1, ..., n-1 in order, key and value
  lengths are >= -1, header keys are non-null UTF-8; with a compacted topic
  every record has a key;
- the batch is at most the topic's ``max.message.bytes``.

Producer id, epoch and base sequence are kept as they are: idempotence and
sequence numbers are not enforced. The partition leader epoch is kept too.

Then each batch is prepared (`prepare_batches`), as Kafka's broker does:

- its base offset field is set to the offset it gets; the CRC does not cover
  that field, so the bytes are otherwise appended unchanged;
- a topic ``compression.type`` other than ``producer`` that differs from the
  batch's codec (``uncompressed`` is codec none) has it re-encoded with the
  topic's codec, keys, headers, timestamps and offset deltas kept;
- timestamps (Kafka's ``setMaxTimestamp``): a ``LogAppendTime`` topic sets the
  timestamp-type bit and the max timestamp to now; a ``CreateTime`` topic
  clears the bit and makes the max timestamp its records' largest. The CRC is
  recomputed only when a covered byte changed.

Records are walked in Python only by their length prefixes; their fields are
then checked for all records of the call at once with numpy.
"""

from __future__ import annotations

import array
import struct
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from . import compression
from .columnar import PAD, varints
from .config import TopicConfig
from .errors import BatchTooLargeError, CorruptRecordError, InvalidBatchError
from .record import (
    CODEC_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    decode_records,
    encode_batch,
    read_header,
    read_varint,
    records_section,
    verify_crc,
    write_crc,
)
from .segment import BatchInfo

# The header fields after the length field: the smallest batch length there is.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# Kafka's socket.request.max.bytes: no produce request, so no batch, is larger.
MAX_BATCH_BYTES = 100 * 1024 * 1024
_LENGTH = struct.Struct(">i")
# attributes, timestamp delta, offset delta, key length, value length, header count
MIN_RECORD_BYTES = 6
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class Checked(NamedTuple):
    """A batch that passed `check_batches`, with what preparing it needs."""

    batch: bytes | memoryview
    header: BatchHeader
    max_timestamp: int  # the largest of its records' own timestamps
    stream_bytes: int  # value bytes (null: 0) plus one per record, see lines.py


def split_batches(
    data: bytes | memoryview, max_batch_bytes: int = MAX_BATCH_BYTES
) -> tuple[list[memoryview], int]:
    """The whole batches at the start of ``data``, cut by their length fields,
    and how many bytes they cover; the rest is the start of an incomplete batch.

    Nothing but the length and magic fields is looked at (`check_batches` does
    the rest); a length that cannot be right is refused at once, so a writer
    that lost its framing fails fast instead of filling a buffer.

    Raises:
        InvalidBatchError: a batch length below 49 bytes or a magic other than 2.
        BatchTooLargeError: a batch longer than ``max_batch_bytes``.
    """
    view = memoryview(data).cast("B")
    batches: list[memoryview] = []
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(view, pos + LOG_OVERHEAD - _LENGTH.size)
        if length < MIN_BATCH_LENGTH:
            raise InvalidBatchError(
                f"batch at position {pos}: batch length {length}, at least "
                f"{MIN_BATCH_LENGTH} expected"
            )
        if LOG_OVERHEAD + length > max_batch_bytes:
            raise BatchTooLargeError(
                f"batch at position {pos}: {LOG_OVERHEAD + length} bytes exceeds "
                f"the limit of {max_batch_bytes}"
            )
        if end - pos > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != MAGIC:
            raise InvalidBatchError(
                f"batch at position {pos}: magic {view[pos + MAGIC_OFFSET]}, expected {MAGIC}"
            )
        if end - pos < LOG_OVERHEAD + length:
            break
        batches.append(view[pos : pos + LOG_OVERHEAD + length])
        pos += LOG_OVERHEAD + length
    return batches, pos


def prepare_batches(
    batches: Sequence[bytes | memoryview], config: TopicConfig, base_offset: int, now: int
) -> tuple[list[tuple[bytearray, BatchInfo]], int]:
    """Check ``batches`` and make them ready to append from ``base_offset``:
    each batch's bytes with its `BatchInfo`, and the number of records.

    Raises:
        InvalidBatchError: a batch `check_batches` refuses, or one over
            max.message.bytes once recompressed (`BatchTooLargeError`).
    """
    checked = check_batches(batches, config)
    codec = None
    if config.compression_type != "producer":
        codec = compression.BY_NAME[config.compression_type]
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    out: list[tuple[bytearray, BatchInfo]] = []
    offset, position = base_offset, 0
    for c in checked:
        header = c.header
        if codec is not None and codec != header.codec:
            batch, header = _recompressed(c, codec)
        else:
            batch = bytearray(c.batch)
        if log_append_time:
            attributes, max_timestamp = header.attributes | TIMESTAMP_TYPE_BIT, now
        else:
            attributes, max_timestamp = header.attributes & ~TIMESTAMP_TYPE_BIT, c.max_timestamp
        covered = (attributes, max_timestamp) != (header.attributes, header.max_timestamp)
        if covered or header is not c.header:  # bytes under the CRC change: recompute it
            stamped = header._replace(
                base_offset=offset, crc=0, attributes=attributes, max_timestamp=max_timestamp
            )
            HEADER.pack_into(batch, 0, *stamped)
            write_crc(batch, 0, len(batch))
        else:  # the base offset only: outside the CRC, the producer's bytes stay as they are
            struct.pack_into(">q", batch, 0, offset)
        if len(batch) > config.max_message_bytes:
            raise BatchTooLargeError(
                f"batch at position {position}: {len(batch)} bytes once compressed with "
                f"{config.compression_type} exceeds max.message.bytes={config.max_message_bytes}"
            )
        last = offset + header.records_count - 1
        out.append((batch, BatchInfo(len(batch), last, max_timestamp, c.stream_bytes)))
        offset = last + 1
        position += len(c.batch)
    return out, offset - base_offset


def _recompressed(c: Checked, codec: int) -> tuple[bytearray, BatchHeader]:
    """The batch's records re-encoded with ``codec``, and its header to be:
    producer fields and leader epoch kept, the records' own timestamps kept."""
    own_times = c.header._replace(attributes=c.header.attributes & ~TIMESTAMP_TYPE_BIT)
    records = decode_records(c.batch, own_times)
    encoded = encode_batch(
        0,
        [r.value for r in records],
        keys=[r.key for r in records],
        headers=[r.headers for r in records],
        timestamps=[r.timestamp for r in records],
        codec=codec,
    )
    new = read_header(encoded)
    header = c.header._replace(
        batch_length=new.batch_length,
        attributes=(c.header.attributes & ~CODEC_MASK) | codec,
        base_timestamp=new.base_timestamp,
    )
    return bytearray(encoded), header


# ---------------------------------------------------------------- checking


def check_batches(batches: Sequence[bytes | memoryview], config: TopicConfig) -> list[Checked]:
    """Check every batch as described in the module docstring.

    Raises:
        InvalidBatchError: the first batch that fails, naming its position in
            ``batches`` (bytes before it) and what is wrong, with the numbers;
            `BatchTooLargeError` for one over max.message.bytes.
    """
    headers, bodies, positions = [], [], []
    position = 0
    for batch in batches:
        header = _check_header(batch, position, config)
        try:
            body = bytes(records_section(batch, header))
        except CorruptRecordError as e:
            raise InvalidBatchError(f"batch at position {position}: {e}") from None
        headers.append(header)
        bodies.append(body)
        positions.append(position)
        position += len(batch)
    if not headers:
        return []
    max_timestamps, stream_bytes = _check_records(headers, bodies, positions, config)
    return [
        Checked(batch, header, max_ts, stream)
        for batch, header, max_ts, stream in zip(
            batches, headers, max_timestamps, stream_bytes, strict=True
        )
    ]


def _check_header(batch: bytes | memoryview, position: int, config: TopicConfig) -> BatchHeader:
    """The header of one batch, checked with everything it alone tells."""
    where = f"batch at position {position}"
    try:
        header = read_header(batch, 0, position)
    except CorruptRecordError as e:
        raise InvalidBatchError(str(e)) from None
    if header.size != len(batch):
        raise InvalidBatchError(
            f"{where}: its length field says {header.size} bytes, {len(batch)} given"
        )
    if header.size > config.max_message_bytes:
        raise BatchTooLargeError(
            f"{where}: {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}"
        )
    try:
        verify_crc(batch, header, position)
    except CorruptRecordError as e:
        raise InvalidBatchError(str(e)) from None
    if header.is_control:
        raise InvalidBatchError(f"{where}: a control batch; logfs has no transactions")
    if header.is_transactional:
        raise InvalidBatchError(f"{where}: a transactional batch; logfs has no transactions")
    if header.codec not in compression.NAMES:
        raise InvalidBatchError(f"{where}: unknown compression codec {header.codec}")
    if header.records_count < 1:
        raise InvalidBatchError(f"{where}: {header.records_count} records")
    if header.last_offset_delta != header.records_count - 1:
        raise InvalidBatchError(
            f"{where}: last offset delta {header.last_offset_delta} with "
            f"{header.records_count} records (expected {header.records_count - 1})"
        )
    return header


def _check_records(
    headers: list[BatchHeader], bodies: list[bytes], positions: list[int], config: TopicConfig
) -> tuple[list[int], list[int]]:
    """Check every record of every batch; each batch's largest record
    timestamp and its stream bytes."""
    buf = b"".join(bodies) + PAD
    counts = np.array([h.records_count for h in headers], np.int64)
    starts = array.array("q")  # each record's attributes byte
    ends = array.array("q")
    base = 0
    for i, (header, body) in enumerate(zip(headers, bodies, strict=True)):
        _walk(buf, base, base + len(body), header.records_count, starts, ends, positions[i])
        base += len(body)
    nb = np.frombuffer(buf, np.uint8)
    end = np.frombuffer(ends, np.int64)
    firsts = np.cumsum(counts) - counts
    index = np.arange(len(end)) - np.repeat(firsts, counts)

    def fail(bad: np.ndarray, what: str) -> None:
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            b = int(np.searchsorted(firsts, j, side="right") - 1)
            raise InvalidBatchError(f"batch at position {positions[b]}: record {index[j]}: {what}")

    pos = np.frombuffer(starts, np.int64) + 1  # the attributes byte is not used
    ts_delta, pos = _varints(nb, pos)
    fail(pos > end, "timestamp delta overruns the record")
    offset_delta, pos = _varints(nb, pos)
    fail(pos > end, "offset delta overruns the record")
    fail(offset_delta != index, "offset delta out of order (expected its index)")
    key_length, pos = _varints(nb, pos)
    fail((key_length < -1) | (key_length > end - pos), "bad key length")
    if "compact" in config.cleanup_policy:
        fail(key_length < 0, "no key, and the topic is compacted")
    pos += np.maximum(key_length, 0)
    value_length, pos = _varints(nb, pos)
    fail((value_length < -1) | (value_length > end - pos), "bad value length")
    pos += np.maximum(value_length, 0)
    header_count, pos = _varints(nb, pos)
    fail((header_count < 0) | (header_count > (end - pos) // 2), "bad header count")
    for j in np.flatnonzero(header_count).tolist():
        pos[j] = _skip_headers(buf, int(pos[j]), int(header_count[j]), int(end[j]))
    fail(pos < 0, "malformed headers")
    fail(pos != end, "its fields do not fill its length")
    value_bytes = np.add.reduceat(np.maximum(value_length, 0), firsts) + counts
    max_timestamps = []
    for i, (header, low, high) in enumerate(
        zip(
            headers,
            np.minimum.reduceat(ts_delta, firsts).tolist(),
            np.maximum.reduceat(ts_delta, firsts).tolist(),
            strict=True,
        )
    ):
        if (
            not INT64_MIN
            <= header.base_timestamp + low
            <= header.base_timestamp + high
            <= INT64_MAX
        ):
            raise InvalidBatchError(
                f"batch at position {positions[i]}: record timestamps outside a 64-bit integer"
            )
        max_timestamps.append(header.base_timestamp + high)
    return max_timestamps, value_bytes.tolist()


def _walk(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    starts: array.array,
    ends: array.array,
    position: int,
) -> None:
    """Follow ``count`` records' length prefixes through ``buf[pos:end]``,
    adding where each record's fields start and where it ends."""
    start = pos
    add_start, add_end = starts.append, ends.append  # the one loop per record: keep it lean
    for n in range(count):
        if pos >= end:
            raise InvalidBatchError(
                f"batch at position {position}: {count} records declared, {n} found"
            )
        z = buf[pos]
        if z < 0x80:  # one byte (records under 64 bytes): saves a call per short record
            length, pos = (z >> 1) ^ -(z & 1), pos + 1
        else:
            try:
                length, pos = read_varint(buf, pos)
            except CorruptRecordError as e:
                raise InvalidBatchError(f"batch at position {position}: record {n}: {e}") from None
        if length < MIN_RECORD_BYTES:
            raise InvalidBatchError(
                f"batch at position {position}: record {n}: length {length}, "
                f"at least {MIN_RECORD_BYTES} expected"
            )
        add_start(pos)
        pos += length
        add_end(pos)
    if pos != end:
        raise InvalidBatchError(
            f"batch at position {position}: its {count} records take {pos - start} bytes, "
            f"its records section holds {end - start}"
        )


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`columnar.varints`, with a varint over 10 bytes refused as the writer's error."""
    try:
        return varints(buf, pos)
    except CorruptRecordError as e:
        raise InvalidBatchError(f"a record holds a {e}") from None


def _skip_headers(buf: bytes, pos: int, count: int, end: int) -> int:
    """Check ``count`` record headers from ``pos``: the position after them,
    or -1 when one is malformed (a null or non-UTF-8 key, a bad length) or
    runs past ``end``."""
    for _ in range(count):
        if not 0 <= pos < end:
            return -1
        try:
            key_length, pos = read_varint(buf, pos)
        except CorruptRecordError:
            return -1
        if not 0 <= key_length < end - pos:
            return -1
        try:
            buf[pos : pos + key_length].decode()
        except UnicodeDecodeError:
            return -1
        try:
            value_length, pos = read_varint(buf, pos + key_length)
        except CorruptRecordError:
            return -1
        if not -1 <= value_length <= end - pos:
            return -1
        pos += max(value_length, 0)
    return pos
