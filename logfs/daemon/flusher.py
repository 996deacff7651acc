"""The background flusher: flush.messages / flush.ms, retention, checkpoints.

Every `tick` seconds (trio's clock) the flusher asks each log whether a flush
is due (`Log.flush_due`: at least flush.messages unflushed records, or some
and the last flush at least flush.ms old) and flushes those. A flush is the
core's three steps (core/log/flushing.py); the flusher only chooses where
they run, so that no fsync ever blocks the event loop and the store is only
touched from the loop (it is not thread-safe): ``log.prepare_flush()`` and
``log.complete_flush(ticket)`` on the loop, ``ticket.sync()`` in a worker
thread.

Every `retention_interval` seconds it deletes segments past retention.ms /
retention.bytes, and every `checkpoint_interval` seconds (and after
retention) it writes the recovery-point and log-start checkpoints. With the
default flush.ms (1000, see config.py) and tick (0.1 s) a power failure loses
at most about the last 1.1 s of appends plus one fsync's duration; a killed
daemon loses nothing (appends are in the page cache once write() returns).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from ..core.config import now_ms as wall_clock_ms
from ..core.errors import LogfsError

if TYPE_CHECKING:
    from ..core.log import FlushTicket, Log, Store


async def sync_in_thread(ticket: FlushTicket) -> None:
    """The default place for a flush's fsyncs: a worker thread, so the loop never blocks."""
    await trio.to_thread.run_sync(ticket.sync)


class Flusher:
    """Flushes due logs, enforces retention and writes checkpoints."""

    def __init__(
        self,
        store: Store,
        *,
        tick: float = 0.1,
        retention_interval: float = 300.0,
        checkpoint_interval: float = 60.0,
        now_ms: Callable[[], int] = wall_clock_ms,
        sync: Callable[[FlushTicket], Awaitable[None]] = sync_in_thread,
        keep_from: Callable[[str, int], int | None] = lambda topic, partition: None,
    ) -> None:
        """``keep_from``: per partition, the offset retention keeps (a mirror's position)."""
        self.store = store
        self.tick = tick
        self.retention_interval = retention_interval
        self.checkpoint_interval = checkpoint_interval
        self.now_ms = now_ms
        self.sync = sync
        self.keep_from = keep_from
        self._locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._scope = trio.CancelScope()
        self.flushes = 0
        self.errors = 0
        self.segments_deleted = 0

    def statistics(self) -> dict[str, int]:
        return {
            "flushes": self.flushes,
            "errors": self.errors,
            "segments_deleted": self.segments_deleted,
        }

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Until `stop`: flush what is due every tick, retention and checkpoints
        at their intervals."""
        with self._scope:
            task_status.started()
            next_retention = trio.current_time() + self.retention_interval
            next_checkpoint = trio.current_time() + self.checkpoint_interval
            while True:
                await trio.sleep(self.tick)
                await self.flush_due()
                now = trio.current_time()
                if now >= next_retention:
                    next_retention = now + self.retention_interval
                    if self.enforce_retention():
                        next_checkpoint = now
                if now >= next_checkpoint:
                    next_checkpoint = now + self.checkpoint_interval
                    self._checkpoint()

    def stop(self) -> None:
        self._scope.cancel()

    async def flush_due(self) -> int:
        """Flush every log whose flush is due, concurrently; returns how many."""
        now = self.now_ms()
        due = [log for log in self.store.logs() if log.flush_due(now)]
        if due:
            async with trio.open_nursery() as nursery:
                for log in due:
                    nursery.start_soon(self._flush_quietly, log)
        return len(due)

    async def _flush_quietly(self, log: Log) -> None:
        try:
            await self.flush_log(log)
        except OSError:  # offline, or a clean error (EMFILE, ENOSPC) retried next tick:
            pass  # the core logged it once (Log.fail, Log.flush_failure)
        except LogfsError:  # offline: Log.fail logged it once
            pass

    async def flush_log(self, log: Log, upto: int | None = None) -> None:
        """Make everything appended to ``log`` so far durable (fsync in a thread).

        Concurrent calls for one log are serialized; each syncs what was
        appended before it started, unless the log is durable up to ``upto``
        by its turn (an earlier call's flush covered it).
        """
        lock = self._locks.setdefault(log, trio.Lock())
        async with lock:
            if upto is not None and log.recovery_point >= upto:
                return
            ticket = log.prepare_flush()
            await self.sync(ticket)
            if ticket.error is not None or ticket.open_error is not None:
                self.errors += 1
            log.complete_flush(ticket)  # raises the fsync's error: the partition is offline
            self.flushes += 1

    def enforce_retention(self) -> int:
        """Delete expired segments of every log; returns how many."""
        deleted = 0
        now = self.now_ms()
        for log in self.store.logs():
            try:
                deleted += log.enforce_retention(now, self.keep_from(log.topic, log.partition))
            except OSError:  # the partition went offline; Log.fail logged why
                self.errors += 1
        self.segments_deleted += deleted
        return deleted

    def _checkpoint(self) -> None:
        try:
            self.store.checkpoint()
        except OSError:  # the store logged it; the old checkpoint stands, retried next interval
            self.errors += 1
