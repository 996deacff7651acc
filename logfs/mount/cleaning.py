"""The daemon's log cleaner: compacted topics cleaned in the background.

Every `backoff` seconds (Kafka's log.cleaner.backoff.ms) the cleaner looks for
compacted partitions with a cleaning due (`cleaner.plan`) and cleans them one
at a time, as core/cleaner.py describes. The event loop never waits for the
heavy part: building the offset map and writing each group's cleaned segment
run in a worker thread, reading the old segments through their own
descriptors; only the swap of a group (a few renames, one directory fsync,
loading the new segment's indexes) runs on the loop, where the store is
touched. If retention deleted a group's segments meanwhile, or the partition
went offline, the cleaned files are dropped. ``io_rate`` bounds the bytes read
and written per second (Kafka's log.cleaner.io.max.bytes.per.second).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..core.log import cleaner
from .flusher import wall_clock_ms

if TYPE_CHECKING:
    from ..core.log import Log, Store

logger = logging.getLogger(__name__)


class Cleaner:
    """Cleans the store's compacted partitions in the background."""

    def __init__(
        self,
        store: Store,
        *,
        backoff: float = 15.0,
        io_rate: float = 0.0,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        self.backoff = backoff
        self.throttle = cleaner.Throttle(io_rate)
        self.now_ms = now_ms
        self.cleanings = 0
        self.errors = 0

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await trio.sleep(self.backoff)
            await self.clean_due()

    async def clean_due(self) -> int:
        """Clean every compacted partition with a cleaning due; returns how many."""
        cleaned = 0
        for log in self.store.logs():
            if not log.config.compact or log.failure is not None:
                continue
            try:
                cleaned += await self.clean_log(log)
            except OSError as e:  # reading or writing aside: nothing changed, retried later
                self.errors += 1
                logger.error("cleaning %s-%s failed: %s", log.topic, log.partition, e)
        if cleaned:
            self._checkpoint()
        return cleaned

    async def clean_log(self, log: Log, *, force: bool = False) -> bool:
        """One cleaning of ``log`` if due (or ``force``); returns whether it ran."""
        tp = (log.topic, log.partition)
        now = self.now_ms()
        work = cleaner.plan(log, self.store.first_dirty.get(tp, 0), now, force=force)
        if work is None:
            return False
        job = cleaner.Cleaning(log, work, now, self.throttle)
        try:
            await trio.to_thread.run_sync(job.map)
            for i in range(len(job.groups)):
                cleaned = await trio.to_thread.run_sync(job.write, i)
                if not job.swap(i, cleaned):  # retention or a failure came first
                    return False
        finally:
            job.close()
        self.store.first_dirty[tp] = work.end
        self.cleanings += 1
        stats = job.stats()
        logger.info(
            "cleaned %s-%d below offset %d in %.2f s (dirty ratio %.2f): %d of %d records kept",
            log.topic,
            log.partition,
            work.end,
            stats.seconds,
            work.dirty_ratio,
            stats.records_kept,
            stats.records_read,
        )
        return True

    def _checkpoint(self) -> None:
        try:
            self.store.checkpoint()
        except OSError:  # the store logged it; retried with the flusher's checkpoints
            self.errors += 1
