"""Column-wise encoding and decoding of many record batches at once.

`record.encode_batch` and `record.decode_records` handle one record at a time in
Python (about a microsecond each). The hot paths — appending lines through the
mount, reading ``stream``, counting a stream's size, Spark reads — handle many
batches at once here instead; the bytes are exactly those of `record` (tests
check both against each other under Hypothesis).

Decoding: the compiled codec (`_codec.walk_records`) walks every record of the
batches, checking it, and gives each record's fields as numpy columns
(`Columns`); `value_lines` gathers values into lines in one compiled pass.

Encoding (`encode_plain`) covers the common append: values without keys or
headers, one timestamp, no compression. The values come packed — each value
followed by one separator byte (the ``\\n`` of a line) — and the records'
bytes are laid out around them: each record is ::

    length varint | 0x00 attributes | 0x00 timestamp delta | offset delta varint |
    0x01 key length -1 | value length varint | value | 0x00 header count

so a record ends with the value and the byte that was the separator.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._codec import Problem, gather, walk_records
from .errors import CorruptRecordError
from .record import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    pack_header_into,
    records_section,
)

PAD = bytes(10)  # lets a varint read past the last record hit zeros, not the end

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
    data = bytearray(b"".join(bodies) + PAD)
    sizes = np.fromiter((len(b) for b in bodies), np.int64, len(bodies))
    ends = np.cumsum(sizes)
    return decode_bodies(data, ends - sizes, ends, [h for h, _ in batches])


def decode_region(
    region: bytearray, positions: list[int], headers: list[BatchHeader], timestamps: bool = True
) -> Columns:
    """`decode` for uncompressed batches that lie in ``region`` at ``positions``
    (followed by at least ``len(PAD)`` bytes): no copy of the records."""
    pos = np.asarray(positions, np.int64)
    ends = pos + np.fromiter((h.size for h in headers), np.int64, len(headers))
    return decode_bodies(region, pos + HEADER_SIZE, ends, headers, timestamps)


def decode_bodies(
    data: bytearray,
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


def stream_bytes(cols: Columns, n_batches: int) -> np.ndarray:
    """Per batch: bytes its records add to a ``stream`` (each value and a newline)."""
    per_record = np.maximum(cols.value_len, 0) + 1
    return np.bincount(cols.batch_of, weights=per_record, minlength=n_batches).astype(np.int64)


# ---------------------------------------------------------------- encoding


class Encoded(NamedTuple):
    """Batches laid out back to back in one buffer."""

    data: memoryview
    sizes: list[int]  # bytes per batch
    last_offsets: list[int]
    stream_bytes: list[int]  # per batch, see `stream_bytes`


def _varint_sizes(z: np.ndarray) -> np.ndarray:
    """Bytes of each (zig-zagged, non-negative, < 2**35) varint."""
    top = int(z.max(initial=0))
    sizes = np.ones(len(z), np.int64)
    bound = 1 << 7
    while top >= bound:
        sizes += z >= bound
        bound <<= 7
    return sizes


def _put_varints(out: np.ndarray, pos: np.ndarray, z: np.ndarray, sizes: np.ndarray) -> None:
    """Write the (already zig-zagged, non-negative) varints ``z`` at ``pos``."""
    more = sizes > 1
    out[pos] = (z & 0x7F) | (more << 7)
    sel = np.flatnonzero(more)
    k = 1
    while sel.size:
        zs, ps = z[sel] >> (7 * k), pos[sel] + k
        more = sizes[sel] > k + 1
        out[ps] = (zs & 0x7F) | (more << 7)
        sel = sel[more]
        k += 1


def plain_cuts(lengths: np.ndarray, budget: int, overhead: int) -> list[int]:
    """Batch ends (exclusive record indexes) such that every batch's records
    (each at most ``overhead + length`` bytes) fit ``budget``, one record at least.

    Record i goes to batch ``start_i // step``, with ``start_i`` the bytes before
    it and ``step`` the budget less the largest record: a batch then spans less
    than ``step`` of starts plus its last record. (Not the greedy fill of
    `batching._chunks`; batches come out at most one record smaller.)
    """
    sizes = lengths + overhead
    starts = np.cumsum(sizes) - sizes
    step = max(1, budget - int(sizes.max(initial=0)))
    ids = starts // step
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    return [*cuts.tolist(), len(lengths)] if len(lengths) else []


def encode_plain(
    packed: bytes | memoryview,
    lengths: np.ndarray,
    base_offset: int,
    cuts: list[int],
    *,
    timestamp: int,
    timestamp_type: int,
) -> Encoded:
    """Uncompressed batches of keyless, headerless records at one timestamp.

    Args:
        packed: the values, each followed by one separator byte (any value).
        lengths: each value's length.
        cuts: the end (exclusive record index) of each batch, see `plain_cuts`.
    """
    n = len(lengths)
    lengths = lengths.astype(np.int64)
    counts = np.diff(np.asarray([0, *cuts], np.int64))
    nb = len(counts)
    batch_first = np.asarray([0, *cuts[:-1]], np.int64)
    delta = np.arange(n, dtype=np.int64) - np.repeat(batch_first, counts)
    zdelta, zlen = 2 * delta, 2 * lengths
    s_delta, s_len = _varint_sizes(zdelta), _varint_sizes(zlen)
    body = 2 + s_delta + 1 + s_len + lengths + 1  # attrs, ts, delta, key, vlen, value, headers
    zbody = 2 * body
    s_body = _varint_sizes(zbody)
    record = s_body + body
    batch_of = np.repeat(np.arange(nb), counts)
    rec_start = np.zeros(n, np.int64)
    np.cumsum(record[:-1], out=rec_start[1:])
    rec_start += HEADER_SIZE * (batch_of + 1)
    prefix = s_body + 2 + s_delta + 1 + s_len
    total = int(rec_start[-1] + record[-1])
    out = np.zeros(total, np.uint8)  # attributes, timestamp deltas, header counts: 0
    # Value bytes and their separators go where the records' prefixes leave room.
    runs = np.empty(2 * n, np.int64)
    runs[0::2] = prefix
    runs[0::2][batch_first] += HEADER_SIZE
    runs[1::2] = lengths + 1
    pattern = np.zeros(2 * n, bool)
    pattern[1::2] = True
    out[np.repeat(pattern, runs)] = np.frombuffer(packed, np.uint8, int(lengths.sum()) + n)
    out[rec_start + record - 1] = 0  # header count (was the separator)
    _put_varints(out, rec_start, zbody, s_body)
    p = rec_start + s_body
    _put_varints(out, p + 2, zdelta, s_delta)
    p = p + 2 + s_delta
    out[p] = 1  # null key
    _put_varints(out, p + 1, zlen, s_len)
    ends = np.cumsum(np.bincount(batch_of, weights=record, minlength=nb).astype(np.int64))
    sizes = (ends - np.concatenate(([0], ends[:-1]))) + HEADER_SIZE
    stream = np.bincount(batch_of, weights=lengths + 1, minlength=nb).astype(np.int64)
    view = memoryview(out).cast("B")
    attributes = TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0
    position, last_offsets = 0, []
    size_list = sizes.tolist()
    for count, size in zip(counts.tolist(), size_list, strict=True):
        pack_header_into(view, position, base_offset, size, attributes, count, timestamp, timestamp)
        base_offset += count
        last_offsets.append(base_offset - 1)
        position += size
    return Encoded(view, size_list, last_offsets, stream.tolist())
