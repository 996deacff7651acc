"""One topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

The last segment is the active one; appends go there until `should_roll`
says to start a new one at the next offset. Offsets are dense from the log
start offset to ``next_offset``, except where the cleaner removed records
from a compacted topic (cleaner.py): reads treat a gap like an offset out of
range.

Durability: everything below ``recovery_point`` has been fsynced. Opening a
log recovers it (see recovery.py): every batch from the recovery point on is
validated, the first bad batch and everything after it is removed, and the
indexes past the recovery point are rebuilt.

Failure: an I/O error that leaves the partition's files in an unknown state
(any failed fsync, a failed write other than a cleanly undone ENOSPC, a
failed roll or segment deletion) takes the partition offline (`fail`): its
recovery point never moves again, appends and fsyncs raise `LogFailedError`,
and only records below the recovery point are served. A failed fsync may
already have dropped the pages it could not write (Linux marks them clean),
so a retried fsync's success would prove nothing; only opening the log again
(recovery, which re-reads the tail from the disk) brings it back. The model
and its reasons are in docs/reliability.md.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..config import TopicConfig, flush_due, now_ms, segments_to_delete, should_roll
from ..errors import (
    InvalidRecordError,
    LogFailedError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    describe,
)
from ..format import batching, compression, validate
from ..format.batching import BatchInfo
from ..format.record import BatchHeader, Record, decode_records, record_at
from ..storage.logfile import sync_fd
from ..storage.recovery import load_segments
from ..storage.segment import LogSegment
from . import lines
from .keys import index_batches, live_keys

logger = logging.getLogger(__name__)

# Errors a write() reports before anything reaches the file: once the partly
# written batch is cut off again the partition is as it was, so the append
# fails with this errno and the partition stays online.
CLEAN_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})


class FlushTicket(NamedTuple):
    """What a flush must fsync (duplicated fds: safe to use in a thread) and
    what becomes durable once it has."""

    fds: list[int]
    next_offset: int
    messages: int


class Log:
    """A topic-partition's segments, reads, appends, flushes and retention.

    Callers outside core (the mount) use its methods, never its segments:
    ``segment_files``, and ``stream`` for the records as lines.
    """

    def __init__(
        self,
        directory: str | Path,
        topic: str,
        partition: int,
        config: TopicConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        writable: bool = True,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.dir = Path(directory)
        self.topic = topic
        self.partition = partition
        self.config = config
        self.writable = writable
        self.clock = clock
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._dirty: dict[int, LogSegment] = {}
        self._dir_dirty = False
        self.unflushed_messages = 0
        self.last_flush_ms = clock()
        self.truncated_bytes = 0
        self.recovery_point = 0
        self.failure: str | None = None  # why the partition is offline (`fail`)
        self.rewrites = 0  # cleanings swapped in: stream positions before them are stale
        self._live_keys: dict[bytes, int] | None = None  # compacted topics (keys.py)
        # keys appended to since the mount last looked (None: nobody looks)
        self.changed_keys: set[bytes] | None = None
        self._load(recovery_point, log_start_offset)

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, {self.log_start_offset}..{self.next_offset})"

    # ------------------------------------------------------------ loading and recovery

    def _load(self, recovery_point: int, log_start_offset: int) -> None:
        loaded = load_segments(self.dir, self.config, recovery_point, writable=self.writable)
        for segment in loaded.segments:
            self._add_segment(segment)
        self.truncated_bytes = loaded.truncated_bytes
        self._dir_dirty = loaded.deleted_files
        if not self.segments and self.writable:
            self._add_segment(
                LogSegment(str(self.dir), log_start_offset, self.config, writable=True)
            )
            self._dir_dirty = True
        # Retention moves the log start; cleaning does not, though it may leave
        # nothing of the first segments (Kafka's compacted logs start at 0).
        first_base = self._bases[0] if self._bases and not self.config.compact else 0
        self.log_start_offset = max(log_start_offset, first_base)
        self.log_start_offset = min(self.log_start_offset, self.next_offset)
        self.recovery_point = min(recovery_point, self.next_offset)
        if self.writable:
            # What recovery validated past the recovery point may still be only in
            # the page cache (a process crash): make it durable before trusting it.
            for segment in self.segments[loaded.first_recovered :]:
                if segment.next_offset > recovery_point or self.truncated_bytes:
                    self._dirty[segment.base_offset] = segment
            with contextlib.suppress(OSError):  # if so, it opens offline (`fail` logged why)
                self.flush()  # advances the recovery point to next_offset

    def _add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._bases.append(segment.base_offset)

    # ------------------------------------------------------------ state

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets (Kafka's log end offset)."""
        return self.segments[-1].next_offset if self.segments else self.log_start_offset

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def active_base_offset(self) -> int | None:
        """The active segment's base offset; None for a log without segments."""
        return self.segments[-1].base_offset if self.segments else None

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_files(self) -> dict[str, str]:
        """Every segment's log, offset index and time index: file name -> absolute path."""
        files = {}
        for segment in self.segments:
            for path in (segment.log_path, segment.index_path, segment.timeindex_path):
                files[os.path.basename(path)] = os.path.abspath(path)
        return files

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment that holds ``offset`` if any record does; for an offset
        in a compacted log's gap before its first segment (cleaned away), the
        first segment; None below the log start or without segments."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0 and self.segments and offset >= self.log_start_offset:
            i = 0
        return self.segments[i] if i >= 0 else None

    # ------------------------------------------------------------ failure

    def fail(self, action: str, error: OSError) -> None:
        """Take the partition offline after ``error`` while ``action`` (the
        first cause is kept and logged once)."""
        if self.failure is not None:
            return
        self.failure = f"{action} failed: {describe(error)}"
        logger.error(
            "%s-%d is offline: %s. Records from offset %d on are not known to be on disk; "
            "appends and fsync() answer EIO until a remount or `logfs check --repair` "
            "recovers it from there",
            self.topic,
            self.partition,
            self.failure,
            self.recovery_point,
        )

    def _require_online(self) -> None:
        if self.failure is not None:
            raise LogFailedError(
                f"{self.topic}-{self.partition} is offline after an I/O error "
                f"({self.failure}); remount or run `logfs check --repair` to recover it"
            )

    def check_readable(self, offset: int) -> None:
        """Raise `LogFailedError` for a read at or past an offline partition's
        recovery point: what follows it may not be on the disk."""
        if self.failure is not None and offset >= self.recovery_point:
            self._require_online()

    # ------------------------------------------------------------ appending

    def append(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        timestamp: int | Sequence[int] | None = None,
    ) -> int:
        """Append records; returns the offset of the first.

        The records are cut into batches of at most max.message.bytes and
        written with one write() per segment touched, so a record is never
        torn and never interleaved with another writer's.

        Raises:
            RecordTooLargeError: a single record does not fit max.message.bytes.
            ReadOnlyError: the log was opened read-only.
        """
        if not self.writable:
            raise ReadOnlyError(f"{self.topic}-{self.partition} is read-only")
        self._require_online()
        first = self.next_offset
        if not values:
            return first
        if self.config.compact and (keys is None or None in keys):
            raise self._keys_required()
        now = self.clock()
        timestamp, timestamp_type = batching.timestamp_for(self.config, timestamp, now)
        self._write(
            batching.encode_values(
                self.config, first, values, keys, headers, timestamp, timestamp_type
            ),
            now,
        )
        self.unflushed_messages += len(values)
        return first

    def append_packed(self, packed: bytes | memoryview, lengths: np.ndarray) -> int:
        """Append keyless, headerless records given packed: each value followed by
        one separator byte (lines with their ``\\n``); ``lengths`` are the values'.

        Same result and errors as ``append`` of the values, without making a
        Python object per record. Returns the offset of the first.
        """
        self._require_online()
        first = self.next_offset
        if not len(lengths):
            return first
        if self.config.compact:
            raise self._keys_required()
        encoded = None
        codec = compression.BY_NAME[self.config.compression_type]
        if codec == compression.NONE and self.writable and len(lengths) >= batching.PACKED_MIN:
            now = self.clock()
            timestamp, timestamp_type = batching.timestamp_for(self.config, None, now)
            encoded = batching.encode_packed(
                self.config, first, packed, lengths, timestamp, timestamp_type
            )
        if encoded is None:
            values, pos = [], 0
            for length in lengths.tolist():
                values.append(bytes(packed[pos : pos + length]))
                pos += length + 1
            return self.append(values)
        self._write(encoded, now)
        self.unflushed_messages += len(lengths)
        return first

    def append_batches(self, batches: Sequence[bytes | memoryview]) -> int:
        """Append whole RecordBatch v2 batches a producer built, checked and given
        their offsets as Kafka's broker does (validate.py): all are checked
        before any is appended. Returns the offset of the first record.

        Raises:
            InvalidBatchError: a batch Kafka would refuse; `BatchTooLargeError`
                (a RecordTooLargeError too) for one over max.message.bytes.
            ReadOnlyError: the log was opened read-only.
        """
        if not self.writable:
            raise ReadOnlyError(f"{self.topic}-{self.partition} is read-only")
        self._require_online()
        first, now = self.next_offset, self.clock()
        encoded, count = validate.prepare_batches(batches, self.config, first, now)
        if encoded:
            self._write(encoded, now)
            self.unflushed_messages += count
        return first

    def _keys_required(self) -> InvalidRecordError:
        return InvalidRecordError(
            f"{self.topic}-{self.partition} is compacted (cleanup.policy="
            f"{self.config.cleanup_policy}): every record needs a key"
        )

    def _write(self, encoded: list[tuple[bytes, BatchInfo]], now: int) -> None:
        try:
            self._write_batches(encoded, now)
        except OSError as e:
            if e.errno not in CLEAN_WRITE_ERRORS:
                self.fail("appending to a segment", e)
            raise
        if self._live_keys is not None:
            index_batches(self._live_keys, (batch for batch, _ in encoded), self.changed_keys)

    def live_keys(self) -> dict[bytes, int]:
        """Each live key of a compacted partition and its latest record's
        offset (keys.py); built on first use, then kept current by appends."""
        if self._live_keys is None:
            self._live_keys = live_keys(self.segments, self.log_start_offset)
        return self._live_keys

    def _write_batches(self, encoded: list[tuple[bytes, BatchInfo]], now: int) -> None:
        segment = self.active_segment
        if segment.size and not should_roll(
            self.config,
            segment_size=segment.size,
            batch_size=sum(info.size for _, info in encoded),
            segment_age_ms=now - segment.first_timestamp,
            index_full=segment.index_full,
            relative_offset_overflow=not segment.can_hold(encoded[-1][1].last_offset),
        ):  # what the loop below decides batch by batch, for all of them at once
            self._flush_pending(encoded)
            return
        pending: list[tuple[bytes, BatchInfo]] = []
        pending_size = 0
        for batch, info in encoded:
            segment = self.active_segment
            if should_roll(
                self.config,
                segment_size=segment.size + pending_size,
                batch_size=info.size,
                segment_age_ms=now - segment.first_timestamp if segment.size + pending_size else 0,
                index_full=segment.index_full,
                relative_offset_overflow=not segment.can_hold(info.last_offset),
            ):
                self._flush_pending(pending)
                pending, pending_size = [], 0
                self.roll()
            pending.append((batch, info))
            pending_size += info.size
        self._flush_pending(pending)

    def _flush_pending(self, pending: list[tuple[bytes, BatchInfo]]) -> None:
        if pending:
            segment = self.active_segment
            segment.append([b for b, _ in pending], [info for _, info in pending])
            self._dirty[segment.base_offset] = segment

    def replace_segments(self, old: list[LogSegment], new: LogSegment | None) -> None:
        """Put ``new`` (a cleaned segment, or nothing) where the consecutive
        segments ``old`` were (cleaner.py: their files are swapped already)."""
        i = self.segments.index(old[0])
        if self.segments[i : i + len(old)] != old:
            raise ValueError("the segments to replace are not consecutive in the log")
        self.segments[i : i + len(old)] = [] if new is None else [new]
        self._bases = [s.base_offset for s in self.segments]
        for segment in old:
            self._dirty.pop(segment.base_offset, None)
        self.rewrites += 1

    def roll(self) -> LogSegment:
        """Close the active segment to appends and start one at next_offset."""
        active = self.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        segment = LogSegment(str(self.dir), self.next_offset, self.config, writable=True)
        self._add_segment(segment)
        self._dir_dirty = True
        return segment

    # ------------------------------------------------------------ reading

    def _check_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset < self.next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, {self.next_offset}) "
                f"of {self.topic}-{self.partition}"
            )

    def read(self, offset: int) -> Record:
        """The record at ``offset``.

        Raises:
            OffsetOutOfRangeError: no record has that offset.
            CorruptRecordError: the batch holding it fails validation.
        """
        self._check_range(offset)
        self.check_readable(offset)
        segment = self.segment_for(offset)
        found = segment.find(offset) if segment else None
        if found is not None and not found[1].is_control:
            record = record_at(found[2], found[1], offset)
            if record is not None:
                return record
        raise OffsetOutOfRangeError(
            f"no record at offset {offset} of {self.topic}-{self.partition}"
        )

    def batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """Decoded data batches overlapping [start, end); the first and last
        may hold records outside the range. Control batches are skipped."""
        for header, batch in self.raw_batches(start, end):
            if not header.is_control:
                yield header, decode_records(batch, header)

    def raw_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """CRC-checked batches overlapping [start, end), still encoded."""
        start = self.log_start_offset if start is None else max(start, self.log_start_offset)
        end = self.next_offset if end is None else min(end, self.next_offset)
        if start >= end:
            return
        self.check_readable(end - 1)
        first = max(0, bisect.bisect_right(self._bases, start) - 1)
        for segment in list(self.segments[first:]):
            if segment.base_offset >= end:
                return
            found = segment.find(start) if segment.base_offset <= start else None
            position = found[0] if found else 0
            if found is None and segment.base_offset <= start:
                continue
            for _, header, batch in segment.batches(position):
                if header.base_offset >= end:
                    return
                if header.last_offset >= start:
                    yield header, batch

    def scan(self, start: int | None = None, end: int | None = None) -> Iterator[Record]:
        """Records from ``start`` (default: the log start) up to ``end``."""
        low = self.log_start_offset if start is None else start
        high = self.next_offset if end is None else end
        for _, records in self.batches(low, high):
            for record in records:
                if low <= record.offset < high:
                    yield record

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is >= ``timestamp_ms`` (Kafka's
        offsetsForTimes), or None when every record is older."""
        for segment in list(self.segments):
            if segment.max_timestamp < timestamp_ms:
                continue
            found = segment.first_batch_at_time(timestamp_ms)
            if found is None:
                continue
            _, header, batch = found
            for record in decode_records(batch, header):
                if record.timestamp >= timestamp_ms and record.offset >= self.log_start_offset:
                    return record.offset
        return None

    # ------------------------------------------------------------ the stream

    @property
    def stream(self) -> lines.PartitionStream:
        """The records as lines, as the mount's ``stream`` shows them (lines.py)."""
        return lines.PartitionStream(self)

    # ------------------------------------------------------------ flushing

    def flush_due(self, now: int | None = None) -> bool:
        return self.failure is None and flush_due(
            self.config,
            unflushed=self.unflushed_messages,
            last_flush_ms=self.last_flush_ms,
            now_ms=self.clock() if now is None else now,
        )

    def prepare_flush(self) -> FlushTicket:
        """Write pending index entries and duplicate the fds to fsync, so the
        fsyncs can run in a thread while appends go on.

        Raises:
            LogFailedError: the partition is offline.
            OSError: writing the index entries failed (the partition goes
                offline unless the error is a clean ENOSPC).
        """
        self._require_online()
        segments = tuple(self._dirty.values())
        fds: list[int] = []
        try:
            for segment in segments:
                fds += [os.dup(fd) for fd in segment.sync_fds()]
            if self._dir_dirty:
                fds.append(os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY))
        except OSError as e:
            for fd in fds:
                os.close(fd)
            if e.errno not in CLEAN_WRITE_ERRORS:
                self.fail("writing an index before an fsync", e)
            raise
        ticket = FlushTicket(fds, self.next_offset, self.unflushed_messages)
        self._dirty.clear()
        self._dir_dirty = False
        return ticket

    def abort_flush(self, error: OSError) -> None:
        """A flush's fsync failed: the partition goes offline. Retrying is
        no use: the kernel may have dropped the pages it could not write, and
        a second fsync would then succeed without writing them."""
        self.fail("fsync", error)

    def complete_flush(self, ticket: FlushTicket) -> None:
        """Advance the recovery point to what the ticket made durable.

        Raises:
            LogFailedError: the partition went offline meanwhile; the recovery
                point stays where it was.
        """
        self._require_online()
        self.recovery_point = max(self.recovery_point, ticket.next_offset)
        self.unflushed_messages = max(0, self.unflushed_messages - ticket.messages)
        self.last_flush_ms = self.clock()

    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point."""
        ticket = self.prepare_flush()
        try:
            for fd in ticket.fds:
                sync_fd(fd)
        except OSError as e:
            self.abort_flush(e)
            raise
        finally:
            for fd in ticket.fds:
                os.close(fd)
        self.complete_flush(ticket)

    # ------------------------------------------------------------ retention

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole non-active segments past retention.ms or beyond
        retention.bytes, oldest first (`segments_to_delete` decides); returns
        how many were deleted."""
        if not self.writable or self.failure is not None or not self.config.delete:
            return 0
        count = segments_to_delete(
            self.config,
            sizes=[s.size for s in self.segments],
            max_timestamps=[s.max_timestamp for s in self.segments],
            now_ms=self.clock() if now_ms is None else now_ms,
        )
        for _ in range(count):
            oldest = self.segments.pop(0)
            self._bases.pop(0)
            self._dirty.pop(oldest.base_offset, None)
            self.log_start_offset = max(self.log_start_offset, self._bases[0])
            try:
                oldest.delete()
            except OSError as e:
                self.fail(f"deleting segment {oldest.base_offset} (retention)", e)
                raise
        if count:
            self._dir_dirty = True
            self._live_keys = None  # some keys' latest records may be gone: rebuilt on use
        return count

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        if self.writable and self.segments and self.failure is None:
            self.flush()
        for segment in self.segments:
            try:
                segment.close()
            except OSError as e:  # pending index entries: rebuilt by the next recovery
                if self.failure is None:
                    raise
                logger.warning("closing offline %s: %s", self, e)
        self.segments.clear()
        self._bases.clear()

    def delete(self) -> None:
        """Remove the partition directory (renamed aside first, as Kafka does)."""
        for segment in self.segments:
            segment.close()
        self.segments.clear()
        self._bases.clear()
        aside = self.dir.with_name(f"{self.dir.name}.{os.getpid()}-{time.time_ns()}-delete")
        os.rename(self.dir, aside)
        shutil.rmtree(aside, ignore_errors=True)
