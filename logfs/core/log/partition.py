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
takes the partition offline (`fail`, failure.py): its recovery point never
moves again and only records below it are served.

Its collaborators: `Unflushed` and `FlushTicket` (flushing.py) for what is not
durable yet, `Failure` for the offline state, `LiveKeys` (keys.py) for a
compacted partition's keys.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..config import TopicConfig, now_ms, segments_to_delete, should_roll
from ..errors import InvalidRecordError, OffsetOutOfRangeError, PolicyViolationError, ReadOnlyError
from ..format import batching, compression, validate
from ..format.batching import BatchInfo
from ..storage import preallocate
from ..storage.recovery import load_segments
from ..storage.segment import LogSegment
from .delayed import DelayedRemoval
from .epochs import LeaderEpochs
from .failure import CLEAN_WRITE_ERRORS, Failure
from .flushing import LogFlushing, Unflushed
from .keys import LiveKeys
from .reads import LogReads
from .timestamps import check_timestamps

logger = logging.getLogger(__name__)


def _age(now: int, segment: LogSegment, pending: list[tuple[bytes, BatchInfo]]) -> int:
    """The age segment.ms compares, as Kafka counts it: from the segment's first
    batch's timestamp, which may be the first of the ``pending`` batches of this
    append (the segment is empty yet)."""
    if segment.size:
        return now - segment.first_timestamp
    return now - pending[0][1].max_timestamp


