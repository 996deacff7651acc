"""Column-wise encoding and decoding of many record batches at once.

`record.encode_batch` and `decoding.decode_records` handle one record at a time in
Python (about a microsecond each). The hot paths — appending lines through the
mount, reading ``stream``, counting a stream's size, Spark reads — handle many
batches at once here instead; the bytes are exactly those of `record` (tests
check both against each other under Hypothesis).

Decoding: the one record walker (`walker.walk_records`) walks every record of the
batches, checking it, and gives each record's fields as numpy columns
(`Columns`); `value_lines` gathers values into lines in one compiled pass.

Encoding (`encode_plain`, compiled) covers the common append: values without
keys or headers, one timestamp, no compression, packed — each value followed
by one separator byte (the ``\\n`` of a line).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import CorruptRecordError
from . import _columns, _valuelines
from ._columns import gather
from .record import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    read_header,
    records_section,
)
from .walker import Problem, walk_records

# ---------------------------------------------------------------- decoding


class Columns(NamedTuple):
    """Decoded fields of many records (numpy arrays, one element per record) over
    ``buf``, the concatenated records sections (padded)."""

    buf: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray | None
    log_append: np.ndarray | None  # bool
    key_start: np.ndarray
    key_len: np.ndarray  # -1: null
    value_start: np.ndarray
    value_len: np.ndarray  # -1: null
    batch_of: np.ndarray  # index into the batches passed in


def decode(batches: list[tuple[BatchHeader, memoryview]]) -> Columns:
    """The fields of every record of whole (CRC-checked, non-control) batches.

    Headers are not decoded (only stepped over via the record length).
    """
    bodies = [records_section(batch, header) for header, batch in batches]
    data = b"".join(bodies)
    sizes = np.fromiter((len(b) for b in bodies), np.int64, len(bodies))
    ends = np.cumsum(sizes)
    return decode_bodies(data, ends - sizes, ends, [h for h, _ in batches])


def decode_region(
    region: bytes, positions: list[int], headers: list[BatchHeader], timestamps: bool = True
) -> Columns:
    """`decode` for uncompressed batches that lie in ``region`` at
    ``positions``, without copying the records."""
    pos = np.asarray(positions, np.int64)
    ends = pos + np.fromiter((h.size for h in headers), np.int64, len(headers))
    return decode_bodies(region, pos + HEADER_SIZE, ends, headers, timestamps)


def decode_bodies(
    data: bytes,
    starts: np.ndarray,
    ends: np.ndarray,
    headers: list[BatchHeader],
    timestamps: bool = True,
) -> Columns:
    """Decode the records sections at ``data[starts[i]:ends[i]]`` of ``headers[i]``
    (``timestamps=False``: leave ``timestamp`` and ``log_append`` None)."""
    buf = np.frombuffer(data, np.uint8)
    n = len(headers)
    counts = np.fromiter((h.records_count for h in headers), np.int64, n)
    fields = np.empty((6, int(counts.sum())), np.int64)
    code, b, r, _, _ = walk_records(
        buf, np.asarray(starts, np.int64), np.asarray(ends, np.int64), counts, fields
    )
    if code != Problem.OK:
        raise CorruptRecordError(
            f"batch at offset {headers[b].base_offset}: record {r}: bad records section "
            f"({Problem(code).name.lower()})"
        )
    ts_delta, offset_delta, key_start, key_len, value_start, value_len = fields
    batch_of = np.repeat(np.arange(n), counts)

    def per_row(values, dtype=np.int64):
        return np.fromiter(values, dtype, n)[batch_of]

    log_append = timestamp = None
    if timestamps:
        log_append = per_row((h.timestamp_type == LOG_APPEND_TIME for h in headers), bool)
        timestamp = np.where(
            log_append,
            per_row(h.max_timestamp for h in headers),
            per_row(h.base_timestamp for h in headers) + ts_delta,
        )
    offset = per_row(h.base_offset for h in headers) + offset_delta
    return Columns(
        buf, offset, timestamp, log_append, key_start, key_len, value_start, value_len, batch_of
    )


def value_lines(cols: Columns, keep: np.ndarray | None = None) -> bytes:
    """Every (kept) record's value followed by ``\n`` (a null value: just ``\n``)."""
    vs, vl = cols.value_start, cols.value_len
    if keep is not None:
        vs, vl = vs[keep], vl[keep]
    return gather(cols.buf, vs, vl, ord("\n"))


