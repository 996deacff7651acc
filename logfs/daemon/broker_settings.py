"""The Kafka listener's broker settings (`BrokerConfigs`, DescribeConfigs of the
broker): what the daemon runs with under Kafka's names, whether each was given
as an option, and the dynamic ones' appliers (the log cleaner's throttle and
back-off; the topics' defaults go through the store)."""

from __future__ import annotations

import os

from ..core.config import parse_int
from ..core.errors import InvalidConfigError
from ..core.log import Store
from ..kafka import LISTENER_BUDGETS, MAX_CONNECTIONS, MAX_REQUEST_BYTES, BrokerConfigs
from .cleaner_task import Cleaner
from .options import MountOptions

KAFKA_MAX_DOUBLE = 1.7976931348623157e308  # Kafka's "no bound" for the cleaner's I/O


def broker_configs(
    store: Store, options: MountOptions, address: str, cleaner: Cleaner | None
) -> BrokerConfigs:
    """The settings of the daemon ``options`` describe, listening on ``address``."""
    given, kafka = options.given, options.kafka_settings
    secure, sasl = "kafka.ssl.certfile" in kafka, "kafka.sasl.users" in kafka
    protocol = ("SASL_" if sasl else "") + ("SSL" if secure else "PLAINTEXT")
    listener = f"{protocol}://{address}"
    fixed = {
        "node.id": (0, False),
        "broker.id": (0, False),
        "process.roles": (("broker", "controller"), False),
        "log.dirs": (os.path.abspath(store.path), True),
        "listeners": ((listener,), True),
        "advertised.listeners": ((listener,), False),
        "num.partitions": (options.partitions, "partitions" in given),
        "default.replication.factor": (1, False),
        "offsets.topic.num.partitions": (1, False),
        "offsets.topic.replication.factor": (1, False),
        "offset.metadata.max.bytes": (4096, False),
        "max.broker.partitions": (options.limits.max_partitions, "max.broker.partitions" in given),
        "sasl.enabled.mechanisms": (
            ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") if sasl else (),
            sasl,
        ),
        "ssl.keystore.type": ("PEM" if secure else "JKS", secure),
        "auto.create.topics.enable": (
            kafka.get("kafka.auto.create.topics", True),
            "kafka.auto.create.topics" in kafka,
        ),
        "socket.request.max.bytes": (
            kafka.get("kafka.max.request.bytes", MAX_REQUEST_BYTES),
            "kafka.max.request.bytes" in kafka,
        ),
        "max.connections": (
            kafka.get("kafka.max.connections", MAX_CONNECTIONS),
            "kafka.max.connections" in kafka,
        ),
    }
    for name, (_, _, default) in LISTENER_BUDGETS.items():
        if not name.startswith("kafka."):  # Kafka's own settings
            fixed[name] = (kafka.get(name, default), name in kafka)
    flusher = options.tasks["flusher"]
    for name, seconds, default in (
        ("log.retention.check.interval.ms", flusher.get("retention_interval"), 300000),
        ("log.flush.offset.checkpoint.interval.ms", flusher.get("checkpoint_interval"), 60000),
    ):
        fixed[name] = (round(seconds * 1000) if seconds else default, name in given)
    for name, text in options.groups.to_options().items():
        value = tuple(text.split(",")) if name == "group.consumer.assignors" else text
        fixed[name] = (int(text) if text.isdigit() else value, name in given)
    appliers = {}
    if cleaner is not None:
        rate = cleaner.throttle.rate
        appliers["log.cleaner.io.max.bytes.per.second"] = (
            float(rate) if rate > 0 else KAFKA_MAX_DOUBLE,
            "log.cleaner.io.max.bytes.per.second" in given,
            lambda text: cleaner.set_io_rate(_rate(text)),
        )
        appliers["log.cleaner.backoff.ms"] = (
            round(cleaner.backoff * 1000),
            "log.cleaner.backoff.ms" in given,
            lambda text: cleaner.set_backoff(parse_int(0)(text) / 1000),
        )
    return BrokerConfigs(fixed, options.defaults, appliers, store.set_defaults, store.path)


def _rate(text: str) -> float:
    """A byte rate, Kafka's largest double meaning no bound (0 here)."""
    try:
        rate = float(text)
    except ValueError:
        raise InvalidConfigError(f"{text!r} is not a number") from None
    if not rate > 0:
        raise InvalidConfigError(f"{text!r}: a rate must be above 0")
    return 0.0 if rate >= KAFKA_MAX_DOUBLE else rate
