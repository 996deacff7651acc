"""One daemon over a data directory, the one place its parts are built and run:
the store, one group coordinator and one transaction coordinator, the flusher
and the log cleaner, the metrics endpoint (``-o metrics=``: the faces feed its
books), and the faces asked for: the FUSE mount (``logfs mount``), the Kafka listener
(``-o kafka=``, or ``logfs serve`` without a mount), or both, sharing all of it.

Each part is built whole and handed what it needs: the coordinator goes to
the mount's ``groups/`` files and to the listener's broker alike, the
flusher's `Flusher.flush_log` to whatever makes a log durable, the mount's
`FuseMount.forget_topic` to the broker (a topic deleted over Kafka), the
recovery's ``ready`` event to both faces (their requests wait for it).

`Daemon.run`, in one nursery: the listener (bound at construction, so a taken
port fails before anything is mounted) and the coordinator's session sweep,
the partitions' recovery in a worker thread (meanwhile the mount's root says
"recovering" in ``user.logfs.health``), then the transaction coordinator (which
completes the transactions a stop left prepared, and aborts those past their
timeout), the watch on segment files (segment_watch.py), the flusher, the log
cleaner, the mount's own background work and the mirror (``-o mirror.to=``, in a
worker thread) or the follower (``-o mirror.from=``, in a worker thread whose every
touch of the store runs on the loop: `Daemon.in_loop`), then the mount record (while
a writable daemon runs, ``DATA/logfs-mount.json`` says where it is mounted, by which
process and on which Kafka address, so that producers on the same machine
hand their batches to it). It runs until SIGINT/SIGTERM or an external
unmount, and tears down in this order: the mount record goes (producers go
to the store and wait for its lock), the open append files' partial lines
become records, every log is flushed, the checkpoints are written, the file
system is unmounted, the store's lock is released.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable

import trio

from ..core.client import mountinfo
from ..core.log import Store
from ..groups import Coordinator, TransactionCoordinator
from ..metrics import MetricsService
from ..mirror import MirrorIn, MirrorOut, RetentionFloors
from ..mount import FuseMount
from .cleaner_task import Cleaner
from .flusher import Flusher
from .listener import address_of, kafka_listener
from .options import MountOptions
from .recovery import RecoveryProgress
from .segment_watch import SegmentWatch

logger = logging.getLogger("logfs")


class Daemon:
    """The daemon of ``data``: a mount on ``mountpoint`` when there is one, a
    Kafka listener when ``options`` ask for one (``kafka=``); ``progress(done,
    total, name)`` is told of the recovery at the start, from its worker thread.

    Raises:
        LogfsError: DATA cannot be opened (its lock is held, a bad setting) or
            the listener cannot be bound.
        OSError: DATA cannot be read or created.
    """

    def __init__(
        self,
        data: str,
        options: MountOptions,
        mountpoint: str | None = None,
        progress: Callable[[int, int, str], None] | None = None,
    ) -> None:
        self.data = data
        self.options = options
        self.recovery = RecoveryProgress(data, progress)
        # Partitions are recovered once the faces answer, in a worker thread (`_recover`).
        self.store = Store(
            data,
            defaults=options.defaults,
            read_only=options.read_only,
            recover=False,
            limits=options.limits,
        )
        self.metrics: MetricsService | None = None
        try:
            self._build(mountpoint)
        except BaseException:
            if self.metrics is not None:
                self.metrics.close()
            self.store.close()
            raise
        self.failed_to_recover = False

    def _build(self, mountpoint: str | None) -> None:
        store, options = self.store, self.options
        writable = not options.read_only
        self.ready = trio.Event()  # the partitions are recovered: the faces' requests go on
        if not writable or not store.has_unopened():
            self.ready.set()
        self.groups = Coordinator(store, settings=options.groups)
        self.transactions = TransactionCoordinator(store, self.groups)
        if options.metrics is not None:  # bound now: a taken port fails before the mount
            self.metrics = MetricsService(options.metrics, store, self.groups, self.ready.is_set)
        books = None if self.metrics is None else self.metrics.metrics
        # The mirror reads DATA read-only, as any reader beside the daemon: appends never
        # wait for it (logfs/mirror/outbound.py); retention waits for it, and for the
        # mirrors run as processes of their own (their status files in DATA).
        self.mirror = None if options.mirror is None else MirrorOut(self.data, options.mirror)
        own = None if self.mirror is None else self.mirror.settings.id
        self.floors = RetentionFloors(self.data, own)
        self.follower = None
        if options.follower is not None:  # its topics are read-only before the faces answer
            self.follower = MirrorIn(self.data, options.follower, self.in_loop)
            self.follower.mark(store)
        self._token: trio.lowlevel.TrioToken | None = None
        self.flusher = (
            Flusher(store, **options.tasks["flusher"], keep_from=self.retention_floor)
            if writable else None
        )  # fmt: skip
        self.cleaner = Cleaner(store, **options.tasks["cleaner"]) if writable else None
        self.segment_watch = SegmentWatch(store) if writable else None
        sync = None if self.flusher is None else self.flusher.flush_log
        self.mount = None
        if mountpoint is not None:
            self.mount = FuseMount(
                store,
                mountpoint,
                groups=self.groups,
                ready=self.ready,
                sync=sync,
                fuse_options=options.fuse,
                partitions=options.partitions,
                owner=options.owner,
                buffered=options.buffered,
                io_uring=options.io_uring,
                io_uring_spin_us=options.io_uring_spin_us,
                metrics=books,
                recovery=self.recovery.state,
            )
        # A topic deleted over Kafka: the mount forgets its inodes, the metrics its series.
        forget = None if self.mount is None else self.mount.forget_topic
        if self.metrics is not None:
            forget = self.topic_deleted
        self.listener = kafka_listener(
            store,
            self.groups,
            self.transactions,
            options,
            self.ready,
            forget,
            sync,
            self.cleaner,
            books,
        )

    def retention_floor(self, topic: str, partition: int) -> int | None:
        """The offset retention keeps in a partition: the lowest position of the
        mirrors that forward it (None: none waits)."""
        floors = [self.floors(topic, partition)]
        if self.mirror is not None:
            floors.append(self.mirror.retention_floor(topic, partition))
        return min((f for f in floors if f is not None), default=None)

    def topic_deleted(self, topic: str) -> None:
        """A topic deleted over Kafka: the mount forgets its inodes, the metrics its series."""
        if self.mount is not None:
            self.mount.forget_topic(topic)
        if self.metrics is not None:
            self.metrics.metrics.forget_topic(topic)

    @property
    def address(self) -> str | None:
        """The listener's ``HOST:PORT``, or None."""
        return address_of(self.listener)

    def run(self, on_ready: Callable[[], None] | None = None) -> int:
        """Serve until SIGINT/SIGTERM or an external unmount, then tear down;
        ``on_ready`` is called once the partitions are recovered and the mount
        record written. 0, or 1 when the partitions could not be recovered."""
        with contextlib.ExitStack() as teardown:  # runs bottom-up, each step even if one fails
            teardown.callback(self.store.close)
            if self.metrics is not None:
                teardown.callback(self.metrics.close)
            if self.mount is not None:
                self.mount.mount()
                teardown.callback(self.mount.unmount)
            if not self.options.read_only:
                teardown.callback(self.store.checkpoint)
                teardown.callback(self.store.flush)
            if self.mount is not None:
                teardown.callback(self.mount.close_files)
            # First: from here on producers go to the store, and wait for its lock.
            teardown.callback(self._remove_record)
            if self.mount is not None:
                logger.info("mounted %s on %s", self.data, self.mount.mountpoint)
            trio.run(self._run, on_ready)
        if self.mount is not None:
            logger.info("unmounted %s", self.mount.mountpoint)
        return 1 if self.failed_to_recover else 0

    def in_loop(self, fn: Callable[[Store], object]) -> object:
        """``fn(store)`` run on the loop, from a worker thread (the follower's): the
        store is the loop's alone (trio.RunFinishedError once the loop has ended)."""
        return trio.from_thread.run_sync(fn, self.store, trio_token=self._token)

    async def _run(self, on_ready: Callable[[], None] | None) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._stop_on_signal, nursery)
            if self.metrics is not None:  # answers while the partitions are recovered
                await nursery.start(self.metrics.run)
            if self.listener is not None:  # requests wait for the recovery (self.ready)
                await nursery.start(self.listener.run)
                await nursery.start(self.groups.run)  # expires members' sessions
            nursery.start_soon(self._recover, nursery, on_ready)
            if self.mount is not None:
                await self.mount.serve()  # returns once stopped, or unmounted from outside
                nursery.cancel_scope.cancel()

    async def _recover(self, nursery: trio.Nursery, on_ready) -> None:
        """Recover the partitions while the faces already answer (requests that
        need the store wait), then start the background tasks. A failure to
        recover stops the daemon."""
        started = time.monotonic()
        try:
            # A reader opens each partition on first use; with nothing to recover the
            # faces already answer (self.ready), so the store is not touched here.
            if not self.ready.is_set():
                await trio.to_thread.run_sync(self.store.recover, self.recovery)
        except Exception as e:  # noqa: BLE001 - logged, then the daemon stops
            logger.error("recovering %s failed: %s", self.store.path, e)
            self.failed_to_recover = True
            self._stop(nursery)
            return
        self.recovery.end()
        self.ready.set()
        if time.monotonic() - started > 1:
            logger.info("recovered %s in %.1f s", self.store.path, time.monotonic() - started)
        if not self.options.read_only:
            await nursery.start(self.transactions.run)
        if self.segment_watch is not None:
            await nursery.start(self.segment_watch.run)
        if self.flusher is not None:
            await nursery.start(self.flusher.run)
        if self.cleaner is not None:
            await nursery.start(self.cleaner.run)
        if self.mount is not None:
            self.mount.start_background(nursery)
        for mirror in filter(None, (self.mirror, self.follower)):
            nursery.start_soon(self._run_mirror, mirror)
            if self.metrics is not None:
                nursery.start_soon(self._mirror_lag_to_metrics, mirror)
        self._write_record()
        if on_ready is not None:
            on_ready()

    async def _run_mirror(self, mirror: MirrorOut | MirrorIn) -> None:
        """A mirror's rounds in a worker thread (its network calls block), stopped with
        the daemon: the thread ends at its next round or network answer."""
        try:
            await trio.to_thread.run_sync(mirror.run, abandon_on_cancel=True)
        finally:
            mirror.stop()

    async def _mirror_lag_to_metrics(self, mirror: MirrorOut | MirrorIn) -> None:
        """A mirror's lag per partition into the metrics' books, once a second (the
        mirror keeps it as it works: outbound.py, inbound.py)."""
        books = self.metrics.metrics
        while True:
            for name, lag in mirror.partitions().items():
                topic, _, partition = name.rpartition("-")
                if isinstance(mirror, MirrorIn):
                    books.follower(
                        mirror.settings.source, topic, int(partition), lag["lag_records"],
                        lag["lag_ms"],
                    )  # fmt: skip
                else:
                    books.mirror(mirror.settings.to, topic, int(partition), lag["lag_records"])
            await trio.sleep(1)

    async def _stop_on_signal(self, nursery: trio.Nursery) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                what = "unmounting" if self.mount is not None else "stopping"
                logger.info("%s: %s", signal.Signals(signum).name, what)
                if self.mount is not None:
                    await self.mount.stop()  # serve() returns, and _run ends the rest
                else:
                    nursery.cancel_scope.cancel()
                return

    def _stop(self, nursery: trio.Nursery) -> None:
        if self.mount is not None:
            self.mount.terminate()
        else:
            nursery.cancel_scope.cancel()

    def _write_record(self) -> None:
        """The record producers find the daemon by. Without it they fall back to
        the store and wait for its lock, so failing to write it fails nothing."""
        if self.options.read_only:
            return
        where = "" if self.mount is None else self.mount.real_mountpoint
        try:
            mountinfo.write_record(
                self.data,
                where,
                partitions=self.options.partitions,
                defaults=self.options.defaults,
                kafka=self.address,
            )
        except OSError as e:
            path = mountinfo.record_path(self.data)
            logger.warning("cannot write the mount record %s: %s", path, e)

    def _remove_record(self) -> None:
        if self.options.read_only:
            return
        try:
            mountinfo.remove_record(self.data)
        except OSError as e:
            path = mountinfo.record_path(self.data)
            logger.warning("cannot remove the mount record %s: %s", path, e)
