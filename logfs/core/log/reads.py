"""The read side of a partition log: what its segments hold, records and
batches by offset and by time, the live keys.

`LogReads` is a part of `Log` (partition.py): it reads the partition's
`PartitionState` (state.py) — its segments in offset order, the log's offset
range and its failure state — and changes nothing in it but the live keys.

A read given a `Visibility` (isolation.py: ``read_committed``, made by the
transactional part) leaves out what it hides: records at or past the last stable
offset, records of aborted transactions. Control batches are never data.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..errors import CorruptRecordError, OffsetOutOfRangeError
from ..format.decoding import decode_records, record_at
from ..format.record import BatchHeader, Record
from ..storage import LogSegment, base_offset_of
from .isolation import Visibility
from .state import PartitionState

# What a read_committed lookup by time passes over after the first batch stamped late
# enough before it answers as Kafka's broker does (`LogReads._visible_at_time`).
TIME_LOOKUP_BYTES = 1 << 20


class LogReads:
    """Reads over a partition's segments, from its log start offset to its next
    offset; what is at or past the recovery point of an offline partition is
    not served."""

    def __init__(self, state: PartitionState) -> None:
        self.state = state

    @property
    def active_base_offset(self) -> int | None:
        """The active segment's base offset; None for a log without segments."""
        segments = self.state.segments
        return segments[-1].base_offset if segments else None

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.state.segments)

    def segment_names(self) -> list[str]:
        """Every segment's log, offset index, time index (and transaction index)
        by file name, sorted: each segment's sorted, in base offset order (the
        names are 20 digits, then the suffix), without a sort of the whole."""
        return [
            name
            for segment in self.state.segments
            for name in sorted(os.path.basename(p) for p in _paths(segment))
        ]

    def segment_file(self, name: str) -> str | None:
        """The absolute path of the segment file called ``name`` (one of
        `segment_names`), or None: one bisection, not a walk over the segments
        (a listing looks up each of its names)."""
        base = base_offset_of(name)
        state = self.state
        i = -1 if base is None else state.segment_index(base)
        if i < 0 or state.bases[i] != base:
            return None
        for path in _paths(state.segments[i]):
            if os.path.basename(path) == name:
                return os.path.abspath(path)
        return None

    def check_readable(self, offset: int) -> None:
        """Raise `LogFailedError` for a read at or past an offline partition's
        recovery point: what follows it may not be on the disk."""
        if offset >= self.state.recovery_point:
            self.state.failure.require_online()

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment that holds ``offset`` if any record does; for an offset
        in a compacted log's gap before its first segment (cleaned away), the
        first segment; None below the log start or without segments."""
        state = self.state
        i = state.segment_index(offset)
        if i < 0 and state.segments and offset >= state.log_start_offset:
            i = 0
        return state.segments[i] if i >= 0 else None

    def _check_range(self, offset: int) -> None:
        state = self.state
        if not state.log_start_offset <= offset < state.next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{state.log_start_offset}, {state.next_offset}) "
                f"of {state.name}"
            )

    def read(self, offset: int, view: Visibility | None = None) -> Record:
        """The record at ``offset`` (and visible in ``view``).

        Raises:
            OffsetOutOfRangeError: no (visible) record has that offset: at or past
                the log end, below its start, a control record's, or cleaned away.
            CorruptRecordError: the batch holding it fails validation, or no batch
                holds it in a log that is not compacted (its records were lost).
        """
        self._check_range(offset)
        self.check_readable(offset)
        segment = self.segment_for(offset)
        try:
            found = segment.find(offset) if segment else None
        except CorruptRecordError as e:
            raise self._corrupt(offset, e) from None
        visible = found is not None and (
            view.shows(offset, found.header) if view is not None else not found.header.is_control
        )
        if visible:
            record = record_at(found.batch, found.header, offset)
            if record is not None:
                return record
        if found is None and not self.state.config.compact:  # handed out, then lost
            raise self._corrupt(offset, CorruptRecordError("no batch holds it: lost", None))
        raise OffsetOutOfRangeError(f"no record at offset {offset} of {self.state.name}")

    def batches(
        self, start: int | None = None, end: int | None = None, view: Visibility | None = None
    ) -> Iterator[tuple[BatchHeader, list[Record]]]:
        """Decoded data batches overlapping [start, end) (visible in ``view``); the
        first and last may hold records outside the range. Control batches are skipped."""
        for header, batch in self.raw_batches(start, end):
            if not (header.is_control if view is None else view.hides(header)):
                yield header, decode_records(batch, header)

    def raw_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """CRC-checked batches overlapping [start, end), still encoded."""
        state = self.state
        start = state.log_start_offset if start is None else max(start, state.log_start_offset)
        end = state.next_offset if end is None else min(end, state.next_offset)
        if start >= end:
            return
        self.check_readable(end - 1)
        expected = start  # offsets are dense but where the cleaner removed records
        try:
            for header, batch in self._raw_batches(start, end):
                if header.base_offset > expected and not state.config.compact:
                    raise CorruptRecordError(
                        f"offsets {expected}..{header.base_offset - 1} are missing", None
                    )
                expected = header.next_offset
                yield header, batch
            if expected < end and not state.config.compact:  # a gap at the log's end
                raise CorruptRecordError(f"offsets {expected}..{end - 1} are missing", None)
        except CorruptRecordError as e:
            raise self._corrupt(expected, e) from None

    def _raw_batches(self, start: int, end: int) -> Iterator[tuple[BatchHeader, memoryview]]:
        first = max(0, self.state.segment_index(start))
        for segment in list(self.state.segments[first:]):
            if segment.base_offset >= end:
                return
            found = segment.find(start) if segment.base_offset <= start else None
            position = found.position if found else 0
            if found is None and segment.base_offset <= start:
                continue
            for _, header, batch in segment.batches(position):
                if header.base_offset >= end:
                    return
                if header.last_offset >= start:
                    yield header, batch

    def _corrupt(self, offset: int, error: CorruptRecordError) -> CorruptRecordError:
        """``error`` naming the partition and the offset being read, as Kafka's
        consumer's ``CorruptRecordException`` does."""
        where = f"{self.state.name} at offset {offset}"
        return CorruptRecordError(f"{where}: {error.args[0]}")

    def scan(
        self, start: int | None = None, end: int | None = None, view: Visibility | None = None
    ) -> Iterator[Record]:
        """Records from ``start`` (default: the log start) up to ``end`` (visible in ``view``)."""
        low = self.state.log_start_offset if start is None else start
        high = self.state.next_offset if end is None else end
        if view is not None:
            high = min(high, view.end)
        for _, records in self.batches(low, high, view):
            for record in records:
                if low <= record.offset < high:
                    yield record

    def file_region(
        self,
        offset: int,
        max_bytes: int,
        end: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> tuple[int, int, int] | None:
        """The bytes a fetcher at ``offset`` gets, as Kafka's broker slices a
        segment for it (its ``LogSegment.read``): ``(fd, position, size)`` of the
        segment file from the batch holding ``offset``, ``max_bytes`` long (the
        last batch may be cut short: Kafka's clients drop a trailing partial
        batch), or with ``min_one_batch`` at least that first batch whole, so
        that one larger than the limit still gets through. Never past the
        segment's end nor into a batch at or past ``end`` (a ``read_committed``
        fetch's last stable offset). None when no record is at or after ``offset``
        (before ``end``) or the slice is empty. The fd is the segment's own:
        duplicate it before the loop may run retention.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the log start or past the end.
            LogFailedError: an offline partition's offset at or past its recovery point.
            CorruptRecordError: no batch holds ``offset`` (below the end) in a log that
                is not compacted: a gap of lost records, in the middle or at the end.
        """
        state = self.state
        if not state.log_start_offset <= offset <= state.next_offset:
            self._check_range(offset)
        end = state.next_offset if end is None else min(end, state.next_offset)
        if offset >= end:
            return None
        self.check_readable(offset)
        for segment in state.segments[max(0, state.segment_index(offset)) :]:
            if end is not None and segment.base_offset >= end:
                return None
            start = max(offset, segment.base_offset)
            position, size = segment.fetch_slice(start, max_bytes, end, min_one_batch)
            if size is not None:
                return (segment.fileno(), position, size) if size > 0 else None
            if position >= segment.size and not state.config.compact:  # handed out, lost
                missing = CorruptRecordError(f"no batch holds offset {start}", None)
                raise self._corrupt(offset, missing)
        return None

    @property
    def leader_epoch(self) -> int:
        """The partition's leader epoch (epochs.py: it never moves on this node)."""
        return self.state.epochs.latest

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the epoch, where it ends) as Kafka answers it
        (`LeaderEpochs.end_offset_for`)."""
        return self.state.epochs.end_offset_for(epoch, self.state.next_offset)

    def offset_for_time(self, timestamp_ms: int, view: Visibility | None = None) -> int | None:
        """The first offset whose timestamp is >= ``timestamp_ms`` (Kafka's
        offsetsForTimes), or None when every record is older; with ``view``, the
        first such record it shows (None if that is past its end, as Kafka's
        ``read_committed`` lookups answer). The work: one look at each segment's
        largest timestamp, one batch found through the time index, and with
        ``view`` the batch headers after it up to `TIME_LOOKUP_BYTES` (see
        `_visible_at_time`)."""
        start = self.state.log_start_offset
        for segment in list(self.state.segments):
            if segment.max_timestamp < timestamp_ms:
                continue
            found = segment.first_batch_at_time(timestamp_ms)
            if found is None:
                continue
            if view is not None:
                return self._visible_at_time(timestamp_ms, found.header.base_offset, view)
            for record in decode_records(found.batch, found.header):
                if record.timestamp >= timestamp_ms and record.offset >= start:
                    return record.offset
        return None

    def _visible_at_time(self, timestamp_ms: int, start: int, view: Visibility) -> int | None:
        """The first record from ``start`` on that ``view`` shows, stamped at or
        after ``timestamp_ms``. Hidden batches and older ones are passed over by
        their headers; past `TIME_LOOKUP_BYTES` of them (one aborted batch stamped
        late, then a partition of records stamped early would otherwise be walked
        whole, on the caller's loop) the answer is Kafka broker's: the first
        offset stamped late enough, shown or not, if below the view's end."""
        start = max(start, self.state.log_start_offset)
        first, passed = None, 0
        for header, batch in self.raw_batches(start, view.end):
            if header.max_timestamp >= timestamp_ms and not header.is_control:
                for record in decode_records(batch, header):
                    if record.timestamp >= timestamp_ms and start <= record.offset < view.end:
                        if view.shows(record.offset, header):
                            return record.offset
                        first = record.offset if first is None else first
                        break
            passed += len(batch)
            if passed > TIME_LOOKUP_BYTES and first is not None:
                return first
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(timestamp, offset) of the first record stamped with the log's largest
        timestamp, as Kafka's ListOffsets answers ``MAX_TIMESTAMP``; (-1, -1) for a
        log without one. Each segment's books know its largest timestamp (loaded
        from its time index), so only the segment that holds it is read, from its
        time index's entry before it: never a walk over the partition."""
        segments = list(self.state.segments)
        best = max(segments, key=lambda s: s.max_timestamp, default=None)
        if best is None or best.max_timestamp < 0:
            return -1, -1
        found = best.first_batch_at_time(best.max_timestamp)
        if found is None:
            return -1, -1
        start = self.state.log_start_offset
        for record in decode_records(found.batch, found.header):
            if record.timestamp == found.header.max_timestamp and record.offset >= start:
                return record.timestamp, record.offset
        return -1, -1

    def live_keys(self, *, watch: bool = False, view: Visibility | None = None) -> dict[bytes, int]:
        """Each live key of a compacted partition and its latest record's
        offset (keys.py) among the records ``view`` shows; built on first use,
        then kept current by appends. ``watch``: from now on note the keys
        appended to, for `take_changed_keys`."""
        state = self.state
        return state.keys.get(state.segments, state.log_start_offset, watch=watch, view=view)

    def take_changed_keys(self) -> set[bytes]:
        """The keys appended to since the last call, once someone watches
        (`live_keys`); each key is given out once."""
        return self.state.keys.take_changed()


def _paths(segment: LogSegment) -> list[str]:
    """A segment's files as ``segments/`` shows them: the transaction index once
    it has an entry."""
    paths = [segment.log_path, segment.index_path, segment.timeindex_path]
    if len(segment.txn_index):
        paths.append(segment.txn_index.path)
    return paths
