"""The sink of the ``logfs`` Spark data source: write options, batch and streaming writers
(the Kafka sink's rules).

Columns: ``value`` (binary or string) is required; ``key`` (binary or string), ``headers``
(``array<struct<key:string,value:binary>>``), ``topic`` (string) and ``partition`` (int) are
optional; other columns are ignored. The ``topic`` option overrides the column. A topic that
does not exist is created, as a Kafka broker with ``auto.create.topics.enable`` does.

Each write task is a Kafka producer (core/client/producer.py): it encodes its rows into RecordBatch
v2 batches on the executor, in bulk per Arrow batch, and flushes them before it commits, so
a committed task's rows are durable. A row with no partition is placed by Kafka's default
partitioner: with a key on ``murmur2(key) % partitions``; without one, with the other unkeyed
rows of its topic in the same Arrow batch on one sticky partition, the task's next Arrow
batch taking the next (each task starts its round robin at a random partition).

The batches go to the one writer of the data directory: a live ``logfs mount`` of it (found
by its mount record), through ``MNT/<topic>/<p>/append.batches``, where the daemon only
validates and appends them while shell tools keep writing beside; else the store, opened
for writing for the flush, waiting up to ``lockTimeout`` seconds (default 60) for another
writer's lock. With ``kafka.bootstrap.servers`` instead of ``path``, the producer sends them
to that Kafka listener in Produce requests (acks=-1). Delivery is at least once, as with
Kafka: a task that fails after appending and is retried appends its rows again; a task whose
mount went away mid-write fails with a `ProducerError` saying so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from ..core.client import Producer, mountinfo
from ..core.errors import DataDirBusyError, LogfsError
from .arrow import spark_schema
from .errors import SparkOptionError
from .listener import Listener, parse_location

DEFAULT_LOCK_TIMEOUT = 60.0
_HEADERS = spark_schema(include_headers=True)["headers"].dataType  # the Kafka source's, nullable


@dataclass
class WriteOptions:
    path: str | None  # a data directory, or
    topic: str | None
    lock_timeout: float
    listener: Listener | None = None  # a Kafka listener


@dataclass
class AppendedMessage(WriterCommitMessage):
    """Records appended by one task, per ``topic-partition``."""

    counts: dict[str, int]


def write_options(options: Mapping[str, str], schema: StructType) -> WriteOptions:
    """Check the options and the DataFrame's columns on the driver, before any task runs."""
    opts = {k.lower(): v for k, v in options.items()}
    path, listener = parse_location(opts)
    # Matched by exact name, as the Kafka sink does: a column "Value" is not "value".
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise SparkOptionError("required attribute 'value' not found")
    for name, allowed in (
        ("value", (BinaryType(), StringType())),
        ("key", (BinaryType(), StringType())),
        ("topic", (StringType(),)),
        ("partition", (IntegerType(),)),
        ("headers", (_HEADERS,)),
    ):
        if name in types and _nullable(types[name]) not in allowed:
            wanted = " or ".join(t.simpleString() for t in allowed)
            raise SparkOptionError(
                f"{name} attribute type must be {wanted}, not {types[name].simpleString()}"
            )
    topic = opts.get("topic")
    if topic is None and "topic" not in types:
        raise SparkOptionError(
            "topic option required when no 'topic' attribute is present; "
            "use the topic option to set a topic"
        )
    try:
        lock_timeout = float(opts.get("locktimeout", DEFAULT_LOCK_TIMEOUT))
    except ValueError:
        raise SparkOptionError('option "lockTimeout" must be a number of seconds') from None
    return WriteOptions(path, topic, lock_timeout, listener)


def _nullable(kind: DataType) -> DataType:
    """``kind`` with every part nullable: Kafka's sink compares column types ignoring
    nullability (``array(named_struct('key', 'h', 'value', x'01'))`` has non-nullable
    fields and elements, and is a valid ``headers`` column)."""
    if isinstance(kind, ArrayType):
        return ArrayType(_nullable(kind.elementType), True)
    if isinstance(kind, MapType):
        return MapType(_nullable(kind.keyType), _nullable(kind.valueType), True)
    if isinstance(kind, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in kind.fields])
    return kind


