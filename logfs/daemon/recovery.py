"""How far a daemon's recovery at the start went: the partitions opened (and
their tails validated) so far, out of all. `Store.recover` reports each
partition from the recovery's worker thread; the event loop reads the last
report (the root's ``user.logfs.recovery``, `state`). One tuple replaced
whole, so the two threads need no lock. The log gets a line at most every
`LOG_EVERY` seconds: 100,000 partitions make a few dozen lines, not 100,000.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger("logfs")

LOG_EVERY = 5.0  # seconds


class RecoveryProgress:
    """The recovery of ``data``'s partitions, as far as it went; ``report`` is told
    too (``logfs mount`` shows it while it waits)."""

    def __init__(self, data: str, report: Callable[[int, int, str], None] | None = None) -> None:
        self.data = data
        self.report = report
        self.counts = (0, 0)  # (recovered, partitions): one tuple, replaced whole
        self.started = self.logged = time.monotonic()
        self.ended: float | None = None

    def __call__(self, done: int, total: int, name: str) -> None:
        """``done`` of ``total`` partitions recovered, ``name`` the last (worker thread)."""
        self.counts = (done, total)
        if self.report is not None:
            self.report(done, total, name)
        now = time.monotonic()
        if now - self.logged >= LOG_EVERY and done < total:
            self.logged = now
            logger.info(
                "recovering %s: %d of %d partitions (%.0f%%) in %.0f s, last %s",
                self.data, done, total, 100 * done / total, now - self.started, name,
            )  # fmt: skip

    def end(self) -> None:
        self.ended = time.monotonic()

    def state(self) -> dict:
        """``{"partitions", "recovered", "seconds", "done"}``: a JSON object."""
        seconds = (self.ended or time.monotonic()) - self.started
        recovered, partitions = self.counts
        return {
            "partitions": partitions,
            "recovered": recovered,
            "seconds": round(seconds, 3),
            "done": self.ended is not None,
        }
