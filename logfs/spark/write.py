"""The sink of the ``logfs`` Spark data source: write options, batch and streaming writers
(the Kafka sink's rules).

Columns: ``value`` (binary or string) is required; ``key`` (binary or string), ``headers``
(``array<struct<key:string,value:binary>>``), ``topic`` (string) and ``partition`` (int) are
optional; other columns are ignored. The ``topic`` option overrides the column. A row with no
partition is placed by `Partitioner`, the store's own (Kafka's default partitioner): with a
key on ``murmur2(key) % partitions``; without one, with the other unkeyed rows of its topic in
the same Arrow batch on one partition, the task's next batch taking the next partition (Kafka's
sticky partitioner; each task starts its round robin at a random partition). A topic that
does not exist is created with one partition, as a Kafka broker with
``auto.create.topics.enable`` does.

One writer process at a time: a writable `Store` holds an exclusive lock on the data
directory, like one Kafka broker per log dir. Each write task opens the store, appends, and
closes it (flush + checkpoint), waiting up to ``lockTimeout`` seconds (default 60) for other
tasks. While ``logfs mount`` serves the same data directory, writes fail with a clear error:
write through the mount, or unmount first. Delivery is at least once, as with Kafka: a task
that fails after appending and is retried appends its rows again.
"""

from __future__ import annotations

import itertools
import random
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
    IntegerType,
    StringType,
    StructType,
)

from ..core.errors import LogfsError
from ..core.partitioner import Partitioner
from ..core.store import Store
from .plan import SparkOptionError

DEFAULT_LOCK_TIMEOUT = 60.0
_HEADERS = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


@dataclass
class WriteOptions:
    path: str
    topic: str | None
    lock_timeout: float


@dataclass
class AppendedMessage(WriterCommitMessage):
    """Records appended by one task, per ``topic-partition``."""

    counts: dict[str, int]


def write_options(options: Mapping[str, str], schema: StructType) -> WriteOptions:
    """Check the options and the DataFrame's columns on the driver, before any task runs."""
    opts = {k.lower(): v for k, v in options.items()}
    if not opts.get("path"):
        raise SparkOptionError('option "path" (the logfs data directory) is required')
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise SparkOptionError("required attribute 'value' not found")
    for name, allowed in (
        ("value", (BinaryType(), StringType())),
        ("key", (BinaryType(), StringType())),
        ("topic", (StringType(),)),
        ("partition", (IntegerType(),)),
        ("headers", (_HEADERS,)),
    ):
        if name in types and types[name] not in allowed:
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
    return WriteOptions(opts["path"], topic, lock_timeout)


def _column(batch, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def _as_bytes(items: list) -> list:
    return [v.encode() if isinstance(v, str) else v for v in items]


def append_batches(options: WriteOptions, batches: Iterator) -> dict[str, int]:
    """Append every row of ``batches`` (Arrow record batches) to the store; counts per
    ``topic-partition``. The store is opened only if there is a row to write."""
    counts: dict[str, int] = {}
    rows = (batch for batch in batches if batch.num_rows)
    first = next(rows, None)
    if first is None:
        return counts
    # One partitioner per task, started at random: see `Partitioner`.
    partitioner = Partitioner(start=random.randrange(1 << 31))
    with _open_writable(options) as store:
        for batch in itertools.chain([first], rows):
            _append_batch(store, partitioner, options, batch, counts)
    return counts


def _open_writable(options: WriteOptions) -> Store:
    try:
        return Store(options.path, lock_timeout=options.lock_timeout)
    except LogfsError as e:
        raise LogfsError(
            f"cannot write to {options.path}: {e}. logfs allows one writer process per data "
            "directory (like one Kafka broker per log dir): if `logfs mount` is serving it, "
            "write through the mount or unmount it first; otherwise raise lockTimeout"
        ) from e


def _append_batch(
    store: Store, partitioner: Partitioner, options: WriteOptions, batch, counts: dict[str, int]
) -> None:
    values = _as_bytes(_column(batch, "value"))
    keys = _column(batch, "key")
    keys = _as_bytes(keys) if keys is not None else None
    headers = _column(batch, "headers")
    if headers is not None:
        headers = [tuple((h["key"], h["value"]) for h in hs or ()) for hs in headers]
    topics = [options.topic] * len(values) if options.topic else _column(batch, "topic")
    partitions = _column(batch, "partition")
    chosen: list[int | None] = [None] * len(values)  # the partition of every row
    unassigned: dict[str, list[int]] = {}  # rows without a partition, by topic
    known = store.topics()
    for i, topic in enumerate(topics):
        if topic is None:
            raise LogfsError(f"row {i} has a null topic and no topic option is set")
        if topic not in known:
            store.create_topic(topic, partitions=1)
            known = store.topics()
        p = partitions[i] if partitions is not None else None
        if p is None:
            unassigned.setdefault(topic, []).append(i)
        elif not 0 <= p < known[topic]:
            raise LogfsError(f"row {i}: partition {p} of topic {topic!r} does not exist")
        chosen[i] = p
    # Each topic's share of the batch is one append to the partitioner: keyed rows by key,
    # the unkeyed ones together on the topic's sticky partition.
    for topic, rows in unassigned.items():
        row_keys = [None] * len(rows) if keys is None else [keys[i] for i in rows]
        for p, picked in partitioner.split(row_keys, known[topic]).items():
            for j in picked:
                chosen[rows[j]] = p
    groups: dict[tuple[str, int], list[int]] = {}
    for i, topic in enumerate(topics):
        groups.setdefault((topic, chosen[i]), []).append(i)
    for (topic, p), rows in groups.items():
        whole = len(rows) == len(values)
        log = store.log(topic, p)
        log.append(
            values if whole else [values[i] for i in rows],
            keys=None if keys is None else keys if whole else [keys[i] for i in rows],
            headers=None if headers is None else headers if whole else [headers[i] for i in rows],
        )
        name = f"{topic}-{p}"
        counts[name] = counts.get(name, 0) + len(rows)


class LogfsWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> AppendedMessage:
        return AppendedMessage(append_batches(self.options, iterator))


class LogfsStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator) -> AppendedMessage:
        return AppendedMessage(append_batches(self.options, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        pass  # every task flushed and checkpointed when it closed its store

    def abort(self, messages: list, batchId: int) -> None:
        pass  # appends are not transactional: at-least-once delivery, as with Kafka
