"""Batches a producer built, checked and prepared as Kafka's broker does
(its ``LogValidator``) before `Log.append_batches` appends them.

A producer builds RecordBatch v2 batches (layout in record.py) with relative
offsets and any base offset, usually 0, and hands them over whole. Every
batch of one call is checked before any is appended (`prepare_batches`):

- framing: the length field covers exactly the bytes given, at least the 49
  header bytes after it; magic 2; CRC-32C over attributes..end;
- attributes: a known codec; never a control batch (only the transaction
  coordinator writes markers, core/format/control.py); a transactional batch only
  from a producer whose transaction the coordinator knows (``transactional``: the
  Kafka listener's Produce, after its checks), never through ``append.batches``;
- at least one record and ``last offset delta == records count - 1``;
- every record well-formed, after decompressing a compressed batch: the record
  lengths add up to exactly the records section, each record's fields fill
  exactly its length, offset deltas are 0, 1, ..., n-1 in order, key and value
  lengths are >= -1, header keys are non-null UTF-8; with a compacted topic
  every record has a key;
- the batch is at most the topic's ``max.message.bytes``.

Producer id, epoch and base sequence are kept as they are (the partition's
producer state checks them: core/log/producer_state.py). The partition leader
epoch is kept too.

Then each batch is prepared, as Kafka's broker does:

- its base offset field is set to the offset it gets; the CRC does not cover
  that field, so the bytes are otherwise appended unchanged;
- a topic ``compression.type`` other than ``producer`` that differs from the
  batch's codec (``uncompressed`` is codec none) has it re-encoded with the
  topic's codec, keys, headers, timestamps and offset deltas kept;
- timestamps (Kafka's ``setMaxTimestamp``): a ``LogAppendTime`` topic sets the
  timestamp-type bit and the max timestamp to now; a ``CreateTime`` topic
  clears the bit and makes the max timestamp its records' largest. The CRC is
  recomputed only when a covered byte changed.

Every batch of the call is checked in one pass of the compiled codec
(`_checks.check_batches`); the records of compressed batches are checked once
decompressed (`walker.walk_records`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..config import TopicConfig
from ..errors import BatchTooLargeError, CorruptRecordError, InvalidBatchError
from . import compression
from ._checks import CONTROL_BIT, HEADER_PROBLEM, TIMESTAMP_RANGE, TRANSACTIONAL_BIT, check_batches
from ._cuts import BAD_MAGIC, TOO_LARGE, cut_batches
from .batching import BatchInfo, BatchRun
from .problems import PROBLEMS
from .recompress import recompressed
from .record import (
    CODEC_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    read_header,
    records_section,
    verify_crc,
    write_crc,
)
from .walker import Problem, walk_records

# The header fields after the length field: the smallest batch length there is.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# Kafka's socket.request.max.bytes: no produce request, so no batch, is larger.
MAX_BATCH_BYTES = 100 * 1024 * 1024
_LENGTH = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class BatchFacts(NamedTuple):
    """What checking one batch found, in the order `_checks.check_batches`
    fills its rows."""

    records: int
    own_max_timestamp: int  # the largest of its records' own timestamps
    stream_bytes: int  # value bytes (null: 0) plus one per record, see storage/stream.py
    compressed: int  # 1 if compressed (its records then checked in Python, decompressed)
    attributes: int
    max_timestamp: int  # its header's


def split_batches(
    data: bytes | memoryview, max_batch_bytes: int = MAX_BATCH_BYTES
) -> tuple[list[memoryview], int]:
    """The whole batches at the start of ``data``, cut by their length fields,
    and how many bytes they cover; the rest is the start of an incomplete batch.

    Nothing but the length and magic fields is looked at (`prepare_batches`
    checks the rest); a length that cannot be right is refused at once, so a writer
    that lost its framing fails fast instead of filling a buffer.

    Raises:
        InvalidBatchError: a batch length below 49 bytes or a magic other than 2.
        BatchTooLargeError: a batch longer than ``max_batch_bytes``.
    """
    view = memoryview(data).cast("B")
    batches, pos, problem = cut_batches(view, max_batch_bytes)
    if problem == BAD_MAGIC:
        raise InvalidBatchError(
            f"batch at position {pos}: magic {view[pos + MAGIC_OFFSET]}, expected {MAGIC}"
        )
    if problem:
        (length,) = _LENGTH.unpack_from(view, pos + LOG_OVERHEAD - _LENGTH.size)
        if problem == TOO_LARGE:
            raise BatchTooLargeError(
                f"batch at position {pos}: {LOG_OVERHEAD + length} bytes exceeds "
                f"the limit of {max_batch_bytes}"
            )
        raise InvalidBatchError(
            f"batch at position {pos}: batch length {length}, at least {MIN_BATCH_LENGTH} expected"
        )
    return batches, pos


def prepare_batches(
    batches: Sequence[bytes | memoryview], *args, **kwargs
) -> tuple[list[tuple[memoryview | bytearray, BatchInfo]], int]:
    """`prepare_run`, each batch's bytes with its `BatchInfo`."""
    prepared, count = prepare_run(batches, *args, **kwargs)
    return (prepared.pairs() if isinstance(prepared, BatchRun) else prepared), count


