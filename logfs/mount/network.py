"""The daemon's Kafka listener: started beside a mount (``-o kafka=[HOST:]PORT``)
or alone, without FUSE (``logfs serve DATA --listen [HOST:]PORT``).

Alone, the daemon is a mount without the file system: it holds DATA's lock,
recovers the partitions, runs the flusher and the log cleaner, writes the
mount record (with no mount point, and the listener's address) and serves
until SIGINT/SIGTERM; then it flushes, checkpoints and releases the lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable

import trio

from ..core.client import mountinfo
from ..core.errors import LogfsError
from ..core.log import Log, Store
from ..groups import Coordinator
from ..kafka import (
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    REQUEST_TIMEOUT,
    Access,
    Broker,
    Listener,
    check_exposure,
    parse_listen,
    read_credentials,
    server_context,
)
from .cleaning import Cleaner
from .flusher import Flusher
from .options import MountOptions, parse_options

logger = logging.getLogger("logfs")


def kafka_listener(
    store: Store,
    groups: Coordinator,
    options: MountOptions,
    ready: trio.Event | None = None,
    topic_deleted: Callable[[str], None] | None = None,
    sync: Callable[[Log, int], Awaitable[None]] | None = None,
) -> Listener | None:
    """The bound listener ``options`` ask for, or None. Binding now makes a taken
    port fail the mount before it is made. ``ready``, ``topic_deleted`` and
    ``sync`` (the flusher's `Flusher.flush_log`): see `Broker`.

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
        access = None
        if users is not None:  # principals get the owner and modes the mount shows
            data = os.stat(store.path)
            owner = options.owner
            access = Access(
                data.st_uid if owner.uid is None else owner.uid,
                data.st_gid if owner.gid is None else owner.gid,
                stat.S_IMODE(data.st_mode) if owner.umask is None else 0o777 & ~owner.umask,
            )
        broker = Broker(
            store,
            groups=groups,
            partitions=options.partitions,
            auto_create=settings.get("kafka.auto.create.topics", True),
            ready=ready,
            topic_deleted=topic_deleted,
            users=users,
            access=access,
            acks_all_fsync=settings.get("kafka.acks.all.fsync", False),
            sync=sync,
        )
        listener = Listener(
            broker,
            host,
            port,
            max_request_bytes=settings.get("kafka.max.request.bytes", MAX_REQUEST_BYTES),
            request_timeout=settings.get("kafka.request.timeout.ms", REQUEST_TIMEOUT * 1000) / 1000,
            max_connections=settings.get("kafka.max.connections", MAX_CONNECTIONS),
            ssl_context=_ssl_context(settings),
        )
        listener.bind()
    except (ValueError, OSError) as e:
        raise LogfsError(f"kafka={options.kafka}: {getattr(e, 'strerror', None) or e}") from None
    return listener


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


def serve(data: str, listen: str, options: dict[str, str | None]) -> int:
    """``logfs serve``: 0 after a clean shutdown, else 1 with a one-line reason."""
    logging.basicConfig(level=logging.INFO, format="logfs: %(levelname)s: %(message)s")
    try:
        opts = parse_options({**options, "kafka": listen})
        if opts.read_only:
            store = Store(data, defaults=opts.defaults, read_only=True)
        else:
            store = Store(data, defaults=opts.defaults)
    except (LogfsError, OSError) as e:
        print(f"logfs serve: {e}", file=sys.stderr)
        return 1
    with contextlib.ExitStack() as teardown:  # runs bottom-up, each step even if one fails
        teardown.callback(store.close)
        if not opts.read_only:
            teardown.callback(store.checkpoint)
            teardown.callback(store.flush)
        flusher = None if opts.read_only else Flusher(store, **opts.tasks["flusher"])
        try:
            sync = None if flusher is None else flusher.flush_log
            listener = kafka_listener(store, Coordinator(store), opts, sync=sync)
        except LogfsError as e:
            print(f"logfs serve: {e}", file=sys.stderr)
            return 1
        if not opts.read_only:
            mountinfo.write_record(
                data, "", partitions=opts.partitions, defaults=opts.defaults,
                kafka=address_of(listener),
            )  # fmt: skip
            teardown.callback(_remove_record, data)
        print(f"serving {data} on {address_of(listener)}", flush=True)
        trio.run(_run, store, opts, listener, flusher)
    return 0


def _remove_record(data: str) -> None:
    with contextlib.suppress(OSError):
        mountinfo.remove_record(data)


async def _run(
    store: Store, options: MountOptions, listener: Listener, flusher: Flusher | None
) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            if flusher is not None:
                await nursery.start(flusher.run)
                await nursery.start(Cleaner(store, **options.tasks["cleaner"]).run)
            await nursery.start(listener.run)
            await nursery.start(listener.broker.groups.run)  # expires members' sessions
            async for signum in signals:
                logger.info("%s: stopping", signal.Signals(signum).name)
                break
            nursery.cancel_scope.cancel()
