"""The daemon's log cleaner: compacted topics cleaned in the background.

Every `backoff` seconds (Kafka's log.cleaner.backoff.ms) the cleaner looks for
compacted partitions with a cleaning due and cleans them one at a time with
the core's driver (`cleaner.cleaning`, core/log/cleaner.py). It only chooses
where the steps run: the event loop never waits for the heavy ones (building
the offset map and writing each group's cleaned segment, which read the old
segments through their own descriptors), which run in a worker thread; the
rest (the swap of a group: a few renames, one directory fsync, loading the
new segment's indexes) runs on the loop, where the store is touched.
``io_rate`` bounds the bytes read and written per second (Kafka's
log.cleaner.io.max.bytes.per.second).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..core.config import now_ms as wall_clock_ms
from ..core.log import cleaner

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

    def set_io_rate(self, rate: float) -> None:
        """Kafka's dynamic log.cleaner.io.max.bytes.per.second: from the next cleaning."""
        self.throttle = cleaner.Throttle(rate)

    def set_backoff(self, seconds: float) -> None:
        """Kafka's dynamic log.cleaner.backoff.ms: from the next wait."""
        self.backoff = seconds

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
        """One cleaning of ``log`` if due (or ``force``); returns whether it ran
        to the end (not when retention or a failure came first)."""
        now = self.now_ms()
        steps = cleaner.cleaning(self.store, log, now, force=force, throttle=self.throttle)
        result = None
        while True:
            try:
                step = steps.send(result)
            except StopIteration as done:
                stats = done.value
                break
            try:
                result = await trio.to_thread.run_sync(step)
            except BaseException:
                steps.close()  # the driver's cleanup runs now
                raise
        if stats is None:
            return False
        self.cleanings += 1
        logger.info(
            "cleaned %s-%d below offset %d in %.2f s (dirty ratio %.2f): %d of %d records kept",
            log.topic,
            log.partition,
            stats.end,
            stats.seconds,
            stats.dirty_ratio,
            stats.records_kept,
            stats.records_read,
        )
        return True

    def _checkpoint(self) -> None:
        try:
            self.store.checkpoint()
        except OSError:  # the store logged it; retried with the flusher's checkpoints
            self.errors += 1