def _column(batch, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _as_bytes(items: list) -> list:
    return [v.encode() if isinstance(v, str) else v for v in items]


def produce(options: WriteOptions, batches: Iterator) -> dict[str, int]:
    """Send every row of ``batches`` (Arrow record batches) through a `Producer`
    and flush it; counts per ``topic-partition``. Nothing is opened without a row."""
    counts: dict[str, int] = {}
    rows = (batch for batch in batches if batch.num_rows)
    first = next(rows, None)
    if first is None:
        return counts
    if options.listener is not None:
        # A listener that cannot be reached yet (restarting) is waited for as the source
        # waits, before anything is sent: nothing can be appended twice by this wait.
        with options.listener.store() as listener:
            listener.topics()
        producer = options.listener.producer()
    else:
        _refuse_served(options.path)
        producer = Producer(options.path, lock_timeout=options.lock_timeout)
    try:
        with producer:
            for batch in itertools.chain([first], rows):
                _send(producer, options, batch, counts)
            producer.flush()
    except DataDirBusyError as e:
        raise DataDirBusyError(
            f"cannot write to {options.path}: {e}. logfs allows one writer process per data "
            "directory (like one Kafka broker per log dir) and it is not a live mount: wait "
            "for the other writer or raise lockTimeout (if it is a `logfs serve`, write through "
            'its listener with the option "kafka.bootstrap.servers" instead of "path")'
        ) from e
    return counts


def _refuse_served(path: str) -> None:
    """Fail at once when ``logfs serve`` holds the data directory: it stays its one writer
    for as long as it runs, and its mount record names the listener to write through."""
    record = mountinfo.read_record(path)
    if record is None or record.mountpoint or not record.kafka:
        return
    started = mountinfo.process_start_ticks(record.pid)
    if started is None or started != record.pid_start_ticks:
        return  # the record of a listener that is gone
    raise DataDirBusyError(
        f"cannot write to {path}: `logfs serve` (pid {record.pid}) is its one writer; write "
        f'through its Kafka listener with the option "kafka.bootstrap.servers" = '
        f'"{record.kafka}" instead of "path"'
    )


def _send(producer: Producer, options: WriteOptions, batch, counts: dict[str, int]) -> None:
    values = _as_bytes(_column(batch, "value"))
    keys = _column(batch, "key")
    keys = _as_bytes(keys) if keys is not None else None
    headers = _column(batch, "headers")
    if headers is not None:
        headers = [tuple((h["key"], h["value"]) for h in hs or ()) for hs in headers]
    topics = [options.topic] * len(values) if options.topic else _column(batch, "topic")
    partitions = _column(batch, "partition")
    groups: dict[tuple[str, int | None], list[int]] = {}  # rows by topic and given partition
    for i, topic in enumerate(topics):
        if topic is None:
            raise LogfsError(f"row {i} has a null topic and no topic option is set")
        groups.setdefault((topic, None if partitions is None else partitions[i]), []).append(i)
    for (topic, partition), rows in groups.items():
        whole = len(rows) == len(values)
        sent = producer.send_many(
            topic,
            values if whole else [values[i] for i in rows],
            keys=None if keys is None else keys if whole else [keys[i] for i in rows],
            headers=None if headers is None else headers if whole else [headers[i] for i in rows],
            partition=partition,
        )
        for p, n in sent.items():
            name = f"{topic}-{p}"
            counts[name] = counts.get(name, 0) + n


class LogfsWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> AppendedMessage:
        return AppendedMessage(produce(self.options, iterator))


class LogfsStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> AppendedMessage:
        return AppendedMessage(produce(self.options, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        pass  # every task's producer flushed: its records are durable

    def abort(self, messages: list, batchId: int) -> None:
        pass  # appends are not transactional: at-least-once delivery, as with Kafka
