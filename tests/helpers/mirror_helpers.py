"""A mirror's cluster read back as its readers read it: confluent-kafka with
``read_committed``."""

from __future__ import annotations

import subprocess
import time

USER, PASSWORD = "root", "a long mirror secret"  # root: every topic's writer


def committed_values(cluster, topic: str, partition: int, timeout: float = 30) -> list[bytes]:
    """Every value of ``topic-partition`` on the cluster, as a ``read_committed``
    confluent-kafka consumer reads it from the start to the last stable offset."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.served.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(cluster.pki.ca),
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        try:
            _, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        except KafkaException as e:
            if e.args[0].code() == KafkaError._UNKNOWN_PARTITION:
                return []  # not created there yet
            raise
        consumer.assign([TopicPartition(topic, partition, 0)])
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:  # _PARTITION_EOF: up to the LSO
                    return out
                raise AssertionError(f"{topic}-{partition}: {message.error()}")
            out.append(message.value())
        raise AssertionError(f"{topic}-{partition}: not read to its end ({high}) in {timeout} s")
    finally:
        consumer.close()


def kcat_values(cluster, topic: str, partition: int) -> list[bytes]:
    """The same, read by kcat (librdkafka) with ``isolation.level=read_committed``."""
    done = subprocess.run(
        ["kcat", "-b", cluster.served.bootstrap, "-X", "security.protocol=SASL_SSL",
         "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", f"sasl.username={USER}",
         "-X", f"sasl.password={PASSWORD}", "-X", f"ssl.ca.location={cluster.pki.ca}",
         "-X", "isolation.level=read_committed", "-C", "-t", topic, "-p", str(partition),
         "-o", "beginning", "-e", "-q", "-f", "%s\\n"],
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def read_committed(config: dict, topic: str, partition: int) -> list[bytes]:
    """Every value a ``read_committed`` confluent-kafka consumer (``config``: its
    connection) reads from the start to the partition's end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {**config, "group.id": "reader", "enable.auto.commit": False,
         "isolation.level": "read_committed", "enable.partition.eof": True},
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        out, deadline = [], time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return out
            out.append(message.value())
        raise AssertionError(f"{topic}-{partition} not read to its end")
    finally:
        consumer.close()
