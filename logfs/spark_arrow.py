"""Arrow record batches of one topic-partition offset range: the read hot path.

Spark compares the first batch's Arrow schema with the source schema exactly, so the types
here are those `pyspark.sql.pandas.types.to_arrow_schema` gives for the Kafka source schema::

    key binary, value binary, topic string, partition int32, offset int64,
    timestamp timestamp[us, tz=UTC], timestampType int32
    [, headers list<struct<key: string, value: binary>>]

Columns are gathered per decoded batch with ``zip(*records)`` (C loops, no per-row Python
objects besides the ones the decoder made) and turned into Arrow arrays once per output batch.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from .spark_plan import DATA_LOSS_HINT, DataLossError, OffsetRange

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())]))
)
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
# Rows per Arrow batch handed to Spark: big enough to amortise the per-batch costs, small
# enough that a worker's memory stays bounded (values of 1 KiB -> 64 MiB).
BATCH_ROWS = 65536


def ddl(include_headers: bool) -> str:
    return f"{SCHEMA_DDL}, {HEADERS_DDL}" if include_headers else SCHEMA_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
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


class _Columns:
    """Column lists of the rows gathered for the next Arrow batch."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list = []
        self.types: list[np.ndarray] = []

    def add(self, records: list, timestamp_type: int) -> None:
        offsets, timestamps, keys, values, headers = zip(*records, strict=True)
        self.offsets += offsets
        self.timestamps += timestamps
        self.keys += keys
        self.values += values
        self.headers += headers
        self.types.append(np.full(len(records), timestamp_type, np.int32))

    def __len__(self) -> int:
        return len(self.offsets)

    def to_arrow(self, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
        n = len(self.offsets)
        timestamps = np.fromiter(self.timestamps, np.int64, n) * 1000  # ms -> us
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array(np.full(n, partition, np.int32)),
            pa.array(np.fromiter(self.offsets, np.int64, n)),
            pa.array(timestamps, TIMESTAMP_TYPE),
            pa.array(np.concatenate(self.types)),
        ]
        if include_headers:
            arrays.append(pa.array([h or None for h in self.headers], HEADER_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def read_range(
    store, r: OffsetRange, *, include_headers: bool = False, fail_on_data_loss: bool = True
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records ``[r.start, r.end)`` of one partition of ``store``.

    Offsets that retention deleted (or a deleted topic) are data loss: `DataLossError`, or
    with ``fail_on_data_loss=False`` skipped, as the Kafka source does.
    """
    try:
        log = store.log(r.topic, r.partition)
    except Exception as e:  # UnknownTopicError: the topic was deleted after planning
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
    if start >= end:
        return
    columns = _Columns()
    for header, records in log.batches(start, end):
        if header.is_control or not records:
            continue
        if header.base_offset < start or header.last_offset >= end:
            records = [rec for rec in records if start <= rec.offset < end]
            if not records:
                continue
        columns.add(records, header.timestamp_type)
        if len(columns) >= BATCH_ROWS:
            yield columns.to_arrow(r.topic, r.partition, include_headers)
            columns = _Columns()
    if len(columns):
        yield columns.to_arrow(r.topic, r.partition, include_headers)
