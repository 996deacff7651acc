"""Columnar decoding of record batches into numpy/Arrow, for the Spark read hot path.

`record.decode_records` builds a Python `Record` per row; this decodes a run of whole
(CRC-checked) batches at once. One short Python loop walks the records' length varints to
find where each record starts (records are variable-length, so that walk is sequential); every
other field is then decoded for all rows together with numpy::

    length varint | attributes int8 | timestamp delta varlong | offset delta varint |
    key length varint | key | value length varint | value | header count varint | headers

Keys and values become Arrow binary arrays by one gather from the records sections. Headers
are not decoded here: the reader uses `record.decode_records` when ``includeHeaders`` is set.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import compression
from .errors import CorruptRecordError
from .record import HEADER_SIZE, LOG_APPEND_TIME, BatchHeader

_PAD = bytes(10)  # lets a varint read past the last record hit zeros, not the end


def _walk(body: bytes, pos: int, count: int, end: int, starts: list[int], base: int) -> None:
    """Append the start of each of ``count`` records in ``body[pos:end]``."""
    append = starts.append
    for _ in range(count):
        append(pos)
        b = body[pos]
        if b < 0x80:  # a one-byte length (< 64): zig-zag of a non-negative n is 2n
            pos += 1 + (b >> 1)
            continue
        z, shift, p = b & 0x7F, 7, pos + 1
        while True:
            b = body[p]
            z |= (b & 0x7F) << shift
            p += 1
            if b < 0x80 or shift > 63:
                break
            shift += 7
        pos = p + (z >> 1)
    if pos != end:
        raise CorruptRecordError(
            f"batch at offset {base}: its records end at {pos - end:+d} bytes from the batch end"
        )


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the zig-zag varint at every position; returns (values, positions after)."""
    b = buf[pos]
    z = (b & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), np.int64)
    more = np.flatnonzero(b & 0x80)
    shift = np.uint64(7)
    while more.size:
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")
        b = buf[pos[more] + size[more]]
        z[more] |= (b & 0x7F).astype(np.uint64) << shift
        size[more] += 1
        more = more[(b & 0x80) != 0]
        shift += np.uint64(7)
    values = (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64)
    return values, pos + size


def _binary(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """An Arrow binary array of ``buf[start:start+length]`` (length -1: null)."""
    n = len(starts)
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total > 2**31 - 1:
        raise ValueError("more than 2 GiB of binary data in one Arrow batch")
    gather = np.repeat(starts - offsets[:-1], sizes) + np.arange(total, dtype=np.int64)
    data = buf[gather]
    nulls = n - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)], nulls
    )


def decode_columns(batches: list[tuple[BatchHeader, memoryview]], start: int, end: int) -> dict:
    """Columns of the records with offsets in ``[start, end)`` of whole batches.

    Returns:
        dict of ``key``/``value`` (Arrow binary), ``offset``/``timestamp`` (int64, ms) and
        ``timestampType`` (int32) numpy arrays.
    """
    bodies, starts = [], []
    for header, batch in batches:
        body = batch[HEADER_SIZE : header.size]
        if header.codec != compression.NONE:
            body = compression.decompress(header.codec, bytes(body))
        bodies.append(body)
    data = b"".join(bodies) + _PAD
    position = 0
    for (header, _), body in zip(batches, bodies, strict=True):
        _walk(
            data, position, header.records_count, position + len(body), starts, header.base_offset
        )
        position += len(body)
    buf = np.frombuffer(data, np.uint8)
    pos = np.array(starts, np.int64)
    counts = [h.records_count for h, _ in batches]
    per_row = {
        name: np.repeat(np.array(values, np.int64), counts)
        for name, values in (
            ("base_offset", [h.base_offset for h, _ in batches]),
            ("base_ts", [h.base_timestamp for h, _ in batches]),
            ("max_ts", [h.max_timestamp for h, _ in batches]),
            ("log_append", [h.timestamp_type == LOG_APPEND_TIME for h, _ in batches]),
        )
    }
    length, pos = _varints(buf, pos)
    record_end = pos + length
    ts_delta, pos = _varints(buf, pos + 1)  # + 1: the record attributes byte
    offset_delta, pos = _varints(buf, pos)
    key_len, key_start = _varints(buf, pos)
    value_len, value_start = _varints(buf, key_start + np.maximum(key_len, 0))
    if np.any(value_start + np.maximum(value_len, 0) >= record_end + 1):
        raise CorruptRecordError(f"batch at offset {batches[0][0].base_offset}: bad record fields")
    log_append = per_row["log_append"] != 0
    rows = {
        "offset": per_row["base_offset"] + offset_delta,
        "timestamp": np.where(log_append, per_row["max_ts"], per_row["base_ts"] + ts_delta),
        "timestampType": log_append.astype(np.int32),
        "key": (key_start, key_len),
        "value": (value_start, value_len),
    }
    keep = (rows["offset"] >= start) & (rows["offset"] < end)
    if not keep.all():
        rows = {
            name: tuple(a[keep] for a in v) if isinstance(v, tuple) else v[keep]
            for name, v in rows.items()
        }
    rows["key"], rows["value"] = _binary(buf, *rows["key"]), _binary(buf, *rows["value"])
    return rows
