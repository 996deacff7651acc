"""The daemon's Kafka listener, built from the ``kafka=`` and ``kafka.*``
options: beside a mount (``-o kafka=[HOST:]PORT``) or alone, without FUSE
(``logfs serve DATA --listen [HOST:]PORT``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from ..core.access import data_owner
from ..core.errors import LogfsError
from ..core.log import Log, Store
from ..groups import Coordinator, TransactionCoordinator
from ..kafka import (
    AUTO_CREATE_PER_REQUEST,
    LISTENER_BUDGETS,
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    REQUEST_TIMEOUT,
    Broker,
    Listener,
    check_exposure,
    parse_listen,
    read_credentials,
    server_context,
)
from ..metrics import Metrics
from .broker_settings import broker_configs
from .cleaner_task import Cleaner
from .options import MountOptions


def kafka_listener(
    store: Store,
    groups: Coordinator,
    transactions: TransactionCoordinator,
    options: MountOptions,
    ready: trio.Event | None = None,
    topic_deleted: Callable[[str], None] | None = None,
    sync: Callable[[Log, int], Awaitable[None]] | None = None,
    cleaner: Cleaner | None = None,
    metrics: Metrics | None = None,
) -> Listener | None:
    """The bound listener ``options`` ask for, or None. Binding now makes a taken
    port fail the mount before it is made. ``groups`` and ``transactions`` (the
    daemon's coordinators), ``ready``, ``topic_deleted`` and ``sync`` (the flusher's
    `Flusher.flush_log`): see `Broker`; ``cleaner``: the log cleaner, whose
    throttle and back-off are the broker's dynamic settings (broker_settings.py);
    ``metrics``: the daemon's (``-o metrics=``), or None.

    Raises:
        LogfsError: the address is not [HOST:]PORT or cannot be bound.
    """
    if options.kafka is None:
        return None
    try:
        host, port = parse_listen(options.kafka)
        settings = options.kafka_settings
        users = None
        if "kafka.sasl.users" in settings:
            users = read_credentials(settings["kafka.sasl.users"])
        check_exposure(host, users, settings.get("kafka.allow.anonymous", False))
        # every client is a local user, deciding by the owners and modes the mount shows
        access = data_owner(store.path, options.owner)
        broker = Broker(
            store,
            groups=groups,
            transactions=transactions,
            partitions=options.partitions,
            auto_create=settings.get("kafka.auto.create.topics", True),
            ready=ready,
            topic_deleted=topic_deleted,
            users=users,
            access=access,
            acks_all_fsync=settings.get("kafka.acks.all.fsync", False),
            sync=sync,
            configs=broker_configs(store, options, f"{host}:{port}", cleaner),
            metrics=metrics,
            auto_create_per_request=settings.get(
                "kafka.auto.create.topics.per.request", AUTO_CREATE_PER_REQUEST
            ),
        )
        listener = Listener(
            broker,
            host,
            port,
            max_request_bytes=settings.get("kafka.max.request.bytes", MAX_REQUEST_BYTES),
            request_timeout=settings.get("kafka.request.timeout.ms", REQUEST_TIMEOUT * 1000) / 1000,
            max_connections=settings.get("kafka.max.connections", MAX_CONNECTIONS),
            ssl_context=_ssl_context(settings),
            **_budgets(settings),
        )
        listener.bind()
    except (ValueError, OSError) as e:
        raise LogfsError(f"kafka={options.kafka}: {getattr(e, 'strerror', None) or e}") from None
    return listener


def _budgets(settings) -> dict:
    """The listener's budgets the options give (`LISTENER_BUDGETS`: option ->
    argument, its unit), the rest left at their defaults."""
    given = {}
    for option, (argument, unit, _) in LISTENER_BUDGETS.items():
        if option in settings:
            given[argument] = settings[option] * unit
    return given


def _ssl_context(settings):
    """The TLS context the ``kafka.ssl.*`` options ask for, or None (plaintext)."""
    if "kafka.ssl.certfile" not in settings:
        if "kafka.ssl.keyfile" in settings:
            raise LogfsError("kafka.ssl.keyfile needs kafka.ssl.certfile (the certificate chain)")
        return None
    return server_context(settings["kafka.ssl.certfile"], settings.get("kafka.ssl.keyfile"))


def address_of(listener: Listener | None) -> str | None:
    """``HOST:PORT`` as the mount record keeps it."""
    if listener is None or listener.address is None:
        return None
    host, port = listener.address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
