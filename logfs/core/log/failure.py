"""Whether a partition is offline, and why.

An I/O error that leaves a partition's files in an unknown state (any failed
fsync, a failed write other than a cleanly undone ENOSPC, a failed roll,
segment deletion or swap) takes the partition offline: its recovery point
never moves again, appends and fsyncs raise `LogFailedError`, and only
records below the recovery point are served. A failed fsync may already have
dropped the pages it could not write (Linux marks them clean), so a retried
fsync's success would prove nothing; only opening the log again (recovery,
which re-reads the tail from the disk) brings it back. The model and its
reasons are in docs/reliability.md.
"""

from __future__ import annotations

import errno
import logging

from ..errors import LogFailedError, describe

logger = logging.getLogger(__name__)

# Errors a write() reports before anything reaches the file: once the partly
# written batch is cut off again the partition is as it was, so the append
# fails with this errno and the partition stays online.
CLEAN_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})


class Failure:
    """A partition's failure state: online until the first `fail`, then
    offline for good (the first cause is kept and logged once)."""

    def __init__(self, name: str) -> None:
        """``name``: the partition's, ``topic-partition``, for messages."""
        self.name = name
        self.reason: str | None = None  # why the partition is offline; None: online

    def fail(self, action: str, error: OSError, recovery_point: int) -> None:
        """Go offline after ``error`` while ``action``; ``recovery_point``:
        where a recovery will start, for the log line."""
        if self.reason is not None:
            return
        self.reason = f"{action} failed: {describe(error)}"
        logger.error(
            "%s is offline: %s. Records from offset %d on are not known to be on disk; "
            "appends and fsync() answer EIO until a remount or `logfs check --repair` "
            "recovers it from there",
            self.name,
            self.reason,
            recovery_point,
        )

    def write_failed(self, error: OSError, recovery_point: int) -> None:
        """An append's write failed with ``error``, its batch cut off again
        (`SegmentTail.cut_back`, storage/books.pyx): offline unless the error is
        a clean one, which left the files as they were."""
        if error.errno not in CLEAN_WRITE_ERRORS:
            self.fail("appending to a segment", error, recovery_point)

    def require_online(self) -> None:
        """Raise `LogFailedError` if offline."""
        if self.reason is not None:
            raise LogFailedError(
                f"{self.name} is offline after an I/O error "
                f"({self.reason}); remount or run `logfs check --repair` to recover it"
            )