def prepare_run(
    batches: Sequence[bytes | memoryview],
    config: TopicConfig,
    base_offset: int,
    now: int,
    buffer: bytearray | memoryview | None = None,
    *,
    transactional: bool = False,
) -> tuple[BatchRun | list[tuple[memoryview | bytearray, BatchInfo]], int]:
    """Check ``batches`` and make them ready to append from ``base_offset``:
    the batches, and the number of records. The batches come as one
    `BatchRun` (prepared where they lie, column-wise: `_run`) unless the
    topic's ``compression.type`` has some re-encoded; then each batch's bytes
    with its `BatchInfo`.

    Args:
        buffer: a buffer that holds exactly ``batches``, back to back (as
            `split_batches` cuts it). Writable, it is given up by the caller:
            the batches are checked and patched there instead of in a copy.
            Read-only, the batches are checked there and written from there
            as they are, their base offsets apart (`BatchRun.base_offsets`),
            unless some covered bytes change (then they are patched in a copy).

    Raises:
        InvalidBatchError: the first batch that fails a check of the module
            docstring, naming its position in ``batches`` (bytes before it) and
            what is wrong, with the numbers; `BatchTooLargeError` for one over
            max.message.bytes, as given or once recompressed.
    """
    if buffer is None:
        data, starts, sizes = _joined(batches)  # one copy, patched in place below
    else:
        data, starts, sizes = _in_place(batches, buffer)
    rows = _check(data, starts, sizes, config, transactional)
    view = memoryview(data)
    codec = None
    if config.compression_type != "producer":
        codec = compression.BY_NAME[config.compression_type]
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    if codec is None or not np.any(rows[4] & CODEC_MASK != codec):  # none re-encoded
        run = _run(view, starts, sizes, rows, base_offset, now if log_append_time else None)
        return run, int(rows[0].sum())
    out: list[tuple[memoryview | bytearray, BatchInfo]] = []
    offset = base_offset
    facts = [BatchFacts._make(column) for column in rows.T.tolist()]
    for start, size, fact in zip(starts.tolist(), sizes.tolist(), facts, strict=True):
        batch = view[start : start + size]
        attributes = fact.attributes
        header = None
        if codec is not None and codec != attributes & CODEC_MASK:
            batch, header = recompressed(batch, codec)
            attributes = header.attributes
        if log_append_time:
            new_attributes, new_max = attributes | TIMESTAMP_TYPE_BIT, now
        else:
            new_attributes, new_max = attributes & ~TIMESTAMP_TYPE_BIT, fact.own_max_timestamp
        if header is not None or (new_attributes, new_max) != (attributes, fact.max_timestamp):
            # Bytes under the CRC change: the header is rewritten and the CRC recomputed.
            header = (header or read_header(batch))._replace(
                base_offset=offset, crc=0, attributes=new_attributes, max_timestamp=new_max
            )
            HEADER.pack_into(batch, 0, *header)
            write_crc(batch, 0, len(batch))
        else:  # the base offset only: outside the CRC, the producer's bytes stay as they are
            _BASE_OFFSET.pack_into(batch, 0, offset)
        if len(batch) > config.max_message_bytes:
            raise BatchTooLargeError(
                f"batch at position {start}: {len(batch)} bytes once compressed with "
                f"{config.compression_type} exceeds max.message.bytes={config.max_message_bytes}"
            )
        last = offset + fact.records - 1
        out.append((batch, BatchInfo(len(batch), last, new_max, fact.stream_bytes)))
        offset = last + 1
    return out, offset - base_offset


