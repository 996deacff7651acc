"""Kafka's own wire protocol over the store: a trio TCP listener that Kafka's
clients (kcat, kafka-python, librdkafka, KafkaJS) produce to and fetch from,
beside a mount (``-o kafka=[HOST:]PORT``) or alone (``logfs serve``).

Imports what core's rooms and the groups room export, never another face; the
daemon builds it with the daemon's one group coordinator and starts it.
Messages are kio's, generated from Kafka's JSON schemas (protocol.py).
"""

from .broker import AUTO_CREATE_PER_REQUEST, Broker
from .broker_configs import BrokerConfigs
from .budgets import LISTENER_BUDGETS
from .exposure import check_exposure, parse_listen
from .sasl import read_credentials
from .server import MAX_CONNECTIONS, MAX_REQUEST_BYTES, REQUEST_TIMEOUT, Listener
from .tls import server_context

__all__ = [
    "AUTO_CREATE_PER_REQUEST",
    "LISTENER_BUDGETS",
    "MAX_CONNECTIONS",
    "MAX_REQUEST_BYTES",
    "REQUEST_TIMEOUT",
    "Broker",
    "BrokerConfigs",
    "Listener",
    "check_exposure",
    "parse_listen",
    "read_credentials",
    "server_context",
]
