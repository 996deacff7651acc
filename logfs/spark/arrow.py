"""Arrow building for the Spark source: the Kafka source schema, and the record batches of one
topic-partition offset range (the read hot path).

The Kafka source schema is spelled once, in Arrow types (`arrow_schema`); Spark's is made
from it (`spark_schema`). Spark compares the first batch's Arrow schema with the source
schema exactly, so the types are those `pyspark.sql.pandas.types.to_arrow_schema` gives back
for it::

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, tz=UTC], timestampType int32
    [, headers list<struct<key: string, value: binary>>]

Runs of whole batches are decoded column-wise (`decode_columns`) straight into Arrow arrays,
with no Python object per record: the core's compiled codec walks every record of the batches
and gives each field for all rows as numpy columns (`columnar.decode`); the keys and values
become Arrow binary arrays by one compiled gather (data and offsets buffers) from the records
sections. With ``includeHeaders``, the headers column comes from `_columns.pyx`: each
record's headers count, read just after its value, and when a run has headers at all, their
Arrow buffers built in C; a run without any is one column of nulls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ..core.errors import CorruptRecordError, OffsetOutOfRangeError, UnknownTopicError
from ..core.format import BatchHeader, decode, gather
from ._columns import header_buffers, header_counts
from .options import DATA_LOSS_HINT, DataLossError, OffsetRange

if TYPE_CHECKING:
    from ..core.client import RemoteStore
    from ..core.log import Store

HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())]))
)
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
# Rows per Arrow batch handed to Spark: big enough to amortise the per-batch costs, small
# enough that a worker's memory stays bounded (values of 1 KiB -> 64 MiB).
BATCH_ROWS = 65536
BATCH_BYTES = 32 << 20


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Kafka source schema, with ``headers`` or without."""
    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP_TYPE),
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(("headers", HEADER_TYPE))
    return pa.schema(fields)


def spark_schema(include_headers: bool) -> StructType:
    """`arrow_schema` in Spark's types (made without a JVM)."""
    return from_arrow_schema(arrow_schema(include_headers), prefer_timestamp_ntz=False)