def _run(
    view: memoryview,
    starts: np.ndarray,
    sizes: np.ndarray,
    rows: np.ndarray,
    base_offset: int,
    append_time: int | None,
) -> BatchRun:
    """The checked batches in ``view`` prepared where they lie, column-wise:
    every base offset set at once; the header and CRC rewritten only for the
    batches whose covered bytes change (timestamp type or max timestamp: a
    LogAppendTime topic's ``append_time``, else the records' largest). A
    read-only ``view`` is left as it is, the base offsets given apart, unless a
    batch changes: then it is copied first."""
    records, own_max, stream_bytes, _, attributes, max_timestamps = rows
    last_offsets = base_offset + np.cumsum(records) - 1
    firsts = last_offsets - records + 1
    if append_time is not None:
        new_attributes = attributes | TIMESTAMP_TYPE_BIT
        new_max = np.full_like(max_timestamps, append_time)
    else:
        new_attributes, new_max = attributes & ~TIMESTAMP_TYPE_BIT, own_max
    changed = (new_attributes != attributes) | (new_max != max_timestamps)
    base_offsets = firsts.astype(">i8").tobytes()
    if view.readonly:
        if not changed.any():  # written as they came, the base offsets apart
            new_max = np.ascontiguousarray(new_max)
            return BatchRun(view, sizes, last_offsets, new_max, stream_bytes, base_offsets)
        view = memoryview(bytearray(view))
    if len(starts):
        field = starts[:, None] + np.arange(_BASE_OFFSET.size)
        big_endian = np.frombuffer(base_offsets, np.uint8).reshape(-1, _BASE_OFFSET.size)
        np.frombuffer(view, np.uint8)[field] = big_endian
    for i in np.flatnonzero(changed).tolist():
        batch = view[int(starts[i]) : int(starts[i] + sizes[i])]
        header = read_header(batch)._replace(
            crc=0, attributes=int(new_attributes[i]), max_timestamp=int(new_max[i])
        )
        HEADER.pack_into(batch, 0, *header)
        write_crc(batch, 0, len(batch))
    return BatchRun(view, sizes, last_offsets, np.ascontiguousarray(new_max), stream_bytes)


def set_base_offset(batch: bytearray | memoryview, offset: int) -> None:
    """Give a whole batch its base offset (outside the CRC)."""
    _BASE_OFFSET.pack_into(batch, 0, offset)


def max_timestamp_of(batch: bytes | bytearray | memoryview) -> int:
    return read_header(batch).max_timestamp


# ---------------------------------------------------------------- checking


def _joined(batches: Sequence[bytes | memoryview]) -> tuple[bytearray, np.ndarray, np.ndarray]:
    """The batches in one buffer, with where each starts and its size."""
    sizes = np.fromiter(map(len, batches), np.int64, len(batches))
    return bytearray().join(batches), np.cumsum(sizes) - sizes, sizes


