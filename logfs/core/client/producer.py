"""A Kafka-style producer for a data directory, mounted or not.

Records are batched and encoded in the producer's own process, as a Kafka
producer does: each partition's records are cut into RecordBatch v2 batches of
at most ``batch_size`` bytes (Kafka's ``batch.size``), compressed with the
topic's ``compression.type`` (for ``producer``, the producer's own
``compression_type``), with relative offsets from 0. `Producer.flush` hands
each partition's batches to the one writer of DATA, which assigns the offsets
(delivery.py):

- **a live mount** of DATA (found by its mount record, see mountinfo.py): the
  batches are written to ``MNT/<topic>/<p>/append.batches`` — several whole
  batches per ``write()``, at most FUSE's 1 MiB each — the receipts are read
  back from the same descriptor and the file is fsynced;
- **else the store**: DATA is opened for writing (taking its lock, waiting up
  to ``lock_timeout`` seconds), `Log.append_batches` appends, and closing the
  store fsyncs and checkpoints. The lock is not held between flushes, so a
  mount can start meanwhile; the next flush then goes through it;
- **a Kafka listener** (``Producer("kafka://HOST:PORT")``): the batches go in
  Produce requests with acks=-1 (wire.py).

Either way `flush` returns once the records are durable on disk (Kafka's
``acks=all``), with the same receipts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..config import TopicConfig, now_ms
from ..errors import InvalidConfigError, UnknownTopicError
from ..format import batching, compression
from ..format.batching import record_bound
from ..format.record import CREATE_TIME
from ..log.partitioner import Partitioner, partition_for_key
from ..log.store import Store
from ..log.topics import validate_topic_name
from . import accumulator, mountinfo, wire
from .accumulator import PartitionBatches, ProducerRecord, Receipt, TopicPartition, check_fits
from .delivery import (
    MountGone,
    ProducerError,
    append_through_mount,
    append_to_store,
    create_topic,
    open_writer,
    read_topic,
)

BATCH_SIZE = 16384  # Kafka's batch.size
BUFFER_MEMORY = 32 << 20  # Kafka's buffer.memory: pending bytes that make send() flush
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # Kafka's producer compression.type


class _Topic(NamedTuple):
    partitions: int
    config: TopicConfig


class Producer:
    """Sends records to the topics of the data directory ``data``.

    Args:
        data: the data directory (created, without a mount, if missing), or
            ``kafka://HOST:PORT``: a logfs Kafka listener (or Kafka broker) that
            takes the batches over the network (wire.py; docs/kafka.md).
        batch_size: Kafka's ``batch.size``: the most bytes of records in a batch
            (a larger record gets a batch of its own; 0: one record per batch).
        compression_type: Kafka's producer ``compression.type`` (none, gzip,
            snappy, lz4, zstd), used for topics whose ``compression.type`` is
            ``producer``; other topics get their own codec.
        buffer_memory: pending bytes beyond which `send` flushes by itself.
        lock_timeout: seconds a flush without a mount waits for DATA's lock.
        mount_timeout: seconds to wait for a mount's answer before taking it for hung
            (over the network: for a Kafka listener's answer, and to connect).
        security_protocol, sasl_mechanism, sasl_plain_username, sasl_plain_password,
            ssl_cafile, ssl_check_hostname, client_id: over the network, kafka-python's
            settings: TLS (SSL, SASL_SSL), SASL (PLAIN, SCRAM-SHA-256/512) credentials,
            the CA file, the host name check, the requests' client id (security.py).

    Not thread-safe: use one producer per thread.
    """

    def __init__(
        self,
        data: str | os.PathLike,
        *,
        batch_size: int = BATCH_SIZE,
        compression_type: str | None = None,
        buffer_memory: int = BUFFER_MEMORY,
        lock_timeout: float = 30.0,
        mount_timeout: float = mountinfo.XATTR_TIMEOUT,
        security_protocol: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        ssl_cafile: str | None = None,
        ssl_check_hostname: bool = True,
        client_id: str = "logfs-producer",
    ) -> None:
        if compression_type is not None and compression_type not in CODECS:
            raise InvalidConfigError(
                f"compression_type {compression_type!r} is not one of {', '.join(CODECS)}"
            )
        if batch_size < 0:
            raise InvalidConfigError(f"batch_size {batch_size} is negative")
        self.data = os.fspath(data)
        self._wire = None
        if wire.is_address(self.data):
            security = wire.Security.of(
                security_protocol, sasl_mechanism, sasl_plain_username, sasl_plain_password,
                ssl_cafile, ssl_check_hostname,
            )  # fmt: skip
            self._wire = wire.Wire(self.data, mount_timeout, security=security, client_id=client_id)
        self.batch_size = batch_size
        self.compression_type = compression_type or "none"
        self.buffer_memory = buffer_memory
        self.lock_timeout = lock_timeout
        self.mount_timeout = mount_timeout
        # Each producer starts its round robin at a random partition, as Kafka's does.
        self._partitioner = Partitioner(random.randrange(1 << 16))
        self._topics: dict[str, _Topic] = {}
        self._sticky: dict[str, int] = {}
        self._pending: dict[TopicPartition, PartitionBatches] = {}
        self._pending_bytes = 0
        self._receipts: list[Receipt] = []
        self._closed = False

    # ------------------------------------------------------------ sending

    def send(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> int:
        """Queue one record; returns its partition.

        ``value`` None is a tombstone. The partition is ``partition`` if given,
        else Kafka's default partitioner's: ``murmur2(key) % partitions`` for a
        key, else the topic's sticky partition, which moves on (round robin)
        each time its batch fills up and at each flush. ``timestamp`` is epoch
        milliseconds, now if None. A topic that does not exist is created
        (Kafka's ``auto.create.topics.enable``).

        Raises:
            RecordTooLargeError: the record alone, encoded as the topic's batch,
                exceeds its ``max.message.bytes``; nothing is queued.
            InvalidTopicError, UnknownTopicError: a bad name; ``partition`` out of range.
            ProducerError: the producer is closed.
            LogfsError: what `flush` raises, when more than ``buffer_memory``
                bytes were pending and this send flushed them.
        """
        if self._closed:
            raise ProducerError("the producer is closed")
        timestamp = now_ms() if timestamp is None else int(timestamp)
        record = ProducerRecord.checked(value, key, headers, timestamp)
        meta = self._topic(topic)
        bound = record_bound(record.value, record.key, record.headers)
        codec = self._codec(meta.config)
        check_fits(topic, meta.config, codec, bound, record)
        if partition is not None:
            self._check_partition(topic, partition, meta)
        elif record.key is not None:
            partition = partition_for_key(record.key, meta.partitions)
        else:
            partition = self._sticky.get(topic)
            pending = self._pending.get(TopicPartition(topic, partition))
            if partition is None or (pending is not None and pending.full(bound)):
                partition = self._partitioner.sticky(meta.partitions)
            self._sticky[topic] = partition
        pending = self._batches(topic, partition, meta.config)
        self._pending_bytes += pending.add(record, bound, codec, meta.config.max_message_bytes)
        if self._pending_bytes > self.buffer_memory:
            self._deliver()
        return partition

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> dict[int, int]:
        """Queue many records at once, encoded in bulk (column-wise when they
        have no keys, headers or compression); returns records per partition.

        Placement as for `send`, with all the unkeyed records of the call on one
        sticky partition; one ``timestamp`` (now if None) for all. Values, keys
        and header values are bytes or None.

        Raises:
            RecordTooLargeError: a record alone exceeds max.message.bytes; nothing is queued.
            LogfsError: what `send` raises.
        """
        if self._closed:
            raise ProducerError("the producer is closed")
        if not values:
            return {}
        meta = self._topic(topic)
        if partition is not None:
            self._check_partition(topic, partition, meta)
            groups = {partition: range(len(values))}
        else:
            groups = self._partitioner.split(keys or [None] * len(values), meta.partitions)
        codec = self._codec(meta.config)
        config = dataclasses.replace(meta.config, compression_type=compression.NAMES[codec])
        timestamp = now_ms() if timestamp is None else int(timestamp)
        encoded = {}  # all encoded before any is queued: a record too large queues nothing
        for p, rows in groups.items():
            encoded[p] = batching.encode_values(
                config,
                0,
                accumulator.pick(values, rows),
                accumulator.pick(keys, rows),
                accumulator.pick(headers, rows),
                timestamp,
                CREATE_TIME,  # a LogAppendTime topic's writer stamps the batches
                max(self.batch_size, 1),
            )
        counts = {}
        for p, batches in encoded.items():
            pending = self._batches(topic, p, meta.config)
            # Close the open batch first: the partition's records keep their order.
            self._pending_bytes += pending.close(codec, meta.config.max_message_bytes)
            self._pending_bytes += pending.extend(batches)
            counts[p] = batches[-1][1].last_offset + 1
        if self._pending_bytes > self.buffer_memory:
            self._deliver()
        return counts

    def partitions_for(self, topic: str) -> int:
        """The number of partitions of ``topic``, created if it does not exist."""
        return self._topic(topic).partitions

    def _check_partition(self, topic: str, partition: int, meta: _Topic) -> None:
        if not 0 <= partition < meta.partitions:
            raise UnknownTopicError(
                f"partition {partition} of {topic!r} is not in [0, {meta.partitions})"
            )

    def _codec(self, config: TopicConfig) -> int:
        name = config.compression_type
        return compression.BY_NAME[self.compression_type if name == "producer" else name]

    def _batches(self, topic: str, partition: int, config: TopicConfig) -> PartitionBatches:
        key = TopicPartition(topic, partition)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = PartitionBatches(
                self.batch_size, config.max_message_bytes
            )
        return pending

    # ------------------------------------------------------------ topic metadata

    def _topic(self, topic: str) -> _Topic:
        """Partition count and configuration, read once per flush (read-only,
        no lock); the topic is created first if it does not exist."""
        meta = self._topics.get(topic)
        if meta is None and self._wire is not None:
            validate_topic_name(topic)
            meta = self._topics[topic] = _Topic(*self._wire.topic_created(topic))
        if meta is None:
            meta = read_topic(self.data, topic, self.mount_timeout)
            if meta is None:
                validate_topic_name(topic)
                create_topic(self.data, topic, self.lock_timeout, self.mount_timeout)
                meta = read_topic(self.data, topic, self.mount_timeout)
                if meta is None:
                    raise UnknownTopicError(f"topic {topic!r} vanished as it was created")
            meta = self._topics[topic] = _Topic(*meta)
        return meta

    # ------------------------------------------------------------ flushing

    def flush(self) -> list[Receipt]:
        """Deliver every queued record; returns once they are durable.

        Returns:
            One `Receipt` per contiguous run of offsets appended since the last
            flush, in (topic, partition) order: one per partition, unless
            another writer appended between two of this producer's writes.

        Raises:
            LogfsError: the store's error (its lock held past ``lock_timeout``,
                a batch refused) or `ProducerError`. Batches are kept for the
                next flush if nothing could be written; those of the partition
                being written are dropped (refused, or of unknown fate when the
                mount went away mid-write). Receipts of what was appended
                before the error come with the next flush.
        """
        if self._closed:
            raise ProducerError("the producer is closed")
        self._deliver()
        receipts, self._receipts = self._receipts, []
        return receipts

    def close(self) -> None:
        """Flush what is queued and refuse further sends (idempotent). The
        receipts of this last flush are not returned: flush first for them."""
        if not self._closed:
            try:
                self._deliver()
            finally:
                self._closed = True
                if self._wire is not None:
                    self._wire.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _deliver(self) -> None:
        for key, pending in self._pending.items():
            if pending.open:
                meta = self._topics.get(key.topic) or self._topic(key.topic)
                limit = meta.config.max_message_bytes
                self._pending_bytes += pending.close(self._codec(meta.config), limit)
        self._topics.clear()  # re-read metadata after each flush, as Kafka refreshes it
        self._sticky.clear()
        if self._wire is not None:
            for key in sorted(self._pending):
                batches, _ = self._take(key)  # appended, or refused: never sent twice
                for first, count in self._wire.produce(*key, batches):
                    self._done(key, first, count)
            return
        for _ in range(3):  # a mount that goes away is looked for again, then the store
            if not self._pending:
                return
            writer = open_writer(self.data, self.lock_timeout, self.mount_timeout)
            if isinstance(writer, Store):
                with writer:  # closing it fsyncs and checkpoints
                    for key in sorted(self._pending):
                        batches, count = self._take(key)  # appended, or refused as a whole
                        self._done(key, append_to_store(writer, *key, batches), count)
                return
            with contextlib.suppress(MountGone):
                for key in sorted(self._pending):
                    self._through_mount(writer.mountpoint, key)
        raise ProducerError(f"the mount of {self.data} keeps going away")

    def _through_mount(self, mountpoint: str, key: TopicPartition) -> None:
        batches = self._pending[key].batches
        try:
            appended = append_through_mount(
                self.data,
                mountpoint,
                *key,
                batches,
                lambda p, first, last: self._done(
                    TopicPartition(key.topic, p), first, last - first + 1
                ),
                self.mount_timeout,
            )
        except MountGone:
            raise  # nothing written: the batches stay for the next writer
        except BaseException:
            self._take(key)  # refused, or of unknown fate: never sent twice
            raise
        _, count = self._take(key)
        if appended != count:
            raise ProducerError(
                f"{key.topic}-{key.partition}: {appended} of {count} records acknowledged"
            )

    def _take(self, key: TopicPartition) -> tuple[list[bytes], int]:
        """Remove a partition's batches from the pending ones; with their record count."""
        pending = self._pending.pop(key)
        self._pending_bytes -= sum(map(len, pending.batches))
        return pending.batches, sum(pending.counts)

    def _done(self, key: TopicPartition, first: int, count: int) -> None:
        """Record a receipt, merged into the partition's last if contiguous."""
        receipt = Receipt(*key, first, first + count - 1)
        for i in range(len(self._receipts) - 1, -1, -1):
            last = self._receipts[i]
            if (last.topic, last.partition) == key:
                if last.last_offset + 1 == first:
                    self._receipts[i] = last._replace(last_offset=receipt.last_offset)
                    return
                break
        self._receipts.append(receipt)
