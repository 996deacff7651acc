"""The log cleaner: compaction of topics with ``cleanup.policy=compact``, as
Kafka's LogCleaner does it.

A compacted partition has a *clean* part, already compacted, and a *dirty*
part after it, from the first dirty offset (kept per partition by the store
in ``DATA/cleaner-offset-checkpoint``, Kafka's checkpoint format). Cleaning
one partition:

1. `plan`: the cleanable segments are the non-active ones, oldest first, up
   to the first whose newest record is younger than min.compaction.lag.ms or
   that reaches the last stable offset (an undecided transaction is never cleaned).
   A cleaning is due when the dirty ones are at least
   min.cleanable.dirty.ratio of their bytes, or the oldest dirty record is
   older than max.compaction.lag.ms. ``logfs compact`` forces it, even with
   nothing dirty (to drop tombstones past delete.retention.ms).
2. `compaction.offset_map`: each key's latest offset in the dirty part.
3. Each group of consecutive cleanable segments that fits in segment.bytes
   (`groups`) is rewritten into one segment written aside
   (`compaction.write_cleaned`).
4. Each group's cleaned segment is swapped in for its old ones, crash-safely
   (storage/swap.py). Once every group is, the first dirty offset moves to
   the end of the cleaned part; if a swap is given up (retention deleted the
   group meanwhile, or the partition went offline) it stays where it was.

`cleaning` is the one driver of these steps, for ``logfs compact``
(`clean_store`, in the caller's thread) and for the mount's background
cleaner (which runs the heavy steps in a worker thread).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, NamedTuple

from ..config import INT_MAX, TopicConfig
from ..config import now_ms as wall_clock_ms
from ..storage.segment import LogSegment
from ..storage.swap import swap_in
from ._keymap import OffsetMap
from .compaction import TxnCleaning, offset_map, write_cleaned
from .isolation import Visibility

if TYPE_CHECKING:
    from .partition import Log
    from .store import Store

# A step of a cleaning that only reads the old segments and writes files
# aside: the caller runs it in whichever thread it likes and sends back its result.
Step = Callable[[], object]


class Plan(NamedTuple):
    """What one cleaning of a log covers."""

    first_dirty: int  # the dirty part starts here
    end: int  # the first offset not cleaned (the first uncleanable segment's base)
    segments: list[LogSegment]  # the cleanable segments, oldest first
    dirty_ratio: float


class Stats(NamedTuple):
    """What a cleaning did, for the log line and the tests."""

    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    segments_before: int
    segments_after: int
    seconds: float
    end: int  # the first offset not cleaned: the dirty part starts here now
    dirty_ratio: float  # the plan's


def plan(log: Log, first_dirty: int, now_ms: int, *, force: bool = False) -> Plan | None:
    """The cleaning due for ``log`` (see the module docstring), or None."""
    config = log.config
    if not config.compact:
        return None
    cleanable = []
    stable = log.last_stable_offset
    for segment in log.segments[:-1]:  # never the active segment
        if segment.max_timestamp > now_ms - config.min_compaction_lag_ms:
            break
        if segment.next_offset > stable:
            break
        cleanable.append(segment)
    if not cleanable:
        return None
    end = log.segments[len(cleanable)].base_offset
    first_dirty = max(first_dirty, log.log_start_offset)
    if first_dirty >= end and not force:
        return None
    dirty = [s for s in cleanable if s.next_offset > first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    total = sum(s.size for s in cleanable)
    ratio = dirty_bytes / total if total else 0.0
    overdue = bool(dirty) and dirty[0].first_timestamp < now_ms - config.max_compaction_lag_ms
    if not (force or overdue or ratio >= config.min_cleanable_dirty_ratio):
        return None
    return Plan(first_dirty, end, cleanable, ratio)


def groups(segments: list[LogSegment], config: TopicConfig) -> Iterator[list[LogSegment]]:
    """Consecutive segments whose sizes together fit segment.bytes (Kafka's
    groupSegmentsBySize), and whose offsets fit one segment's relative offsets."""
    group: list[LogSegment] = []
    size = 0
    for segment in segments:
        fits = size + segment.size <= config.segment_bytes
        if group and (not fits or segment.next_offset - 1 - group[0].base_offset > INT_MAX):
            yield group
            group, size = [], 0
        group.append(segment)
        size += segment.size
    if group:
        yield group


