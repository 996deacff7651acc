"""One topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

The last segment is the active one; appends go there until the roll rule
(`LogSegment.should_roll`, Kafka's) says to start a new one at the next
offset. Offsets are dense from the log start offset to ``next_offset``,
except where the cleaner removed records from a compacted topic (cleaner.py):
reads treat a gap like an offset out of range.

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

from ..config import TopicConfig, now_ms, segments_to_delete
from ..errors import InvalidRecordError, ReadOnlyError
from ..format import batching, compression, validate
from ..format.batching import BatchInfo
from ..format.record import NO_TIMESTAMP
from ..storage.recovery import load_segments
from ..storage.segment import LogSegment
from .failure import CLEAN_WRITE_ERRORS, Failure
from .flushing import LogFlushing, Unflushed
from .keys import LiveKeys
from .reads import LogReads

logger = logging.getLogger(__name__)


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
        self.truncated_bytes = 0
        self.recovery_point = 0
        self.rewrites = 0  # cleanings swapped in: stream positions before them are stale
        self._load(recovery_point, log_start_offset)

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, {self.log_start_offset}..{self.next_offset})"

    # ------------------------------------------------------------ loading and recovery

    def _load(self, recovery_point: int, log_start_offset: int) -> None:
        loaded = load_segments(
            self.dir, self.config, recovery_point, writable=self.writable, created_ms=self.clock()
        )
        for segment in loaded.segments:
            self._add_segment(segment)
        self.truncated_bytes = loaded.truncated_bytes
        self._unflushed.directory = loaded.deleted_files
        if not self.segments and self.writable:
            self._add_segment(
                LogSegment(
                    str(self.dir),
                    log_start_offset,
                    self.config,
                    writable=True,
                    created_ms=self.clock(),
                )
            )
            self._unflushed.directory = True
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
        """
        first = self._start_append()
        now = self.clock()
        encoded, count = validate.prepare_batches(batches, self.config, first, now, buffer)
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
        """Write encoded batches, rolling where the roll rule says, each
        segment's share in one write; ``records``: how many they hold."""
        try:
            start, pending, segment = 0, 0, self.active_segment
            for i, (_, info) in enumerate(encoded):
                # the batches of this segment's share count as written for the rule
                first = encoded[start][1].max_timestamp if pending else NO_TIMESTAMP
                if segment.should_roll(info, now, pending, first):
                    self._write_to_active(encoded[start:i])
                    segment = self.roll()
                    start, pending = i, 0
                pending += info.size
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
        segment = LogSegment(
            str(self.dir), self.next_offset, self.config, writable=True, created_ms=self.clock()
        )
        self._add_segment(segment)
        self._unflushed.directory = True
        return segment

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
            max_timestamps=[s.largest_timestamp for s in self.segments],
            now_ms=self.clock() if now_ms is None else now_ms,
        )
        for _ in range(count):
            oldest = self.segments.pop(0)
            self._bases.pop(0)
            self._unflushed.forget(oldest)
            self.log_start_offset = max(self.log_start_offset, self._bases[0])
            try:
                oldest.delete()
            except OSError as e:
                self.fail(f"deleting segment {oldest.base_offset} (retention)", e)
                raise
        if count:
            self._unflushed.directory = True
            self._keys.drop()  # some keys' latest records may be gone: rebuilt on use
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

    def abandon(self) -> None:
        """Close the segments without writing anything: the partition's
        directory is being removed (`Store.delete_topic`)."""
        for segment in self.segments:
            segment.close(write=False)
        self.segments.clear()
        self._bases.clear()
