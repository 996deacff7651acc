"""A followed partition: a copy of a partition of another log (a Kafka cluster's),
appended to by its follower only (logfs/mirror/inbound.py), as a Kafka replica is.

`LogFollowing` is a part of `Log` (partition.py) over its `PartitionState`
(state.py), writing through its appends (`LogAppends.write_copied`) and keeping
the producer state through its transactions (`LogTransactions`):

- ``follows`` marks the partition: every other change (appends of any kind,
  DeleteRecords, the mount's truncation) answers `ReadOnlyError` from the guard
  every change passes (`PartitionState.require_appendable`);
- `append` writes the leader's batches with their own offsets, producer ids,
  sequences, timestamps and leader epochs, every byte as fetched (Kafka's
  ``appendAsFollower``): a batch is checked only for what keeps the log readable
  (magic 2, a whole batch, its CRC, offsets that go forward). The roll rule is the
  log's own, so with the same ``segment.bytes`` the segment files are the leader's.
  A data batch is noted by its producer unchecked (the leader checked it); a
  marker ends its transaction and an aborted one goes into the transaction index,
  through the same books as the log's own markers (`LogTransactions.marker_written`),
  so the last stable offset and ``.txnindex`` come out as the leader's;
- `start_at` follows the leader's log start: DeleteRecords up to it, or, when the
  local log ends below it, every segment deleted and the log started again there
  (Kafka's ``truncateFullyAndStartAt``). An empty log whose first fetched batch
  begins below its start (the leader's log start inside that batch) starts again at
  the batch's base offset, as Kafka's replica fetcher does; the log start then
  follows the leader's again.

Crash protocol: nothing of its own. The follower's position is the log end, so a
crash that cut a torn tail (recovery, partition.py) makes the follower fetch that
tail again; the producer state and transaction indexes are rebuilt from the batches
on disk as for any log (transactions.py). A crash inside `start_at` leaves either
the old segments or the new empty one (the files of deleted segments are renamed
first, delayed.py); the log start checkpoint may lag, which the next `start_at`
corrects.
"""

from __future__ import annotations

from ..errors import CorruptRecordError, InvalidBatchError
from ..format import control
from ..format.batching import BatchInfo
from ..format.columnar import decode, stream_bytes
from ..format.record import HEADER_SIZE, BatchHeader, read_header, verify_crc
from ..storage.snapshot import delete_snapshot, snapshot_offsets
from . import retention
from .appends import LogAppends
from .producer_state import ProducerState
from .state import PartitionState
from .transactions import LogTransactions


