"""One topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

The last segment is the active one; appends go there until the roll rule
(`LogSegment.should_roll`, Kafka's) says to start a new one at the next offset.
Offsets are dense from the log start offset to ``next_offset``, but for the gaps the
cleaner leaves (cleaner.py: read like offsets out of range) and those segments lost
from outside leave (loading.py: read like damage, their offsets never reused).

Durability: everything below ``recovery_point`` was fsynced. Opening a log validates
every batch from there (recovery.py), cuts the first bad one and all after it.
Failure: an I/O error that leaves its files unknown takes the partition offline
(`fail`, failure.py): its recovery point never moves again; reads stay below it.

`Log` is built of parts over one `PartitionState` (state.py), which it makes and
hands to each: `LogReads` (reads.py), `LogAppends` (appends.py), `LineWriter` (the
one-line fast path, _line.pyx), `LogFlushing` (flushing.py) and `LogTransactions`
(producers, markers, the last stable offset: transactions.py). Here: the whole
log's work (loading, settings, retention, swaps, closing) and its public names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from ..config import TopicConfig, now_ms
from ..format.record import BatchHeader, Record, idempotent
from ..storage import LogSegment
from ..storage.txnindex import AbortedTxn
from . import lines, retention
from ._line import LineWriter
from .appends import LogAppends
from .flushing import LogFlushing
from .following import LogFollowing
from .isolation import TxnSummary, Visibility
from .loading import load_log
from .producer_state import PRODUCER_ID_EXPIRATION_MS, ProducerEntry
from .reads import LogReads
from .snapshots import take_snapshot
from .state import PartitionState
from .transactions import LogTransactions
from .unflushed import FlushTicket

logger = logging.getLogger(__name__)


class Log:
    """A topic-partition's segments, appends, flushes and retention.

    Callers outside core (the mount) use its methods, never its segments:
    ``segment_names``, ``segment_file``, and ``stream`` for the records as lines."""

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
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        handed_out: int = 0,  # offsets below it were handed out, whatever is validated
    ) -> None:
        state = PartitionState(
            directory, topic, partition, config, writable=writable, clock=clock,
            producer_id_expiration_ms=producer_id_expiration_ms,
        )  # fmt: skip
        self._state = state
        self._reads = LogReads(state)
        self._appends = LogAppends(state)
        # The one-line fast path (_line.pyx), which the mount's compiled take of a line calls
        # in C; `write_line(data, length)`: its write from Python, a `LineWrite` to finish
        # before anything else touches the log, or None; `write_next_line`: a row's next.
        self.line_writer = LineWriter(state)
        self.write_line = self.line_writer.write
        self.write_next_line = self.line_writer.write_next
        self._flushing = LogFlushing(state)
        self._txn = LogTransactions(state, self._appends)
        self._following = LogFollowing(state, self._appends, self._txn)
        load_log(state, recovery_point, log_start_offset, handed_out, self._flushing, self._txn)

    def __repr__(self) -> str:
        return f"Log({self._state.name}, {self.log_start_offset}..{self.next_offset})"

    # ------------------------------------------------------------ loading and recovery

    def fail(self, action: str, error: OSError) -> None:
        """Offline after ``error`` while ``action`` (the first cause is kept)."""
        self._state.fail(action, error)

    def check_files(self) -> bool:  # the active segment's file still there (flushing.py)
        return self._flushing.check_files()

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
    def clock(self) -> Callable[[], int]:  # the log's clock, in milliseconds
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
    def next_offset(self) -> int:  # the offset the next record gets (Kafka's log end offset)
        return self._state.next_offset

    @property
    def recovery_point(self) -> int:  # everything below it is durable
        return self._state.recovery_point

    @property
    def truncated_bytes(self) -> int:  # what recovery cut when the log was opened
        return self._state.truncated_bytes

    @property
    def rewrites(self) -> int:  # cleanings swapped in: stream positions before them are stale
        return self._state.rewrites

    @property
    def failure(self) -> str | None:  # why the partition is offline; None while online
        return self._state.failure.reason

    @property
    def following(self) -> LogFollowing:
        """The follower's part: a copy of a cluster's partition (following.py)."""
        return self._following

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

    def segment_names(self) -> list[str]:
        return self._reads.segment_names()

    def segment_file(self, name: str) -> str | None:
        return self._reads.segment_file(name)

    def check_readable(self, offset: int) -> None:
        self._reads.check_readable(offset)

    def segment_for(self, offset: int) -> LogSegment | None:
        return self._reads.segment_for(offset)

    # Reads with ``committed`` see what a ``read_committed`` Kafka consumer sees (isolation.py).

    def read(self, offset: int, *, committed: bool = False) -> Record:
        view = self._txn.visibility(offset, offset + 1) if committed else None
        return self._reads.read(offset, view)

    def batches(
        self, start: int | None = None, end: int | None = None, *, committed: bool = False
    ) -> Iterator[tuple[BatchHeader, list[Record]]]:
        view = self.visibility(start, end) if committed else None
        return self._reads.batches(start, end, view)

    def raw_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        return self._reads.raw_batches(start, end)

    def scan(
        self, start: int | None = None, end: int | None = None, *, committed: bool = False
    ) -> Iterator[Record]:
        view = self.visibility(start, end) if committed else None
        return self._reads.scan(start, end, view)

    def file_region(
        self,
        offset: int,
        max_bytes: int,
        end: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> tuple[int, int, int] | None:
        return self._reads.file_region(offset, max_bytes, end, min_one_batch=min_one_batch)

    @property
    def leader_epoch(self) -> int:
        return self._reads.leader_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._reads.end_offset_for_epoch(epoch)

    def offset_for_time(self, timestamp_ms: int, *, committed: bool = False) -> int | None:
        view = self.visibility(None) if committed else None
        return self._reads.offset_for_time(timestamp_ms, view)

    def max_timestamp_offset(self) -> tuple[int, int]:
        return self._reads.max_timestamp_offset()

    # ------------------------------------------------------------ transactions (transactions.py)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the log end."""
        return self._txn.last_stable_offset

    def visibility(self, start: int | None, end: int | None = None) -> Visibility:
        """What a ``read_committed`` reader of [start, end) sees (isolation.py)."""
        return self._txn.visibility(self.log_start_offset if start is None else start, end)

    @property
    def loaded_stable_offset(self) -> int:
        """The LSO when the log was opened if a transaction was open then, else -1:
        the stream's count of what was on disk stops there (lines.py)."""
        return self._state.held_at_open

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        return self._txn.aborted(start, end)

    def open_transactions(self) -> list[TxnSummary]:
        return self._txn.open_transactions()

    def producer_entries(self) -> dict[int, ProducerEntry]:
        """The producers this partition knows (DescribeProducers), by id."""
        return dict(self._txn.producers.producers)

    def append_marker(
        self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        return self._txn.append_marker(producer_id, epoch, commit, coordinator_epoch)

    def live_keys(self, *, watch: bool = False) -> dict[bytes, int]:
        """The live keys of committed records (keys.py, isolation.py)."""
        return self._reads.live_keys(watch=watch, view=self.visibility(None))

    def take_changed_keys(self) -> set[bytes]:
        return self._reads.take_changed_keys()

    @property
    def stream(self) -> lines.PartitionStream:
        """The records as lines, as the mount's ``stream`` shows them (lines.py)."""
        return lines.PartitionStream(self)

    # ------------------------------------------------------------ appends (appends.py, _line.pyx)

    def append(
        self, values: Sequence[bytes | None], *, keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        timestamp: int | Sequence[int] | None = None,
    ) -> int:  # fmt: skip
        return self._appends.append(values, keys=keys, headers=headers, timestamp=timestamp)

    def append_packed(
        self, packed: memoryview, lengths: np.ndarray, head: bytes = b"", gap: int = 1
    ) -> int:
        return self._appends.append_packed(packed, lengths, head, gap)

    def append_lines(self, text: bytes | memoryview, head: bytes = b"", *, limit: int) -> int:
        return self._appends.append_lines(text, head, limit=limit)

    def append_batches(
        self, batches: Sequence[bytes | memoryview], buffer: bytearray | memoryview | None = None,
        *, transactional: bool = False,
    ) -> int:  # fmt: skip
        """`LogAppends.append_batches`; batches with a producer id go through the
        producer state's checks (`LogTransactions.append_batches`)."""
        if transactional or idempotent(batches):
            return self._txn.append_batches(batches, transactional=transactional)
        return self._appends.append_batches(batches, buffer)

    def append_line(self, value: bytes) -> int | None:
        """`write_line` of ``value`` and its books at once: its offset, or None
        and nothing appended (`Log.append` decides then)."""
        return self.line_writer.append(value)

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
        """``new`` (cleaned, or nothing) where ``old`` were (files swapped: storage/swap.py)."""
        self._state.replace_segments(old, new)
        self._state.rewrites += 1

    def enforce_retention(self, now_ms: int | None = None, keep_from: int | None = None) -> int:
        """Delete whole non-active segments past retention.ms or beyond retention.bytes,
        oldest first, none holding ``keep_from`` or later (retention.py); returns how many."""
        count = retention.enforce_retention(self._state, now_ms, keep_from)
        if count:
            self._txn.log_start_moved()
        return count

    def delete_records(self, offset: int) -> int:
        """Kafka's DeleteRecords (retention.py): the new log start, to checkpoint."""
        start, moved = self.log_start_offset, retention.delete_records(self._state, offset)
        if moved != start:
            self._txn.log_start_moved()
        return moved

    def close(self) -> None:
        state = self._state
        if state.writable and state.segments and state.failure.reason is None:
            self.flush()
            take_snapshot(state, state.next_offset, sync=True)  # the next open replays nothing
        for segment in state.segments:
            try:
                segment.close()
            except OSError as e:  # pending index entries: rebuilt by the next recovery
                if state.failure.reason is None:
                    raise
                logger.warning("closing offline %s: %s", self, e)
        state.clear_segments()

    def abandon(self) -> None:
        """Close the segments, writing nothing: their directory goes (`Store.delete_topic`)."""
        for segment in self._state.segments:
            segment.close(write=False)
        self._state.clear_segments()