def region_lines(
    region: bytes, positions: list[int], headers: list[BatchHeader], start: int = -1
) -> memoryview:
    """`value_lines` of `decode_region` in one compiled pass over the records
    (`_valuelines.plain_lines`): the lines of the uncompressed batches at
    ``positions`` of ``region``, records below offset ``start`` left out.

    Raises:
        CorruptRecordError: a records section does not parse (worded as `decode`).
    """
    at = np.asarray(positions, np.int64)
    lines, code, b, r = _valuelines.plain_lines(region, at, start)
    if code != Problem.OK:
        raise CorruptRecordError(
            f"batch at offset {headers[b].base_offset}: record {r}: bad records section "
            f"({Problem(code).name.lower()})"
        )
    return lines


class ScannedLines(NamedTuple):
    """What `scan_lines` made of a region: the lines, how far it got and the
    offset after the last batch it passed (-1: none)."""

    lines: memoryview
    stop: int
    next_offset: int


def scan_lines(
    region: bytes, start: int, end_offset: int, *, transactions_shown: bool
) -> ScannedLines:
    """The lines of a region of a .log file (from a batch boundary) in one compiled
    pass (`_valuelines.scan_lines`): headers and CRCs checked, records walked and
    copied, control batches passed over; it stops at the first batch it leaves
    to `decode` (compressed, cut off, bad, from ``end_offset`` on, transactional
    unless ``transactions_shown``).

    Raises:
        CorruptRecordError: a records section does not parse (worded as `decode`).
    """
    lines, stop, after, code, r = _valuelines.scan_lines(
        region, start, end_offset, transactions_shown
    )
    if code != Problem.OK:
        base = read_header(region, stop).base_offset
        raise CorruptRecordError(
            f"batch at offset {base}: record {r}: bad records section "
            f"({Problem(code).name.lower()})"
        )
    return ScannedLines(lines, stop, after)


def stream_bytes(cols: Columns, n_batches: int) -> np.ndarray:
    """Per batch: bytes its records add to a ``stream`` (each value and a newline)."""
    per_record = np.maximum(cols.value_len, 0) + 1
    return np.bincount(cols.batch_of, weights=per_record, minlength=n_batches).astype(np.int64)


# ---------------------------------------------------------------- encoding


class Encoded(NamedTuple):
    """Batches laid out back to back in one buffer."""

    data: memoryview
    sizes: np.ndarray  # int64: bytes per batch
    last_offsets: np.ndarray
    stream_bytes: np.ndarray  # per batch, see `stream_bytes`


def unpacked(
    packed: bytes | memoryview, lengths: np.ndarray, gap: int = 1, head: bytes = b""
) -> list[bytes]:
    """The values laid out as `encode_plain` takes them, one ``bytes`` each."""
    values, pos = [], -len(head)
    for length in lengths.tolist():
        values.append(bytes(packed[max(pos, 0) : pos + length]))
        pos += length + gap
    if values:
        values[0] = head + values[0]
    return values


def encode_plain(
    packed: bytes | memoryview,
    lengths: np.ndarray,
    base_offset: int,
    batch_bytes: int,
    *,
    timestamp: int,
    timestamp_type: int,
    head: bytes = b"",
    gap: int = 1,
) -> Encoded:
    """Uncompressed batches of keyless, headerless records at one timestamp,
    each filled up to ``batch_bytes`` (a larger record alone), compiled.

    Args:
        packed: the values, each followed by ``gap`` bytes (any: a line's
            separator, the next ``append.bin`` frame's length).
        lengths: each value's length.
        head: the first value's start, not in ``packed``, counted in its length.
    """
    attributes = TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0
    data, sizes, last_offsets, stream = _columns.encode_plain(
        packed, np.asarray(lengths, np.int64), base_offset, batch_bytes, timestamp,
        attributes, head, gap,
    )  # fmt: skip
    return Encoded(memoryview(data), sizes, last_offsets, stream)


def encode_lines(
    text: bytes | memoryview,
    head: bytes,
    base_offset: int,
    batch_bytes: int,
    *,
    timestamp: int,
    timestamp_type: int,
    limit: int,
) -> Encoded:
    """`encode_plain` of the lines of ``text`` (each ``\n``-terminated; ``head``
    the first one's start, written before), cut and encoded in one compiled pass.

    Raises:
        TooLargeError: a line longer than ``limit`` bytes.
    """
    attributes = TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0
    data, sizes, last_offsets, stream = _columns.encode_lines(
        text, head, base_offset, batch_bytes, timestamp, attributes, limit
    )
    return Encoded(memoryview(data), sizes, last_offsets, stream)
