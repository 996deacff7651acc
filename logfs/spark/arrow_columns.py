"""Columnar decoding of record batches into Arrow, for the Spark read hot path.

The records are decoded column-wise by the core (`columns.decode`: one walk
along the length varints in lockstep over the batches, every field for all
rows at once with numpy); this turns the keys and values into Arrow binary
arrays by one gather from the records sections. Headers are not decoded here:
the reader uses `record.decode_records` when ``includeHeaders`` is set.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..core.columnar import decode
from ..core.record import BatchHeader


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
    cols = decode(batches)
    rows = {
        "offset": cols.offset,
        "timestamp": cols.timestamp,
        "timestampType": cols.log_append.astype(np.int32),
        "key": (cols.key_start, cols.key_len),
        "value": (cols.value_start, cols.value_len),
    }
    keep = (rows["offset"] >= start) & (rows["offset"] < end)
    if not keep.all():
        rows = {
            name: tuple(a[keep] for a in v) if isinstance(v, tuple) else v[keep]
            for name, v in rows.items()
        }
    rows["key"], rows["value"] = _binary(cols.buf, *rows["key"]), _binary(cols.buf, *rows["value"])
    return rows