class LogFollowing:
    """`Log.follow`, `Log.append_copied` and `Log.start_copy_at` (module docstring)."""

    def __init__(self, state: PartitionState, appends: LogAppends, txn: LogTransactions) -> None:
        self.state = state
        self.appends = appends
        self.txn = txn
        # The follower's report (`copied`): the cluster's high watermark (-1: not
        # known yet), since when the log has been behind it (ms), the last error.
        self.high_watermark = -1
        self.behind_since: int | None = None
        self.error: str | None = None

    def follow(self, source: str | None) -> None:
        """Mark the partition as a copy of ``source`` (None: an ordinary partition)."""
        self.state.follows = source

    def copied(self, high_watermark: int, error: str | None = None) -> None:
        """The follower's report after a fetch: the cluster's high watermark then (-1:
        unknown), and what failed (None: nothing)."""
        if high_watermark >= 0:
            self.high_watermark = high_watermark
        self.error = error
        if self.state.next_offset >= self.high_watermark:
            self.behind_since = None
        elif self.behind_since is None:
            self.behind_since = self.state.clock()

    def status(self) -> dict | None:
        """What the mount's ``state`` shows of a followed partition (None: not one):
        where from, the cluster's high watermark, the records behind it and for how
        long (ms), the last error."""
        state = self.state
        if state.follows is None:
            return None
        behind = self.behind_since
        return {
            "from": state.follows,
            "high_watermark": self.high_watermark,
            "lag_records": max(0, self.high_watermark - state.next_offset),
            "lag_ms": 0 if behind is None else max(0, state.clock() - behind),
            "error": self.error,
        }

    def append(self, data: bytes | memoryview) -> int:
        """Append the whole batches in ``data`` (a Fetch answer's records) as they are;
        batches wholly below the log end are skipped, a partial batch at the end (a
        fetch cut at its size) is left for the next fetch. Returns the log end.

        Raises:
            ReadOnlyError, LogFailedError: as any change (`require_appendable`).
            InvalidBatchError: a batch that is not RecordBatch v2, fails its CRC, or
                overlaps the log end; nothing of ``data`` is appended then.
            OSError: as any append.
        """
        state = self.state
        state.require_appendable(follower=True)
        view, pos, end = memoryview(data), 0, state.next_offset
        batches: list[tuple[BatchHeader, memoryview]] = []
        while len(view) - pos >= HEADER_SIZE:  # less: a header cut by the fetch's size
            try:
                header = read_header(view, pos)
            except CorruptRecordError as e:
                raise InvalidBatchError(f"copied batch at byte {pos}: {e}") from None
            if len(view) - pos < header.size:
                break  # cut by the fetch's size: fetched again from its start
            batch = view[pos : pos + header.size]
            pos += header.size
            if header.next_offset <= end:
                continue
            if header.base_offset < end and not batches and self._empty():
                # The log start is inside this batch (DeleteRecords on the leader) and
                # nothing is here yet: start at the batch, as Kafka's replica fetcher does.
                self._restart(header.base_offset)
                end = header.base_offset
            if header.base_offset < end:
                raise InvalidBatchError(
                    f"copied batch {header.base_offset}..{header.last_offset} overlaps "
                    f"the log end {end} of {state.name}"
                )
            try:
                verify_crc(batch, header, pos - header.size)
            except CorruptRecordError as e:
                raise InvalidBatchError(f"copied batch at {header.base_offset}: {e}") from None
            batches.append((header, batch))
            end = header.next_offset
        run: list[tuple[BatchHeader, memoryview]] = []
        for header, batch in batches:
            run.append((header, batch))
            if header.is_control:  # its books need the batches before it written
                self._write(run)
                run = []
        self._write(run)
        return state.next_offset

    def _write(self, run: list[tuple[BatchHeader, memoryview]]) -> None:
        """Write data batches, then at most one marker (the last of ``run``)."""
        if not run:
            return
        data = [(h, b) for h, b in run if not h.is_control and h.records_count]
        sizes = iter(stream_bytes(decode(data), len(data)).tolist() if data else ())
        encoded = []
        for header, batch in run:
            if not header.is_control:
                self.txn.data_copied(header)
            size = next(sizes) if not header.is_control and header.records_count else 0
            info = BatchInfo(header.size, header.last_offset, header.max_timestamp, int(size))
            encoded.append((batch, info))
        self.appends.write_copied(encoded)
        last, batch = run[-1]
        if last.is_control and last.producer_id >= 0:
            kind = control.marker_type(batch, last)
            epoch = control.marker_coordinator_epoch(batch, last)
            self.txn.marker_written(
                last.producer_id, last.producer_epoch, kind == control.ABORT, epoch,
                last.base_offset, last.max_timestamp,
            )  # fmt: skip

    def start_at(self, offset: int) -> int:
        """Follow the leader's log start ``offset``: returns the log start.

        Raises:
            ReadOnlyError, LogFailedError: as any change.
            OSError: a segment's files could not be removed (the partition goes offline).
        """
        state = self.state
        if offset <= state.log_start_offset:
            return state.log_start_offset
        if offset <= state.next_offset:
            return retention.delete_records(state, offset, follower=True)
        state.require_appendable(follower=True)
        self._restart(offset)
        return offset

    def _empty(self) -> bool:
        state = self.state
        return state.next_offset == state.log_start_offset and state.active_segment.size == 0

    def _restart(self, offset: int) -> None:
        """Delete every segment and start the log at ``offset`` (Kafka's
        ``truncateFullyAndStartAt``)."""
        state = self.state
        now = state.clock()
        while state.segments:
            oldest = state.remove_oldest()
            try:
                state.removal.remove(oldest, state.config.file_delete_delay_ms, now)
            except OSError as e:
                state.fail(f"deleting segment {oldest.base_offset} (restarted at {offset})", e)
                raise
        state.log_start_offset = state.recovery_point = offset
        state.add_segment(state.new_segment(offset))
        state.unflushed.directory_changed()
        state.producers = ProducerState()  # what the deleted batches said is gone with them
        state.held_from = state.held_at_open = -1
        state.keys.drop()
        state.epochs.start_moved(offset)
        for stale in snapshot_offsets(state.dir):
            if stale != offset:
                delete_snapshot(state.dir, stale)