def _in_place(
    batches: Sequence[bytes | memoryview], buffer: bytearray | memoryview
) -> tuple[memoryview, np.ndarray, np.ndarray]:
    """`_joined` for batches that already are back to back in ``buffer``
    (read-only or writable: `prepare_run` says what each means)."""
    sizes = np.fromiter(map(len, batches), np.int64, len(batches))
    view = memoryview(buffer).cast("B")
    if int(sizes.sum()) != len(view):
        raise ValueError("the buffer must hold exactly the batches")
    return view, np.cumsum(sizes) - sizes, sizes


def _check(
    data: bytearray | memoryview,
    starts: np.ndarray,
    sizes: np.ndarray,
    config: TopicConfig,
    transactional: bool = False,
) -> np.ndarray:
    """`_checks.check_batches` over the batches in ``data``, compressed
    batches' records checked here; what it found of each batch, one row per
    `BatchFacts` field, one column per batch.

    Raises:
        InvalidBatchError: as `prepare_batches` says.
    """
    rows = np.zeros((len(BatchFacts._fields), len(sizes)), np.int64)
    keys_required = "compact" in config.cleanup_policy
    refused = CONTROL_BIT if transactional else CONTROL_BIT | TRANSACTIONAL_BIT
    code, i, n, found, wanted = check_batches(
        data, starts, sizes, config.max_message_bytes,
        keys_required, rows, refused,
    )  # fmt: skip
    if code == HEADER_PROBLEM:  # the Python check words it
        start = int(starts[i])
        batch = memoryview(data)[start : start + int(sizes[i])]
        _check_header(batch, start, config, transactional)
        raise AssertionError(f"batch at position {start}: refused, but no header problem found")
    if code == TIMESTAMP_RANGE:
        raise InvalidBatchError(
            f"batch at position {int(starts[i])}: record timestamps outside a 64-bit integer"
        )
    if code != Problem.OK:
        problem = PROBLEMS[code](n, found, wanted)
        raise InvalidBatchError(f"batch at position {int(starts[i])}: {problem}")
    limit = compression.append_limit(config.max_message_bytes)
    for i in np.flatnonzero(rows[3]).tolist():  # the compressed ones
        start = int(starts[i])
        batch = memoryview(data)[start : start + int(sizes[i])]
        rows[1, i], rows[2, i] = _check_compressed(batch, start, keys_required, limit)
    return rows


def _check_header(
    batch: bytes | memoryview, position: int, config: TopicConfig, transactional: bool = False
) -> BatchHeader:
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
        raise InvalidBatchError(f"{where}: a control batch; only the coordinator writes markers")
    if header.is_transactional and not transactional:
        raise InvalidBatchError(
            f"{where}: a transactional batch; transactions go through the Kafka listener"
        )
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


def _check_compressed(
    batch: memoryview, position: int, keys_required: bool, limit: int
) -> tuple[int, int]:
    """Check the records of a compressed batch, decompressed; its records'
    largest timestamp and its stream bytes."""
    header = read_header(batch)
    try:
        body = np.frombuffer(bytes(records_section(batch, header, limit)), np.uint8)
    except CorruptRecordError as e:
        raise InvalidBatchError(f"batch at position {position}: {e}") from None
    count = header.records_count
    fields = np.empty((6, count), np.int64)
    code, _, n, found, wanted = walk_records(
        body, np.array([0], np.int64), np.array([len(body)], np.int64),
        np.array([count], np.int64), fields, strict=True, keys_required=keys_required,
    )  # fmt: skip
    if code != Problem.OK:
        raise InvalidBatchError(f"batch at position {position}: {PROBLEMS[code](n, found, wanted)}")
    ts_delta, _, _, _, _, value_len = fields
    low, high = int(ts_delta.min()), int(ts_delta.max())
    if not INT64_MIN <= header.base_timestamp + low <= header.base_timestamp + high <= INT64_MAX:
        raise InvalidBatchError(
            f"batch at position {position}: record timestamps outside a 64-bit integer"
        )
    return header.base_timestamp + high, int(np.maximum(value_len, 0).sum()) + count
