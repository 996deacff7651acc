"""A consume-transform-produce loop as Kafka's exactly-once applications write it,
with librdkafka (confluent-kafka): a read_committed consumer of ``in`` (its
positions from its group's committed offsets), a transactional producer to
``out``, each batch of records transformed (``T`` before the value, same
partition), sent and committed in one transaction with the consumer's positions
(`send_offsets_to_transaction`).

Usage: ``python txn_ctp.py BOOTSTRAP TRANSACTIONAL_ID GROUP PARTITIONS [PAUSE]``
(PAUSE: seconds to wait after each transaction, so that a run lasts long enough
to be killed in the middle of it)

Any error ends the process at once with exit status 3 (its open transaction is aborted
by the next instance's `init_transactions`, which fences this one); the caller
starts it again. It is meant to be killed (SIGKILL) at any moment.
"""

from __future__ import annotations

import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BATCH = 10
TIMEOUT = 10
# librdkafka 2.16 "re-bootstraps" (drops every broker handle) once all its brokers
# are down, as they all are while the one daemon restarts; a send_offsets_to_transaction
# under way then waited on a dropped handle past its timeout. Kept on the same
# brokers, it reconnects to the restarted daemon.
STAY = {"metadata.recovery.strategy": "none"}


def run(bootstrap: str, txn_id: str, group: str, partitions: int, pause: float) -> None:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **STAY,
    })  # fmt: skip
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id,
        "transaction.timeout.ms": 30000, "message.timeout.ms": TIMEOUT * 1000, **STAY,
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
        time.sleep(pause)


if __name__ == "__main__":
    bootstrap, txn_id, group, partitions = sys.argv[1:5]
    try:
        run(bootstrap, txn_id, group, int(partitions), float(sys.argv[5] if sys.argv[5:] else 0))
    except KafkaException as e:
        print(f"txn_ctp: {e}", file=sys.stderr, flush=True)
        os._exit(3)  # at once: a clean exit waits on librdkafka's handles for minutes