class Log(LogReads, LogFlushing):
    """A topic-partition's segments, appends, flushes and retention; its
    reads are `LogReads`'.

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
        self._unflushed = Unflushed(clock())
        self._failure = Failure(f"{topic}-{partition}")
        self._keys = LiveKeys()
        self._removal = DelayedRemoval(self.dir)  # file.delete.delay.ms (delayed.py)
        self._epochs = LeaderEpochs(self.dir)  # leader-epoch-checkpoint (epochs.py)
        self.truncated_bytes = 0
        self.recovery_point = 0
        self.rewrites = 0  # cleanings swapped in: stream positions before them are stale
        self._load(recovery_point, log_start_offset)

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, {self.log_start_offset}..{self.next_offset})"

    # ------------------------------------------------------------ loading and recovery

    def _load(self, recovery_point: int, log_start_offset: int) -> None:
        loaded = load_segments(self.dir, self.config, recovery_point, writable=self.writable)
        for segment in loaded.segments:
            self._add_segment(segment)
        self.truncated_bytes = loaded.truncated_bytes
        self._unflushed.directory = loaded.deleted_files
        if not self.segments and self.writable:
            self._add_segment(self._new_segment(log_start_offset))
            self._unflushed.directory = True
        # Retention moves the log start; cleaning does not, though it may leave
        # nothing of the first segments (Kafka's compacted logs start at 0).
        first_base = self._bases[0] if self._bases and not self.config.compact else 0
        self.log_start_offset = max(log_start_offset, first_base)
        self.log_start_offset = min(self.log_start_offset, self.next_offset)
        self.recovery_point = min(recovery_point, self.next_offset)
        self._epochs.load(self.log_start_offset, self.writable)
        if self.writable:
            self._removal.found(self.clock())
            # What recovery validated past the recovery point may still be only in
            # the page cache (a process crash): make it durable before trusting it.
            for segment in self.segments[loaded.first_recovered :]:
                if segment.next_offset > recovery_point or self.truncated_bytes:
                    self._unflushed.appended(segment)
            with contextlib.suppress(OSError):  # if so, it opens offline (`fail` logged why)
                self.flush()  # advances the recovery point to next_offset

    def fail(self, action: str, error: OSError) -> None:
        """Take the partition offline after ``error`` while ``action`` (the
        first cause is kept and logged once)."""
        self._failure.fail(action, error, self.recovery_point)

    def set_config(self, config: TopicConfig) -> None:
        """Apply a changed topic configuration from the next append on."""
        self.config = config
        for segment in self.segments:
            segment.config = config

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
            ReadOnlyError: the log was opened read-only.
            LogFailedError: the partition is offline.
            InvalidRecordError: a compacted partition's record without a key.
            RecordTooLargeError: a single record does not fit max.message.bytes.
        """
        first = self._start_append()
        if not values:
            return first
        if self.config.compact and (keys is None or None in keys):
            raise self._keys_required()
        now = self.clock()
        timestamp, timestamp_type = batching.timestamp_for(self.config, timestamp, now)
        encoded = batching.encode_values(
            self.config, first, values, keys, headers, timestamp, timestamp_type
        )
        self._write(encoded, len(values), now)
        return first

    def append_packed(self, packed: bytes | memoryview, lengths: np.ndarray) -> int:
        """Append keyless, headerless records given packed: each value followed by
        one separator byte (lines with their ``\\n``); ``lengths`` are the values'.

        Same result and errors as ``append`` of the values, without making a
        Python object per record. Returns the offset of the first.
        """
        first = self._start_append()
        if not len(lengths):
            return first
        if self.config.compact:
            raise self._keys_required()
        encoded = None
        codec = compression.BY_NAME[self.config.compression_type]
        if codec == compression.NONE and len(lengths) >= batching.PACKED_MIN:
            now = self.clock()
            timestamp, timestamp_type = batching.timestamp_for(self.config, None, now)
            encoded = batching.encode_packed(
                self.config, first, packed, lengths, timestamp, timestamp_type
            )
        if encoded is None:  # the general encoder: compressed, few, or near the size limit
            values, pos = [], 0
            for length in lengths.tolist():
                values.append(bytes(packed[pos : pos + length]))
                pos += length + 1
            return self.append(values)
        self._write(encoded, len(lengths), now)
        return first

    def append_batches(
        self, batches: Sequence[bytes | memoryview], buffer: bytearray | memoryview | None = None
    ) -> int:
        """Append whole RecordBatch v2 batches a producer built, checked and given
        their offsets as Kafka's broker does (validate.py): all are checked
        before any is appended. Returns the offset of the first record.

        ``buffer``: a writable buffer holding exactly ``batches`` back to back,
        which the caller gives up: they are patched and written from there
        instead of from a copy (the Kafka listener's received requests).

        Raises:
            ReadOnlyError: the log was opened read-only.
            LogFailedError: the partition is offline.
            InvalidBatchError: a batch Kafka would refuse; `BatchTooLargeError`
                (a RecordTooLargeError too) for one over max.message.bytes.
            InvalidTimestampError: a record's timestamp out of the topic's bounds
                (timestamps.py).
        """
        first = self._start_append()
        now = self.clock()
        encoded, count = validate.prepare_batches(batches, self.config, first, now, buffer)
        check_timestamps(self.config, encoded, now)
        if encoded:
            self._write(encoded, count, now)
        return first

    def _start_append(self) -> int:
        """The guards every append passes first, in this order; returns the
        offset the append starts at."""
        if not self.writable:
            raise ReadOnlyError(f"{self.topic}-{self.partition} is read-only")
        self._failure.require_online()
        return self.next_offset

    def _keys_required(self) -> InvalidRecordError:
        return InvalidRecordError(
            f"{self.topic}-{self.partition} is compacted (cleanup.policy="
            f"{self.config.cleanup_policy}): every record needs a key"
        )

    def _write(self, encoded: list[tuple[bytes, BatchInfo]], records: int, now: int) -> None:
        """Write encoded batches, rolling where `should_roll` says, each
        segment's share in one write; ``records``: how many they hold."""
        try:
            start, segment = 0, self.active_segment
            # what the rule looks at changes only when the segment is written, below
            size, full = segment.size, segment.index_full
            for i, (_, info) in enumerate(encoded):
                if should_roll(
                    self.config,
                    segment_size=size,
                    batch_size=info.size,
                    segment_age_ms=_age(now, segment, encoded[start:i]) if size else 0,
                    index_full=full,
                    relative_offset_overflow=not segment.can_hold(info.last_offset),
                ):
                    self._write_to_active(encoded[start:i])
                    segment = self.roll()
                    start, size, full = i, 0, segment.index_full
                size += info.size
            self._write_to_active(encoded[start:])
        except OSError as e:
            if e.errno not in CLEAN_WRITE_ERRORS:
                self.fail("appending to a segment", e)
            raise
        self._unflushed.messages += records
        self._keys.appended(batch for batch, _ in encoded)

    def _write_to_active(self, encoded: list[tuple[bytes, BatchInfo]]) -> None:
        if encoded:
            segment = self.active_segment
            segment.append([b for b, _ in encoded], [info for _, info in encoded])
            self._unflushed.appended(segment)

    def _new_segment(self, base_offset: int) -> LogSegment:
        """A new active segment, its space reserved whole with ``preallocate``."""
        segment = LogSegment(str(self.dir), base_offset, self.config, writable=True)
        if self.config.preallocate and segment.size == 0:
            preallocate.reserve(segment.fileno(), self.config.segment_bytes)
        return segment

    def replace_segments(self, old: list[LogSegment], new: LogSegment | None) -> None:
        """Put ``new`` (a cleaned segment, or nothing) where the consecutive
        segments ``old`` were (their files are swapped already: storage/swap.py)."""
        i = self.segments.index(old[0])
        if self.segments[i : i + len(old)] != old:
            raise ValueError("the segments to replace are not consecutive in the log")
        self.segments[i : i + len(old)] = [] if new is None else [new]
        self._bases = [s.base_offset for s in self.segments]
        for segment in old:
            self._unflushed.forget(segment)
        self.rewrites += 1

    def roll(self) -> LogSegment:
        """Close the active segment to appends and start one at next_offset."""
        active = self.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        if self.config.preallocate:
            preallocate.release(active.fileno(), active.size)
        segment = self._new_segment(self.next_offset)
        self._add_segment(segment)
        self._unflushed.directory = True
        return segment

    # ------------------------------------------------------------ retention

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole non-active segments past retention.ms or beyond
        retention.bytes, oldest first (`segments_to_delete` decides); returns
        how many were deleted. Files deleted earlier whose file.delete.delay.ms
        has passed go from the disk now."""
        now = self.clock() if now_ms is None else now_ms
        if self.writable:
            self._removal.remove_due(now)
        if not self.writable or self.failure is not None or not self.config.delete:
            return 0
        count = segments_to_delete(
            self.config,
            sizes=[s.size for s in self.segments],
            max_timestamps=[s.largest_timestamp for s in self.segments],
            now_ms=now,
        )
        self._drop_oldest(count, "retention", now)
        return count

    def delete_records(self, offset: int) -> int:
        """Kafka's DeleteRecords: the log starts at ``offset`` (-1: the log end) from now
        on, the segments wholly below it are deleted; never moves it back. Returns the log
        start offset, which the caller checkpoints (``log-start-offset-checkpoint``).

        Raises:
            ReadOnlyError, LogFailedError: as an append.
            OffsetOutOfRangeError: ``offset`` is past the log end.
            PolicyViolationError: the topic's cleanup.policy has no ``delete``.
        """
        self._start_append()
        if not self.config.delete:
            why = f"Records of partition {self.topic}-{self.partition} can not be deleted"
            raise PolicyViolationError(f"{why} due to the configured policy")
        offset = self.next_offset if offset == -1 else offset
        if not 0 <= offset <= self.next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is past the end ({self.next_offset}) of "
                f"{self.topic}-{self.partition}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            below = sum(1 for s in self.segments[1:] if s.base_offset <= offset)
            self._drop_oldest(below, "records deleted", self.clock())
            self._keys.drop()
            self._epochs.start_moved(offset)
        return self.log_start_offset

    def _drop_oldest(self, count: int, why: str, now: int) -> None:
        """Take the ``count`` oldest segments out of the log; their files go after
        file.delete.delay.ms (delayed.py)."""
        for _ in range(count):
            oldest = self.segments.pop(0)
            self._bases.pop(0)
            self._unflushed.forget(oldest)
            self.log_start_offset = max(self.log_start_offset, self._bases[0])
            try:
                self._removal.remove(oldest, self.config.file_delete_delay_ms, now)
            except OSError as e:
                self.fail(f"deleting segment {oldest.base_offset} ({why})", e)
                raise
        if count:
            self._unflushed.directory = True
            self._keys.drop()  # some keys' latest records may be gone: rebuilt on use
            self._epochs.start_moved(self.log_start_offset)

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

    def abandon(self) -> None:
        """Close the segments without writing anything: the partition's
        directory is being removed (`Store.delete_topic`)."""
        for segment in self.segments:
            segment.close(write=False)
        self.segments.clear()
        self._bases.clear()
