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

`Log` is built of parts over one `PartitionState` (state.py), which it makes
and hands to each: `LogReads` (reads.py), `LogAppends` (appends.py),
`LineWriter` (the one-line fast path, _line.pyx) and `LogFlushing`
(flushing.py). Here are what is the whole log's — loading, configuration,
retention, the cleaner's swaps, closing — and the log's public names, each
given to the part that does it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..config import TopicConfig, now_ms, segments_to_delete
from ..errors import OffsetOutOfRangeError, PolicyViolationError
from ..format.record import BatchHeader, Record
from ..storage import LogSegment
from ..storage.recovery import load_segments
from . import lines
from ._line import LineWriter
from .appends import LogAppends
from .flushing import LogFlushing
from .reads import LogReads
from .state import PartitionState
from .unflushed import FlushTicket

logger = logging.getLogger(__name__)


class Log:
    """A topic-partition's segments, appends, flushes and retention.

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
        state = PartitionState(directory, topic, partition, config, writable=writable, clock=clock)
        self._state = state
        self._reads = LogReads(state)
        self._appends = LogAppends(state)
        self._lines = LineWriter(state)
        self._flushing = LogFlushing(state)
        self._load(recovery_point, log_start_offset)

    def __repr__(self) -> str:
        return f"Log({self._state.name}, {self.log_start_offset}..{self.next_offset})"

    # ------------------------------------------------------------ loading and recovery

    def _load(self, recovery_point: int, log_start_offset: int) -> None:
        state = self._state
        loaded = load_segments(
            state.dir, state.config, recovery_point, writable=state.writable,
            created_ms=state.clock(),
        )  # fmt: skip
        for segment in loaded.segments:
            state.add_segment(segment)
        state.truncated_bytes = loaded.truncated_bytes
        if loaded.deleted_files:
            state.unflushed.directory_changed()
        if not state.segments and state.writable:
            state.add_segment(state.new_segment(log_start_offset))
            state.unflushed.directory_changed()
        # Retention moves the log start; cleaning does not, though it may leave
        # nothing of the first segments (Kafka's compacted logs start at 0).
        first_base = state.bases[0] if state.bases and not state.config.compact else 0
        state.log_start_offset = max(log_start_offset, first_base)
        state.log_start_offset = min(state.log_start_offset, state.next_offset)
        state.recovery_point = min(recovery_point, state.next_offset)
        state.epochs.load(state.log_start_offset, state.writable)
        if state.writable:
            state.removal.found(state.clock())
            # What recovery validated past the recovery point may still be only in
            # the page cache (a process crash): make it durable before trusting it.
            for segment in state.segments[loaded.first_recovered :]:
                if segment.next_offset > recovery_point or state.truncated_bytes:
                    state.unflushed.appended(segment)
            with contextlib.suppress(OSError):  # if so, it opens offline (`fail` logged why)
                self.flush()  # advances the recovery point to next_offset

    def fail(self, action: str, error: OSError) -> None:
        """Take the partition offline after ``error`` while ``action`` (the
        first cause is kept and logged once)."""
        self._state.fail(action, error)

    def set_config(self, config: TopicConfig) -> None:
        """Apply a changed topic configuration from the next append on."""
        self._state.config = config
        for segment in self._state.segments:
            segment.config = config

    # ------------------------------------------------------------ what the log is

    @property
    def dir(self) -> Path:
        return self._state.dir

    @property
    def topic(self) -> str:
        return self._state.topic

    @property
    def partition(self) -> int:
        return self._state.partition

    @property
    def config(self) -> TopicConfig:
        return self._state.config

    @property
    def writable(self) -> bool:
        return self._state.writable

    @property
    def clock(self) -> Callable[[], int]:
        """The log's clock, in milliseconds."""
        return self._state.clock

    @clock.setter
    def clock(self, clock: Callable[[], int]) -> None:
        self._state.clock = clock

    @property
    def segments(self) -> list[LogSegment]:
        """The segments in offset order, the active one last (for core's tools)."""
        return self._state.segments

    @property
    def log_start_offset(self) -> int:
        return self._state.log_start_offset

    @log_start_offset.setter
    def log_start_offset(self, offset: int) -> None:
        self._state.log_start_offset = offset

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets (Kafka's log end offset)."""
        return self._state.next_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is durable."""
        return self._state.recovery_point

    @property
    def truncated_bytes(self) -> int:
        """What recovery cut when the log was opened."""
        return self._state.truncated_bytes

    @property
    def rewrites(self) -> int:
        """Cleanings swapped in: stream positions from before them are stale."""
        return self._state.rewrites

    @property
    def failure(self) -> str | None:
        """Why the partition is offline; None while it is online."""
        return self._state.failure.reason

    @property
    def active_segment(self) -> LogSegment:
        return self._state.active_segment

    @property
    def segment_count(self) -> int:
        return len(self._state.segments)

    # ------------------------------------------------------------ reads (reads.py)

    @property
    def active_base_offset(self) -> int | None:
        return self._reads.active_base_offset

    @property
    def size_bytes(self) -> int:
        return self._reads.size_bytes

    def segment_files(self) -> dict[str, str]:
        return self._reads.segment_files()

    def check_readable(self, offset: int) -> None:
        self._reads.check_readable(offset)

    def segment_for(self, offset: int) -> LogSegment | None:
        return self._reads.segment_for(offset)

    def read(self, offset: int) -> Record:
        return self._reads.read(offset)

    def batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, list[Record]]]:
        return self._reads.batches(start, end)

    def raw_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        return self._reads.raw_batches(start, end)

    def scan(self, start: int | None = None, end: int | None = None) -> Iterator[Record]:
        return self._reads.scan(start, end)

    def file_region(
        self, offset: int, max_bytes: int, *, min_one_batch: bool = True
    ) -> tuple[int, int, int] | None:
        return self._reads.file_region(offset, max_bytes, min_one_batch=min_one_batch)

    @property
    def leader_epoch(self) -> int:
        return self._reads.leader_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._reads.end_offset_for_epoch(epoch)

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        return self._reads.offset_for_time(timestamp_ms)

    def live_keys(self, *, watch: bool = False) -> dict[bytes, int]:
        return self._reads.live_keys(watch=watch)

    def take_changed_keys(self) -> set[bytes]:
        return self._reads.take_changed_keys()

    @property
    def stream(self) -> lines.PartitionStream:
        """The records as lines, as the mount's ``stream`` shows them (lines.py)."""
        return lines.PartitionStream(self)

    # ------------------------------------------------------------ appends (appends.py, _line.pyx)

    def append(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        timestamp: int | Sequence[int] | None = None,
    ) -> int:
        return self._appends.append(values, keys=keys, headers=headers, timestamp=timestamp)

    def append_packed(self, packed: bytes | memoryview, lengths: np.ndarray) -> int:
        return self._appends.append_packed(packed, lengths)

    def append_batches(
        self, batches: Sequence[bytes | memoryview], buffer: bytearray | memoryview | None = None
    ) -> int:
        return self._appends.append_batches(batches, buffer)

    def write_line(self, data: bytes, length: int):
        """The one-line fast path's write (`LineWriter.write`): a `LineWrite`
        to finish before anything else touches the log, or None."""
        return self._lines.write(data, length)

    def append_line(self, value: bytes) -> int | None:
        """`write_line` of ``value`` and its books at once: its offset, or None
        and nothing appended (`Log.append` decides then)."""
        return self._lines.append(value)

    def roll(self) -> LogSegment:
        return self._appends.roll()

    # ------------------------------------------------------------ flushes (flushing.py)

    @property
    def unflushed_messages(self) -> int:
        return self._flushing.unflushed_messages

    @property
    def flush_failure(self) -> str | None:
        return self._flushing.flush_failure

    @property
    def last_flush_ms(self) -> int:
        return self._flushing.last_flush_ms

    def flush_messages_reached(self, more: int = 0) -> bool:
        return self._flushing.flush_messages_reached(more)

    def flush_due(self, now: int | None = None) -> bool:
        return self._flushing.flush_due(now)

    def prepare_flush(self) -> FlushTicket:
        return self._flushing.prepare_flush()

    def complete_flush(self, ticket: FlushTicket) -> None:
        self._flushing.complete_flush(ticket)

    def flush(self) -> None:
        self._flushing.flush()

    # ------------------------------------------------------------ the cleaner, retention

    def replace_segments(self, old: list[LogSegment], new: LogSegment | None) -> None:
        """Put ``new`` (a cleaned segment, or nothing) where the consecutive
        segments ``old`` were (their files are swapped already: storage/swap.py)."""
        self._state.replace_segments(old, new)
        self._state.rewrites += 1

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole non-active segments past retention.ms or beyond
        retention.bytes, oldest first (`segments_to_delete` decides); returns
        how many were deleted. Files deleted earlier whose file.delete.delay.ms
        has passed go from the disk now."""
        state = self._state
        now = state.clock() if now_ms is None else now_ms
        if state.writable:
            state.removal.remove_due(now)
        if not state.writable or state.failure.reason is not None or not state.config.delete:
            return 0
        count = segments_to_delete(
            state.config,
            sizes=[s.size for s in state.segments],
            max_timestamps=[s.largest_timestamp for s in state.segments],
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
        state = self._state
        state.require_appendable()
        if not state.config.delete:
            why = f"Records of partition {state.name} can not be deleted"
            raise PolicyViolationError(f"{why} due to the configured policy")
        offset = state.next_offset if offset == -1 else offset
        if not 0 <= offset <= state.next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is past the end ({state.next_offset}) of {state.name}"
            )
        if offset > state.log_start_offset:
            state.log_start_offset = offset
            below = sum(1 for s in state.segments[1:] if s.base_offset <= offset)
            self._drop_oldest(below, "records deleted", state.clock())
            state.keys.drop()
            state.epochs.start_moved(offset)
        return state.log_start_offset

    def _drop_oldest(self, count: int, why: str, now: int) -> None:
        """Take the ``count`` oldest segments out of the log; their files go after
        file.delete.delay.ms (delayed.py)."""
        state = self._state
        for _ in range(count):
            oldest = state.remove_oldest()
            state.log_start_offset = max(state.log_start_offset, state.bases[0])
            try:
                state.removal.remove(oldest, state.config.file_delete_delay_ms, now)
            except OSError as e:
                state.fail(f"deleting segment {oldest.base_offset} ({why})", e)
                raise
        if count:
            state.unflushed.directory_changed()
            state.keys.drop()  # some keys' latest records may be gone: rebuilt on use
            state.epochs.start_moved(state.log_start_offset)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        state = self._state
        if state.writable and state.segments and state.failure.reason is None:
            self.flush()
        for segment in state.segments:
            try:
                segment.close()
            except OSError as e:  # pending index entries: rebuilt by the next recovery
                if state.failure.reason is None:
                    raise
                logger.warning("closing offline %s: %s", self, e)
        state.clear_segments()

    def abandon(self) -> None:
        """Close the segments without writing anything: the partition's
        directory is being removed (`Store.delete_topic`)."""
        for segment in self._state.segments:
            segment.close(write=False)
        self._state.clear_segments()
