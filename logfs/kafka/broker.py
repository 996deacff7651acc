"""The broker: one node (id 0) that leads every partition of the store, and
the table from API key to the module that answers it.

Every handler runs on the event loop, where the store is touched (as the
mount's handlers do), so a record produced here is in the mount at once and
the other way round. A handler returns the response (or a `Reply` carrying
file regions), or None for a produce with acks=0, which Kafka never answers.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ..core.log import Log, Owner, Store
from ..groups import Coordinator, TransactionCoordinator
from . import (
    acls,
    admin,
    configs,
    consumer_group_api,
    fetch,
    group_api,
    log_admin,
    metadata,
    offsets,
    produce,
    producers,
    protocol,
    transactions,
)
from .access import Client, may_cluster
from .broker_configs import BrokerConfigs
from .protocol import BadRequest, Reply, Request

logger = logging.getLogger(__name__)

AUTO_CREATE_PER_REQUEST = 10  # topics one Metadata request may create


class Metrics(Protocol):
    """What the listener tells the daemon's metrics (logfs/metrics's `Metrics`), which
    the daemon hands it: the listener never imports them."""

    def request(self, name: str, milliseconds: float) -> None:
        """A request of Kafka's type ``name`` answered in ``milliseconds``."""

    def produced(self, topic: str, records: int, size: int) -> None:
        """``records`` records of ``size`` bytes appended to ``topic``."""

    def fetched(self, topic: str, size: int) -> None:
        """``size`` bytes of ``topic``'s records sent to a consumer."""

    def refused(self, face: str, reason: str) -> None:
        """A request or connection refused, for ``reason``."""


HANDLERS = {
    protocol.API_VERSIONS: metadata.api_versions,
    protocol.METADATA: metadata.metadata,
    protocol.PRODUCE: produce.produce,
    protocol.FETCH: fetch.fetch,
    protocol.LIST_OFFSETS: offsets.list_offsets,
    protocol.CREATE_TOPICS: admin.create_topics,
    protocol.DELETE_TOPICS: admin.delete_topics,
    protocol.CREATE_PARTITIONS: admin.create_partitions,
    protocol.DESCRIBE_CONFIGS: configs.describe_configs,
    protocol.ALTER_CONFIGS: configs.alter_configs,
    protocol.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
    protocol.INIT_PRODUCER_ID: producers.init_producer_id,
    protocol.DESCRIBE_CLUSTER: metadata.describe_cluster,
    **group_api.HANDLERS,
    **consumer_group_api.HANDLERS,
    **log_admin.HANDLERS,
    **transactions.HANDLERS,
    **acls.HANDLERS,
}


class Broker:
    """What the handlers share: the store and the broker's settings.

    Args:
        store: the data directory's store (the mount's own, when beside a mount).
        groups: the group coordinator (the daemon's one, which the mount's
            ``groups/`` files share); its session sweep is the daemon's to run.
        transactions: the transaction coordinator (the daemon's; its sweep too);
            default: one over ``store`` and ``groups``.
        partitions: partitions of a topic created without a count (auto-created).
        auto_create: create a topic a Metadata request names (Kafka's
            ``auto.create.topics.enable``).
        auto_create_per_request: at most so many topics created by one Metadata
            request (each makes files: a request naming thousands must not hold
            the event loop); the client asks again for the rest.
        ready: set once the store's partitions are recovered; requests wait for it.
        topic_deleted: called with a topic's name after DeleteTopics removed it
            (the mount forgets the topic's inodes, as after ``rmdir``).
        users: SASL/PLAIN credentials (sasl.py); None serves clients unauthenticated.
        access: what the mount's root shows (DATA's owner, group and mode, after
            ``uid=``, ``gid=``, ``umask=``): with it every request is decided by
            the owners and modes the mount shows (access.py); None lets every
            client do everything (the embedding API).
        acks_all_fsync: answer an acks=-1 Produce once the partitions it appended
            to are fsynced (``kafka.acks.all.fsync``), not once appended.
        configs: the broker's own settings (broker_configs.py); without it, the
            topics' defaults alone, alterable.
        sync: ``sync(log, upto)`` makes a log durable at least up to offset
            ``upto``, the fsyncs in a worker thread: the flusher's
            `Flusher.flush_log`, which serializes them with its own flushes.
            Without it, `flush_log`.
        metrics: the daemon's metrics (``-o metrics=``), told of every request, or None.
    """

    def __init__(
        self,
        store: Store,
        *,
        groups: Coordinator,
        transactions: TransactionCoordinator | None = None,
        partitions: int = 1,
        auto_create: bool = True,
        ready: trio.Event | None = None,
        topic_deleted: Callable[[str], None] | None = None,
        users: dict[str, str] | None = None,
        access: Owner | None = None,
        acks_all_fsync: bool = False,
        sync: Callable[[Log, int], Awaitable[None]] | None = None,
        configs: BrokerConfigs | None = None,
        metrics: Metrics | None = None,
        auto_create_per_request: int = AUTO_CREATE_PER_REQUEST,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.partitions = partitions
        self.auto_create = auto_create and not store.read_only
        self.auto_create_per_request = auto_create_per_request
        self.ready = ready
        self.topic_deleted = topic_deleted
        self.users = users
        self.access = access
        self.acks_all_fsync = acks_all_fsync
        self.sync = sync or self.flush_log
        self.configs = configs or BrokerConfigs({}, store.defaults, {}, store.set_defaults)
        self._flush_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.groups = groups
        self.transactions = transactions or TransactionCoordinator(store, groups)
        self.appended = trio.Event()  # set (and replaced) by every produce: wakes fetchers

    def notify_appended(self) -> None:
        """Wake the fetchers waiting for records."""
        self.appended.set()
        self.appended = trio.Event()

    async def flush_log(self, log: Log, upto: int | None = None) -> None:
        """fsync what ``log`` holds (in a worker thread; the log is touched only
        here, on the loop) and advance its recovery point, unless it is durable
        up to ``upto`` by this call's turn. Flushes of one log are serialized,
        so a flush never completes before an earlier one.

        Raises:
            OSError: the fsync failed (the partition is offline now).
            LogfsError: the partition is offline.
        """
        async with self._flush_locks.setdefault(log, trio.Lock()):
            if upto is not None and log.recovery_point >= upto:
                return
            ticket = log.prepare_flush()
            await trio.to_thread.run_sync(ticket.sync)
            log.complete_flush(ticket)

    def disconnected(self, connection: int) -> None:
        """A client's connection closed: group members that joined over it and
        never synced leave now (their metadata is let go)."""
        self.groups.disconnected(connection)

    def allows(self, client: Client, want) -> bool:
        """Whether ``client`` may ``want`` (access.py's READ or OWNER) on the
        broker itself."""
        return may_cluster(self, client, want)

    async def handle(self, request: Request, advertised: Client) -> Reply | None:
        """The reply to ``request``; None for one Kafka does not answer.

        Raises:
            BadRequest: an API or version this broker does not advertise (but
                ApiVersions): Kafka's broker closes the connection.
        """
        if request.body is None:
            if request.api_key == protocol.API_VERSIONS:
                return Reply(metadata.api_versions_unsupported())
            raise BadRequest(f"API {request.api_key} v{request.version} is not served")
        if self.ready is not None and not self.ready.is_set():
            await self.ready.wait()  # (once set, waiting would still yield to the loop)
        result: Any = HANDLERS[request.api_key](self, request, advertised)
        if inspect.isawaitable(result):
            result = await result
        if result is None or isinstance(result, Reply):
            return result
        return Reply(result)
