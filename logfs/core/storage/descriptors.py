"""The descriptor budget: how many segments may hold open files at once.

A data directory may hold far more segment files than a process may open
(100,000 segments of a tiny ``segment.bytes``, 20,000 partitions). So a
segment opens its files on demand and registers with `DESCRIPTORS`, a
least-recently-used list of the segments holding descriptors; past the
budget the least recently used one closes its files (its next use reopens
them, an ``open()`` of a known path). A segment that is being walked (a
generator over its batches) is pinned and never closed under its reader.

The budget derives from ``RLIMIT_NOFILE``: `raise_nofile_limit` (called by
every `Store`) raises the soft limit to the hard one, then
``(limit - reserve) // FILES_PER_SEGMENT`` segments may be open, where the
reserve (`reserve_for`: a quarter of the limit, at least 128) is left for
what is not a segment: FUSE and client sockets, the data directory's lock,
checkpoint files, the flusher's fsyncs (one file at a time) and the
cleaner's duplicated descriptors.
"""

from __future__ import annotations

import logging
import resource
from collections import OrderedDict
from typing import Protocol

logger = logging.getLogger(__name__)

FILES_PER_SEGMENT = 3  # .log, .index, .timeindex
MIN_RESERVE = 128
MIN_SEGMENTS = 16


class Holder(Protocol):
    """What the budget closes: a segment."""

    pins: int

    def release(self) -> None: ...


def reserve_for(limit: int) -> int:
    """Descriptors kept out of the budget under a limit of ``limit``."""
    return max(MIN_RESERVE, limit // 4)


def budget_for(limit: int) -> int:
    """Segments that may hold open files under a descriptor limit of ``limit``."""
    return max(MIN_SEGMENTS, (limit - reserve_for(limit)) // FILES_PER_SEGMENT)


def raise_nofile_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (once it is, a no-op),
    size `DESCRIPTORS` from it and return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # a container may forbid it: keep the soft one
            logger.warning("raising the open-file limit from %d to %d failed: %s", soft, hard, e)
    limit = _soft_limit()
    DESCRIPTORS.limit = budget_for(limit)
    return limit


class Descriptors:
    """The segments holding open files, least recently used first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # segments, not descriptors
        self._open: OrderedDict[int, Holder] = OrderedDict()
        # Segments closed to stay under the budget: statistics, and how the line path
        # knows a row's segment file may have been closed (core/log/_line.pyx).
        self.closed = 0

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, holder: Holder) -> None:
        """``holder`` opened a file or used one: it is the most recent; close the
        least recently used ones past the budget (pinned ones are skipped)."""
        key = id(holder)
        if key in self._open:
            self._open.move_to_end(key)
            return
        self._open[key] = holder
        if len(self._open) > self.limit:
            self._evict()

    def _evict(self) -> None:
        skipped = []
        while len(self._open) > self.limit:
            try:
                _, oldest = self._open.popitem(last=False)
            except KeyError:
                break
            if oldest.pins:
                skipped.append(oldest)
                continue
            oldest.release()
            self.closed += 1
        for holder in reversed(skipped):  # still in use: most recent again, oldest first
            self._open[id(holder)] = holder
            self._open.move_to_end(id(holder), last=False)

    def forget(self, holder: Holder) -> None:
        """``holder`` closed its files itself."""
        self._open.pop(id(holder), None)


def _soft_limit() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


DESCRIPTORS = Descriptors(budget_for(_soft_limit()))
