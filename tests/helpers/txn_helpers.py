"""Batches of idempotent and transactional producers, built by an independent
encoder (kafka-python's), and what a read_committed reader should see."""

from __future__ import annotations

import datetime
import sys
import time

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka_helpers import call
from kio.index import load_request_schema

PRODUCE = 0


def producer_batch(
    values, producer_id: int, epoch: int, sequence: int, *, transactional=False, keys=None,
    timestamp=None,
) -> bytes:  # fmt: skip
    """A RecordBatch v2 as kafka-python's producer builds it."""
    builder = DefaultRecordBatchBuilder(2, 0, transactional, producer_id, epoch, sequence, 1 << 20)
    stamp = int(time.time() * 1000) if timestamp is None else timestamp
    for i, value in enumerate(values):
        key = None if keys is None else keys[i]
        builder.append(i, timestamp=stamp, key=key, value=value, headers=[])
    return bytes(builder.build())


def decoded(data: bytes) -> list[tuple[DefaultRecordBatch, list]]:
    """Every batch of a ``.log`` file's bytes, read by kafka-python's record decoder
    (its CRC checked), with its records."""
    out, pos = [], 0
    while pos < len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        batch = DefaultRecordBatch(data[pos : pos + size])
        assert batch.validate_crc()
        out.append((batch, list(batch)))
        pos += size
    return out


def append_txn(log, values, producer_id: int, epoch: int, sequence: int, keys=None) -> int:
    """Append a transactional batch as the listener does (its checks passed)."""
    batch = producer_batch(values, producer_id, epoch, sequence, transactional=True, keys=keys)
    return log.append_batches([batch], transactional=True)


def produce(address, topic: str, partitions: dict[int, bytes]) -> dict[int, tuple]:
    """One Produce (v9, acks=-1): per partition, its error code and base offset."""
    t = load_request_schema(PRODUCE, 9)
    m = sys.modules[t.__module__]
    body = t(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            m.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    m.PartitionProduceData(index=p, records=r) for p, r in partitions.items()
                ),
            ),
        ),
    )
    [answer] = call(address, PRODUCE, 9, body).responses
    return {p.index: (p.error_code, p.base_offset) for p in answer.partition_responses}


LIST_OFFSETS = 2


def end_offsets(address, topic: str, partitions: int, isolation: int) -> list[int]:
    """Each partition's end as ListOffsets (v7, latest) answers it: the log end
    offset at isolation 0, the last stable offset at isolation 1."""
    t = load_request_schema(LIST_OFFSETS, 7)
    m = sys.modules[t.__module__]
    body = t(
        replica_id=-1, isolation_level=isolation,
        topics=(m.ListOffsetsTopic(name=topic, partitions=tuple(
            m.ListOffsetsPartition(partition_index=p, timestamp=-1, current_leader_epoch=-1)
            for p in range(partitions)
        )),),
    )  # fmt: skip
    answer = call(address, LIST_OFFSETS, 7, body).topics[0].partitions
    return [p.offset for p in sorted(answer, key=lambda p: p.partition_index)]


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, list]:
    """Every record of ``topic`` a confluent-kafka (librdkafka) consumer of
    ``isolation`` reads from the start, per partition: (offset, key, value)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
        "isolation.level": isolation, "enable.partition.eof": True,
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    ends: set[int] = set()
    deadline = time.monotonic() + 60
    while len(ends) < partitions:
        assert time.monotonic() < deadline, f"no end of {topic} in 60 s: {got}"
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            assert message.error().code() == message.error()._PARTITION_EOF, message.error()
            ends.add(message.partition())
            continue
        ends.discard(message.partition())
        got[message.partition()].append((message.offset(), message.key(), message.value()))
    consumer.close()
    return got