def read_range(
    store: Store | RemoteStore,
    r: OffsetRange,
    *,
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records ``[r.start, r.end)`` of one partition of ``store``.

    Offsets that are really gone are data loss: deleted by retention, a deleted topic, or
    a tail cut after a crash (the log now ends before ``r.end``): `DataLossError`, or with
    ``fail_on_data_loss=False`` skipped, as the Kafka source does. Anything else fails
    the read whatever ``fail_on_data_loss`` says: an I/O or permission error (`OSError`),
    damaged records (`CorruptRecordError`, naming the partition and offset).
    """
    try:
        log = store.log(r.topic, r.partition)
    except UnknownTopicError as e:  # the topic was deleted after planning
        if fail_on_data_loss:
            raise DataLossError(f"{r.topic}-{r.partition} is gone ({e}). {DATA_LOSS_HINT}") from e
        return
    start = r.start
    if start < log.log_start_offset:
        if fail_on_data_loss:
            raise DataLossError(
                f"offsets {start}..{min(r.end, log.log_start_offset) - 1} of "
                f"{r.topic}-{r.partition} were deleted by retention before they were read "
                f"(log start offset {log.log_start_offset}). {DATA_LOSS_HINT}"
            )
        start = log.log_start_offset
    end = min(r.end, log.next_offset)
    if end < r.end and fail_on_data_loss:
        raise DataLossError(
            f"offsets {max(start, end)}..{r.end - 1} of {r.topic}-{r.partition} are past the "
            f"end of its log, which ends at offset {log.next_offset} (an endingOffsets past the "
            "end, or a log that got shorter: the topic re-created, a torn tail cut after a "
            f"crash). {DATA_LOSS_HINT}"
        )
    if start >= end:
        return

    def to_arrow(chunk, r, start, end):
        return _columnar(chunk, r, start, end, include_headers)

    chunk, rows, size, position = [], 0, 0, start
    try:
        for header, batch in log.raw_batches(start, end):
            position = header.next_offset
            if header.is_control:
                continue
            chunk.append((header, batch))
            rows += header.records_count
            size += header.size
            if rows >= BATCH_ROWS or size >= BATCH_BYTES:
                yield to_arrow(chunk, r, start, end)
                chunk, rows, size = [], 0, 0
    except (OffsetOutOfRangeError, UnknownTopicError) as e:
        # Over the network the offsets are fetched after the log was opened: retention
        # (or a deleted topic) may take them meanwhile.
        if fail_on_data_loss:
            raise DataLossError(
                f"offsets {position}..{end - 1} of {r.topic}-{r.partition} went away while "
                f"they were read ({e}). {DATA_LOSS_HINT}"
            ) from e
        if chunk:
            yield to_arrow(chunk, r, start, end)
        if isinstance(e, OffsetOutOfRangeError):  # what is left, from the new log start
            yield from read_range(
                store, r._replace(start=position), include_headers=include_headers,
                fail_on_data_loss=False,
            )  # fmt: skip
        return
    if chunk:
        yield to_arrow(chunk, r, start, end)


# ---------------------------------------------------------------- columnar decoding


def _binary(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """An Arrow binary array of ``buf[start:start+length]`` (length -1: null): its data and
    offsets buffers in one compiled pass (`core.format.gather`)."""
    n = len(starts)
    data, offsets = gather(buf, starts, lengths, with_offsets=True)
    valid = lengths >= 0
    nulls = n - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], nulls
    )


def _headers(buf: np.ndarray, at: np.ndarray, where: str) -> pa.Array:
    """The ``headers`` column of the records whose headers count is at ``at`` (just after
    each value): null for a record without headers (all of them, on most topics: nothing
    more is decoded then), else built by the compiled `header_buffers`."""
    n = len(at)
    found = header_counts(buf, at)
    if found is not None and not found[0].any():
        return pa.nulls(n, HEADER_TYPE)
    built = None if found is None else header_buffers(buf, found[1], found[0])
    if built is None:
        raise CorruptRecordError(f"{where}: a record's headers overrun it, or a header key is "
                                 "null or not UTF-8")  # fmt: skip
    with_headers = found[0] > 0
    list_offsets, key_offsets, key_data, value_valid, value_offsets, value_data = built
    total = len(value_valid)
    value_nulls = total - int(np.count_nonzero(value_valid))
    keys = pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(key_offsets),
                                 pa.py_buffer(key_data)])  # fmt: skip
    values = pa.Array.from_buffers(
        pa.binary(), total,
        [pa.py_buffer(np.packbits(value_valid, bitorder="little")) if value_nulls else None,
         pa.py_buffer(value_offsets), pa.py_buffer(value_data)],
        value_nulls,
    )  # fmt: skip
    pairs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE.value_type))
    list_nulls = n - int(np.count_nonzero(with_headers))
    bitmap = pa.py_buffer(np.packbits(with_headers, bitorder="little")) if list_nulls else None
    return pa.Array.from_buffers(
        HEADER_TYPE, n, [bitmap, pa.py_buffer(list_offsets)], list_nulls, children=[pairs]
    )


def decode_columns(
    batches: list[tuple[BatchHeader, memoryview]], start: int, end: int, headers: bool = False
) -> dict:
    """Columns of the records with offsets in ``[start, end)`` of whole batches.

    Returns:
        dict of ``key``/``value`` (Arrow binary), ``offset``/``timestamp`` (int64, ms) and
        ``timestampType`` (int32) numpy arrays, and with ``headers`` the Arrow ``headers``.
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
    value_start, value_len = rows["value"]
    rows["key"], rows["value"] = _binary(cols.buf, *rows["key"]), _binary(cols.buf, *rows["value"])
    if headers:
        where = f"batches from offset {batches[0][0].base_offset}" if batches else "no batch"
        rows["headers"] = _headers(cols.buf, value_start + np.maximum(value_len, 0), where)
    return rows


def _columnar(chunk: list, r: OffsetRange, start: int, end: int, headers: bool) -> pa.RecordBatch:
    columns = decode_columns(chunk, start, end, headers)
    n = len(columns["offset"])
    arrays = [
        columns["key"],
        columns["value"],
        _repeat(r.topic, n),
        pa.array(np.full(n, r.partition, np.int32)),
        pa.array(columns["offset"]),
        pa.array(columns["timestamp"] * 1000, TIMESTAMP_TYPE),  # ms -> us
        pa.array(columns["timestampType"]),
    ]
    if headers:
        arrays.append(columns["headers"])
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(headers))


def _repeat(text: str, n: int) -> pa.Array:
    """``n`` times the same string, built from buffers (no list of ``n`` Python objects)."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    )
