"""A consume-transform-produce loop as Kafka's exactly-once applications write it,
with librdkafka (confluent-kafka): a read_committed consumer of ``in`` (its
positions from its group's committed offsets), a transactional producer to
``out``, each batch of records transformed (``T`` before the value, same
partition), sent and committed in one transaction with the consumer's positions
(`send_offsets_to_transaction`).

Usage: ``python txn_ctp.py BOOTSTRAP TRANSACTIONAL_ID GROUP PARTITIONS``

Any error ends the process with exit status 3 (its open transaction is aborted
by the next instance's `init_transactions`, which fences this one); the caller
starts it again. It is meant to be killed (SIGKILL) at any moment.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BATCH = 10
TIMEOUT = 10


def run(bootstrap: str, txn_id: str, group: str, partitions: int) -> None:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })  # fmt: skip
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id,
        "transaction.timeout.ms": 30000, "message.timeout.ms": TIMEOUT * 1000,
    })  # fmt: skip
    producer.init_transactions(TIMEOUT)
    wanted = [TopicPartition("in", p) for p in range(partitions)]
    consumer.assign(consumer.committed(wanted, timeout=TIMEOUT))
    while True:
        records = consumer.consume(num_messages=BATCH, timeout=0.5)
        for record in records:
            if record.error():
                raise KafkaException(record.error())
        if not records:
            continue
        producer.begin_transaction()
        for record in records:
            producer.produce("out", b"T" + record.value(), partition=record.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
        producer.commit_transaction(TIMEOUT)


if __name__ == "__main__":
    bootstrap, txn_id, group, partitions = sys.argv[1:5]
    try:
        run(bootstrap, txn_id, group, int(partitions))
    except KafkaException as e:
        print(f"txn_ctp: {e}", file=sys.stderr)
        sys.exit(3)