class Throttle:
    """Kafka's log.cleaner.io.max.bytes.per.second: sleeps so that the bytes
    read and written stay under ``rate`` per second (0: no bound)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self.start = clock()
        self.done = 0

    def __call__(self, nbytes: int) -> None:
        if self.rate <= 0:
            return
        self.done += nbytes
        ahead = self.done / self.rate - (self.clock() - self.start)
        if ahead > 0:
            time.sleep(ahead)


class Cleaning:
    """One cleaning of a log (a `plan`) and its state: the groups, the
    descriptors the heavy steps read the old segments through (duplicates:
    retention may close a segment meanwhile), the offset map, the counts."""

    def __init__(self, log: Log, work: Plan, now_ms: int, throttle: Callable[[int], None]) -> None:
        self.log, self.plan, self.now_ms, self.throttle = log, work, now_ms, throttle
        self.started = time.monotonic()
        self.groups = list(groups(work.segments, log.config))
        self.fds = [os.dup(s.fileno()) for s in work.segments]
        self.latest = OffsetMap()
        self.records = self.kept = 0
        start = work.segments[0].base_offset
        aborted = log.aborted_transactions(start, work.end)
        entries = {t.last_offset: t for s in work.segments for t in s.txn_index.entries}
        self.txns = TxnCleaning(Visibility(work.end, aborted), entries)

    def map(self) -> None:
        """Step 2 (any thread)."""
        self.latest = offset_map(
            self.plan.segments, self.fds, self.plan.first_dirty, self.txns.view
        )

    def write(self, i: int) -> LogSegment | None:
        """Step 3 for group ``i`` (any thread): its cleaned segment, written
        aside; None if nothing is left of it."""
        group = self.groups[i]
        first = sum(len(g) for g in self.groups[:i])
        cleaned = write_cleaned(
            str(self.log.dir), self.log.config, group, self.fds[first : first + len(group)],
            self.latest, self.now_ms, self.throttle, self.txns,
        )  # fmt: skip
        self.records += cleaned.records_read
        self.kept += cleaned.records_kept
        return cleaned.segment

    def swap(self, i: int, cleaned: LogSegment | None) -> bool:
        """Step 4 for group ``i`` (the log's thread): swap its cleaned segment
        in; False (and the cleaned files dropped) if retention deleted the
        group or the partition went offline meanwhile. A failed rename takes
        the partition offline."""
        group = self.groups[i]
        if self.log.failure is not None or any(s not in self.log.segments for s in group):
            if cleaned is not None:
                cleaned.delete()
            return False
        try:
            self.log.replace_segments(
                group, swap_in(str(self.log.dir), group, cleaned, self.log.config)
            )
        except OSError as e:
            self.log.fail("swapping in a cleaned segment", e)
            raise
        return True

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def stats(self) -> Stats:
        after = [s for s in self.log.segments if s.base_offset < self.plan.end]
        return Stats(
            bytes_read=sum(s.size for s in self.plan.segments),
            bytes_written=sum(s.size for s in after),
            records_read=self.records,
            records_kept=self.kept,
            segments_before=len(self.plan.segments),
            segments_after=len(after),
            seconds=time.monotonic() - self.started,
            end=self.plan.end,
            dirty_ratio=self.plan.dirty_ratio,
        )


def cleaning(
    store: Store,
    log: Log,
    now_ms: int,
    *,
    force: bool = False,
    throttle: Callable[[int], None] = lambda n: None,
) -> Generator[Step, object, Stats | None]:
    """The one driver of a cleaning of ``log`` (a partition of ``store``).

    Runs on the thread that owns the store, except for the heavy steps: it
    yields each (a `Step`) and expects its result sent back, so that the
    caller chooses where they run (`run_steps`: right here). Returns what was
    done, or None when no cleaning was due or it was given up (see the module
    docstring); only a cleaning whose every swap succeeded moves the first
    dirty offset.
    """
    first_dirty = store.first_dirty(log.topic, log.partition)
    work = plan(log, first_dirty, now_ms, force=force)
    if work is None:
        return None
    job = Cleaning(log, work, now_ms, throttle)
    try:
        yield job.map
        for i in range(len(job.groups)):
            cleaned = yield functools.partial(job.write, i)
            if not job.swap(i, cleaned):
                return None
    finally:
        job.close()
    store.cleaned_below(log.topic, log.partition, work.end)
    return job.stats()


def run_steps(steps: Generator[Step, object, Stats | None]) -> Stats | None:
    """Drive ``steps`` (`cleaning`) to the end, every step in this thread."""
    result = None
    while True:
        try:
            step = steps.send(result)
        except StopIteration as done:
            return done.value
        try:
            result = step()
        except BaseException:
            steps.close()  # the driver's cleanup runs now
            raise


def clean_store(
    store: Store,
    topics: list[str] | None = None,
    *,
    force: bool = False,
    now_ms: int | None = None,
    throttle: Callable[[int], None] = lambda n: None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[tuple[str, int, Stats]]:
    """Clean the compacted partitions of ``topics`` (default: every topic)
    in this thread and checkpoint where each cleaning ended; returns
    ``(topic, partition, stats)`` for each partition cleaned. ``progress(done,
    total, name)`` is called after each partition."""
    now_ms = wall_clock_ms() if now_ms is None else now_ms
    done = []
    partitions = [
        (topic, partition)
        for topic in (store.topics() if topics is None else topics)
        for partition in store.partitions(topic)
    ]
    for count, (topic, partition) in enumerate(partitions, 1):
        log = store.log(topic, partition)
        stats = run_steps(cleaning(store, log, now_ms, force=force, throttle=throttle))
        if stats is not None:
            done.append((topic, partition, stats))
        if progress is not None:
            progress(count, len(partitions), f"{topic}-{partition}")
    if done:
        store.checkpoint()
    return done
