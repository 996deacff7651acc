"""The transactional part of a partition log: its producer state, the batches of
idempotent and transactional producers, transaction markers, the last stable
offset and what a ``read_committed`` reader sees.

`LogTransactions` is a part of `Log` (partition.py) over its `PartitionState`
(state.py), writing through its appends (`LogAppends`). It keeps Kafka's books
(``UnifiedLog`` and ``ProducerStateManager``):

- a batch with a producer id is checked against the producer's state before it is
  appended (producer_state.py): a retry is answered with the offset it got, not
  appended again; then the state notes it;
- a marker (format/control.py) ends a producer's transaction; an aborted one with
  records here gets an entry in the transaction index of the segment the marker is
  in (storage/txnindex.py), with the last stable offset (LSO) after it;
- the LSO is the first offset of the oldest open transaction, else the log end;
  the stream bytes of batches past it are noted once they are decided (appends.py).

Crash protocol: the producer state is loaded when first needed (at open for a
writable log) from the latest snapshot at or below the log end (snapshots.py),
then the batch headers after it are replayed to the log end; a writable log first
cuts the transaction index entries whose markers are replayed and writes them
again. So whatever a crash cut from the log's tail, the state, the transaction
indexes and the LSO are those of the log that remains.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import CorruptRecordError
from ..format import control
from ..format.columnar import decode, stream_bytes
from ..format.record import read_header
from ..storage.txnindex import AbortedTxn
from .appends import LogAppends
from .isolation import TxnSummary, Visibility
from .producer_state import ProducerState
from .snapshots import latest_snapshot, remove_stray
from .state import PartitionState

logger = logging.getLogger(__name__)

BACKFILL_SEGMENTS = 2  # read back at open for the batches a snapshot does not keep


class LogTransactions:
    """`Log`'s producer state, markers and last stable offset (module docstring)."""

    def __init__(self, state: PartitionState, appends: LogAppends) -> None:
        self.state = state
        self.appends = appends

    # ------------------------------------------------------------ loading

    @property
    def producers(self) -> ProducerState:
        if self.state.producers is None:
            self.load()
        assert self.state.producers is not None
        return self.state.producers

    def load(self) -> None:
        """Read the producer state back: the latest snapshot, then the log after it."""
        state = self.state
        found = latest_snapshot(state)
        if found is None:
            producers, start = ProducerState(), state.log_start_offset
        else:
            offset, entries = found
            producers, start = ProducerState.restored(entries), max(offset, state.log_start_offset)
            self._backfill(producers, start)
        producers.forget_before(state.log_start_offset)
        producers.expire(state.clock(), state.producer_id_expiration_ms)
        if state.writable:
            for segment in state.segments:
                segment.txn_index.truncate_to(start)
        self._replay(producers, start)
        state.producers = producers
        remove_stray(state)
        lso = self._stable(producers)
        state.held_from = state.held_at_open = lso if lso < state.next_offset else -1

    def _backfill(self, producers: ProducerState, start: int) -> None:
        """The batches before ``start`` (a snapshot's offset) of its producers, from
        the segment holding ``start - 1`` and the one before it (`BACKFILL_SEGMENTS`):
        a retry of any of a producer's last batches is still known as one after a
        restart and a roll, though the snapshot keeps only the last."""
        state = self.state
        i = state.segment_index(start - 1)
        if i < 0 or not any(e.batches for e in producers.producers.values()):
            return
        headers = []
        try:
            for segment in state.segments[max(0, i - BACKFILL_SEGMENTS + 1) : i + 1]:
                for _, header in segment.headers(-1):
                    if header.base_offset >= start:
                        break
                    if header.producer_id >= 0 and not header.is_control:
                        headers.append(header)
        except CorruptRecordError as e:
            logger.error("%s: producer batches before %d not read: %s", state.name, start, e)
        producers.backfill(headers)

    def _replay(self, producers: ProducerState, start: int) -> None:
        """Apply the batches from ``start`` to the log end, headers only but for
        markers; a writable log indexes the aborted transactions again."""
        state = self.state
        replayed = 0
        try:
            for segment in list(state.segments[max(0, state.segment_index(start)) :]):
                replayed += self._replay_segment(producers, segment, start)
        except CorruptRecordError as e:  # damage kept below the recovery point: reads fail too
            logger.error("%s: producer state replay stopped: %s", state.name, e)
        if replayed:
            logger.info("%s: producer state replayed from offset %d", state.name, start)

    def _replay_segment(self, producers: ProducerState, segment, start: int) -> int:
        replayed = 0
        for position, header in segment.headers(start):
            if header.next_offset <= start or header.producer_id < 0:
                continue
            replayed += 1
            if not header.is_control:
                producers.appended(header)
                continue
            batch = segment.batch_at(position, header)
            try:
                kind = control.marker_type(batch, header)
                epoch = control.marker_coordinator_epoch(batch, header)
            except CorruptRecordError:
                continue  # an empty control batch: its transaction was cleaned away
            completed = producers.end_txn(
                header.producer_id, header.producer_epoch, kind == control.ABORT, epoch,
                header.base_offset, header.max_timestamp,
            )  # fmt: skip
            if completed is not None and completed.aborted and self.state.writable:
                lso = producers.stable_offset_after(completed)
                segment.txn_index.append(AbortedTxn(*completed[:3], lso))
        return replayed

    # ------------------------------------------------------------ what it says

    def _stable(self, producers: ProducerState) -> int:
        first = producers.first_unstable_offset
        end = self.state.next_offset
        return end if first is None else min(first, end)

    @property
    def last_stable_offset(self) -> int:
        return self._stable(self.producers)

    def open_transactions(self) -> list[TxnSummary]:
        producers = self.producers
        return [
            TxnSummary(pid, producers.producers[pid].epoch, first)
            for first, pid in producers.ongoing.items()
        ]

    def aborted(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start, end), from the transaction
        indexes of the segment holding ``start`` and every later one (a marker is at
        or after its transaction's records)."""
        state = self.state
        out: list[AbortedTxn] = []
        for segment in state.segments[max(0, state.segment_index(start)) :]:
            if len(segment.txn_index):
                out += segment.txn_index.collect(start, end)
        return out

    def visibility(self, start: int, end: int | None = None, *, committed: bool = True):
        """What a reader of [start, end) sees (isolation.py): with ``committed``,
        nothing at or past the LSO and no aborted record; else all data records."""
        if not committed:
            return Visibility.everything(self.state.next_offset)
        lso = self.last_stable_offset
        return Visibility(lso, self.aborted(start, min(lso, end if end is not None else lso)))

    # ------------------------------------------------------------ appends

    def append_batches(
        self, batches: Sequence[bytes | memoryview], *, transactional: bool = False
    ) -> int:
        """`Log.append_batches` for batches of which some carry a producer id: each
        checked against its producer's state, retries answered with the offset
        they got the first time (the first batch's is returned), the rest appended.

        Raises:
            InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError:
                a batch the producer state refuses (producer_state.py).
            InvalidBatchError: as `LogAppends.append_batches`.
        """
        state, producers = self.state, self.producers
        headers = [read_header(b) for b in batches]
        saved = producers.saved({h.producer_id for h in headers if h.producer_id >= 0})
        held, offset = state.held_from, state.next_offset
        fresh, duplicate = [], None
        try:
            for i, (batch, h) in enumerate(zip(batches, headers, strict=True)):
                known = producers.check(h) if h.producer_id >= 0 else None
                if known is not None:
                    duplicate = known if i == 0 else duplicate
                    continue
                entry = producers.entry(h.producer_id)
                starts = h.is_transactional and (entry is None or entry.txn_first_offset < 0)
                if starts and state.held_from < 0:  # the stream waits from its first batch
                    state.held_from = offset
                if h.producer_id >= 0:  # noted now: the next batch follows its sequence
                    producers.appended(h._replace(base_offset=offset))
                fresh.append(batch)
                offset += h.last_offset_delta + 1
            if not fresh:
                return duplicate  # type: ignore[return-value]
            base = self.appends.append_batches(fresh, transactional=transactional)
        except BaseException:
            producers.restore(saved)
            state.held_from = held
            raise
        return base if duplicate is None else duplicate

    def append_marker(
        self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        """Write the marker ending ``producer_id``'s transaction (a COMMIT or an
        ABORT, even when it has no record here: the marker fences older epochs);
        returns its offset.

        Raises:
            InvalidProducerEpochError: ``epoch`` is older than the producer's.
            LogfsError, OSError: as any append.
        """
        self.producers.check_marker(producer_id, epoch, coordinator_epoch)
        now = self.state.clock()
        batch = bytearray(control.marker_batch(producer_id, epoch, commit, coordinator_epoch, now))
        offset = self.appends.append_control(batch)
        self.marker_written(producer_id, epoch, not commit, coordinator_epoch, offset, now)
        return offset

    def marker_written(
        self, producer_id: int, epoch: int, aborted: bool, coordinator_epoch: int, offset: int,
        timestamp: int,
    ) -> None:  # fmt: skip
        """The books of a marker written at ``offset``, the log's own or one a
        follower copied (following.py): the producer's transaction ends, an aborted
        one is indexed, the stream bytes the LSO passes are noted.

        Raises:
            OSError: the transaction index could not be written (the partition is offline).
        """
        state, producers = self.state, self.producers
        completed = producers.end_txn(
            producer_id, epoch, aborted, coordinator_epoch, offset, timestamp
        )
        if completed is not None and completed.aborted:
            lso = producers.stable_offset_after(completed)
            segment = state.segments[state.segment_index(offset)]
            try:
                segment.txn_index.append(AbortedTxn(*completed[:3], lso))
            except OSError as e:
                state.fail("writing the transaction index", e)
                raise
        self._release()
        state.keys.drop()  # committed (or aborted) keys: the live keys are built again

    def data_copied(self, header) -> None:
        """A follower's data batch about to be written at its own offset (following.py):
        its producer notes it, unchecked (the leader checked it), and a transaction it
        starts holds the stream from there, as `append_batches` does."""
        if header.producer_id < 0:
            return
        entry = self.producers.entry(header.producer_id)
        starts = header.is_transactional and (entry is None or entry.txn_first_offset < 0)
        if starts and self.state.held_from < 0:
            self.state.held_from = header.base_offset
        self.producers.appended(header)

    def _release(self) -> None:
        """Note the stream bytes of the batches the LSO has passed (appends.py):
        a data batch's values and newlines, nothing for an aborted or control one."""
        state = self.state
        held = state.held_from
        if held < 0:
            return
        lso = self.last_stable_offset
        if lso <= held:
            return
        view = Visibility(lso, self.aborted(held, lso))
        for segment in list(state.segments[max(0, state.segment_index(held)) :]):
            if segment.base_offset >= lso:
                break
            for position, header in segment.headers(held):
                if header.base_offset >= lso:
                    break
                if header.base_offset < held:
                    continue
                size = 0
                if not view.hides(header):
                    batch = segment.batch_at(position, header)
                    size = int(stream_bytes(decode([(header, batch)]), 1)[0])
                segment.stream.release(header.base_offset, size)
        state.held_from = -1 if lso >= state.next_offset else lso

    # ------------------------------------------------------------ the log start moves

    def log_start_moved(self) -> None:
        """Retention moved the log start: producers only known from below it go."""
        if self.state.producers is not None:
            self.state.producers.forget_before(self.state.log_start_offset)
        remove_stray(self.state)
