"""The log cleaner: compaction of topics with ``cleanup.policy=compact``, as
Kafka's LogCleaner does it.

A compacted partition has a *clean* part, already compacted, and a *dirty*
part after it, from the first dirty offset (kept per partition in
``DATA/cleaner-offset-checkpoint``, Kafka's checkpoint format). Cleaning one
partition:

1. `plan`: the cleanable segments are the non-active ones, oldest first, up
   to the first whose newest record is younger than min.compaction.lag.ms.
   A cleaning is due when the dirty ones are at least
   min.cleanable.dirty.ratio of their bytes, or the oldest dirty record is
   older than max.compaction.lag.ms. ``logfs compact`` forces it, even with
   nothing dirty (to drop tombstones past delete.retention.ms).
2. `offset_map`: each key's latest offset in the dirty part, keyed by a
   128-bit hash of the key as Kafka's map keys by MD5 (`_codec.OffsetMap`).
3. Each group of consecutive cleanable segments that fits in segment.bytes is
   rewritten into one segment (`write_cleaned`). A record stays unless a later
   record has its key, it is a tombstone (a null value) older than
   delete.retention.ms, or it has no key (Kafka drops those too). A batch whose
   records all stay is copied as it is; the others get a new header over the
   kept records' bytes, unchanged (so their offsets, timestamps, keys,
   values and headers are), with the batch's codec, base offset, base
   timestamp and last offset; a batch with none left goes. The per-record
   work is compiled (`_codec.OffsetMap`, `_codec.keep_records`). Offsets
   never change: cleaning leaves gaps.
   Control and transactional batches are copied as they are.
4. `swap` puts the group's cleaned segment in place of its old ones, and the
   first dirty offset moves to the end of the cleaned part.

Crash safety, one group at a time, with the files' renames as steps:

a. ``B.log.cleaned``, ``B.index.cleaned``, ``B.timeindex.cleaned`` are
   written and fsynced (B: the group's first base offset);
b. every file of the group's old segments is renamed to ``*.deleted`` and the
   directory fsynced;
c. the cleaned index files, then ``B.log.cleaned`` (the commit), are renamed
   to their names and the directory fsynced;
d. the ``*.deleted`` files are removed.

`recovery.recover_cleaning` runs before a partition's segments are opened: while a
``.log.cleaned`` exists the commit has not happened, so the ``*.deleted``
files are renamed back and the ``.cleaned`` ones removed (the log is as it
was before the cleaning); otherwise leftover ``*.cleaned`` and ``*.deleted``
files are removed (the log is as after it). A ``.log.swap`` left by Kafka is
completed as Kafka does. A crash at any step thus leaves the log as it was
before or after a group's cleaning, never a mix.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from ..config import INT_MAX, TopicConfig
from ..errors import CorruptRecordError
from ..format import compression
from ..format._codec import OffsetMap, keep_records
from ..format.batching import BatchInfo
from ..format.record import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    pack_header_into,
    records_section,
)
from ..storage.logfile import fsync_dir, iter_batches
from ..storage.recovery import CLEANED, DELETED
from ..storage.segment import LogSegment

if TYPE_CHECKING:
    from .partition import Log
    from .store import Store

logger = logging.getLogger(__name__)

INT64_MIN = -(1 << 63)


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


def plan(log: Log, first_dirty: int, now_ms: int, *, force: bool = False) -> Plan | None:
    """The cleaning due for ``log`` (see the module docstring), or None."""
    config = log.config
    if not config.compact:
        return None
    cleanable = []
    for segment in log.segments[:-1]:  # never the active segment
        if segment.max_timestamp > now_ms - config.min_compaction_lag_ms:
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


def read_fds(segments: list[LogSegment]) -> list[int]:
    """Duplicates of the segments' descriptors, for reading them in a worker
    thread: retention may close a segment meanwhile, and a closed descriptor's
    number can be reused by another file. The reader closes them."""
    return [os.dup(s.fileno()) for s in segments]


def offset_map(segments: list[LogSegment], fds: list[int], first_dirty: int) -> OffsetMap:
    """Each key's latest offset among the records at or after ``first_dirty``
    (``fds``: the segments' descriptors to read)."""
    latest = OffsetMap()
    for segment, fd in zip(segments, fds, strict=True):
        if segment.next_offset <= first_dirty:
            continue
        for _, header, batch in iter_batches(fd, 0, segment.size, path=segment.log_path):
            if header.is_control or header.last_offset < first_dirty:
                continue
            body = records_section(batch, header)
            bad = latest.map(body, header.records_count, header.base_offset, first_dirty)
            if bad >= 0:
                raise _malformed(segment, header, bad)
    return latest


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


def write_cleaned(
    log: Log,
    group: list[LogSegment],
    fds: list[int],
    latest: OffsetMap,
    now_ms: int,
    throttle: Callable[[int], None] = lambda n: None,
) -> tuple[LogSegment | None, int, int]:
    """Write the cleaned segment of ``group`` aside (``B.*.cleaned``, fsynced,
    closed); returns it (None when nothing is left), records read and kept.
    Reads the group's segments through ``fds`` and touches nothing else of
    the log: safe in a worker thread."""
    config = log.config
    horizon = now_ms - config.delete_retention_ms
    stale = LogSegment.paths(str(log.dir), group[0].base_offset, CLEANED)
    for path in stale:  # an earlier attempt's, or appends would follow it
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    cleaned = LogSegment(str(log.dir), group[0].base_offset, config, writable=True, suffix=CLEANED)
    read = kept = 0
    try:
        for segment, fd in zip(group, fds, strict=True):
            pending: list[bytes] = []
            infos: list[BatchInfo] = []
            for _, header, batch in iter_batches(fd, 0, segment.size, path=segment.log_path):
                throttle(header.size)
                if header.is_control or header.is_transactional:
                    pending.append(bytes(batch))
                    infos.append(BatchInfo(header.size, header.last_offset, header.max_timestamp))
                    continue
                log_append = header.timestamp_type == LOG_APPEND_TIME
                kept_here, section, max_delta = keep_records(
                    records_section(batch, header), header.records_count, header.base_offset,
                    header.base_timestamp, header.max_timestamp if log_append else INT64_MIN,
                    latest, horizon,
                )  # fmt: skip
                if kept_here < 0:
                    raise _malformed(segment, header, -1 - kept_here)
                read += header.records_count
                kept += kept_here
                if not kept_here:
                    continue
                max_ts = header.max_timestamp
                if section is not None:
                    if not log_append:
                        max_ts = header.base_timestamp + max_delta
                    batch = _rebuilt(header, section, kept_here, max_ts)
                pending.append(bytes(batch))
                infos.append(BatchInfo(len(batch), header.last_offset, max_ts))
            if pending:
                cleaned.append(pending, infos)
                throttle(sum(i.size for i in infos))
        if not cleaned.size:
            cleaned.close()
            discard(cleaned)
            return None, read, kept
        cleaned.on_become_inactive()
        for fd in cleaned.sync_fds():
            os.fdatasync(fd)
        cleaned.close()
    except BaseException:
        cleaned.close()
        discard(cleaned)
        raise
    return cleaned, read, kept


def _rebuilt(header: BatchHeader, section: bytes, count: int, max_timestamp: int) -> bytes:
    """A batch holding the kept records' bytes ``section``: the header's base
    offset, base timestamp, last offset delta, codec and timestamp type stay."""
    if header.codec != compression.NONE:
        section = compression.compress(header.codec, section)
    batch = bytearray(HEADER_SIZE + len(section))
    batch[HEADER_SIZE:] = section
    pack_header_into(
        batch, 0, header.base_offset, len(batch), header.attributes, count,
        header.base_timestamp, max_timestamp, header.last_offset_delta,
    )  # fmt: skip
    return bytes(batch)


def _malformed(segment: LogSegment, header: BatchHeader, record: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{segment.log_path}: batch at offset {header.base_offset}: record {record} is malformed"
    )


def discard(segment: LogSegment) -> None:
    """Remove a cleaned segment written aside that will not be swapped in."""
    for path in (segment.log_path, segment.index_path, segment.timeindex_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def swap(log: Log, group: list[LogSegment], cleaned: LogSegment | None) -> LogSegment | None:
    """Put ``cleaned`` in place of ``group``'s segments (steps b-d of the
    module docstring); returns the new segment, opened, or None when the
    whole group was cleaned away."""
    directory = str(log.dir)
    aside = []
    for segment in group:
        for path in (segment.log_path, segment.index_path, segment.timeindex_path):
            if os.path.exists(path):
                os.rename(path, path + DELETED)
                aside.append(path + DELETED)
    fsync_dir(directory)
    if cleaned is not None:
        os.rename(cleaned.index_path, cleaned.index_path.removesuffix(CLEANED))
        os.rename(cleaned.timeindex_path, cleaned.timeindex_path.removesuffix(CLEANED))
        os.rename(cleaned.log_path, cleaned.log_path.removesuffix(CLEANED))  # the commit
    fsync_dir(directory)
    for segment in group:
        segment.close()
    for path in aside:
        os.unlink(path)
    if cleaned is None:
        return None
    segment = LogSegment(directory, cleaned.base_offset, log.config, writable=True)
    segment.load()
    return segment


class Cleaning:
    """One cleaning of a log (a `plan`), in steps a caller may spread over
    threads: `map` and `write` only read the old segments (through their own
    descriptors) and write files aside, so they can run in a worker thread;
    `swap` changes the log, so it runs wherever the log is used (the daemon's
    event loop). `close` when done."""

    def __init__(
        self,
        log: Log,
        work: Plan,
        now_ms: int,
        throttle: Callable[[int], None] = lambda n: None,
    ) -> None:
        self.log, self.plan, self.now_ms, self.throttle = log, work, now_ms, throttle
        self.started = time.monotonic()
        self.groups = list(groups(work.segments, log.config))
        self.fds = read_fds(work.segments)
        self.latest = OffsetMap()
        self.records = self.kept = 0

    def map(self) -> None:
        self.latest = offset_map(self.plan.segments, self.fds, self.plan.first_dirty)

    def write(self, i: int) -> LogSegment | None:
        """Write group ``i``'s cleaned segment aside; None if nothing is left of it."""
        group = self.groups[i]
        first = sum(len(g) for g in self.groups[:i])
        cleaned, read, kept = write_cleaned(
            self.log, group, self.fds[first : first + len(group)], self.latest, self.now_ms,
            self.throttle,
        )  # fmt: skip
        self.records, self.kept = self.records + read, self.kept + kept
        return cleaned

    def swap(self, i: int, cleaned: LogSegment | None) -> bool:
        """Swap group ``i``'s cleaned segment in; False (and the cleaned files
        dropped) if retention deleted the group or the partition went offline
        meanwhile. A failed rename takes the partition offline."""
        group = self.groups[i]
        if self.log.failure is not None or any(s not in self.log.segments for s in group):
            if cleaned is not None:
                discard(cleaned)
            return False
        try:
            self.log.replace_segments(group, swap(self.log, group, cleaned))
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
            sum(s.size for s in self.plan.segments),
            sum(s.size for s in after),
            self.records,
            self.kept,
            len(self.plan.segments),
            len(after),
            time.monotonic() - self.started,
        )


def clean(
    log: Log,
    first_dirty: int,
    now_ms: int,
    *,
    force: bool = False,
    throttle: Callable[[int], None] = lambda n: None,
) -> tuple[int, Stats] | None:
    """One whole cleaning of ``log`` in the caller's thread (the offline
    ``logfs compact``, and tests): returns the new first dirty offset and
    what was done, or None when no cleaning is due."""
    work = plan(log, first_dirty, now_ms, force=force)
    if work is None:
        return None
    job = Cleaning(log, work, now_ms, throttle)
    try:
        job.map()
        for i in range(len(job.groups)):
            job.swap(i, job.write(i))
    finally:
        job.close()
    return work.end, job.stats()


def clean_store(
    store: Store,
    topics: list[str] | None = None,
    *,
    force: bool = False,
    now_ms: int | None = None,
    throttle: Callable[[int], None] = lambda n: None,
) -> list[tuple[str, int, Stats]]:
    """Clean the compacted partitions of ``topics`` (default: every topic)
    in this thread and checkpoint where each cleaning ended; returns
    ``(topic, partition, stats)`` for each partition cleaned."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    done = []
    for topic in store.topics() if topics is None else topics:
        for partition in store.partitions(topic):
            tp = (topic, partition)
            first_dirty = store.first_dirty.get(tp, 0)
            result = clean(store.log(*tp), first_dirty, now_ms, force=force, throttle=throttle)
            if result is not None:
                store.first_dirty[tp] = result[0]
                done.append((topic, partition, result[1]))
    if done:
        store.checkpoint()
    return done
