"""A partition's producer state, as Kafka's ``ProducerStateManager`` keeps it.

Per producer id: its epoch, the sequence numbers and offsets of its last `KEPT`
batches (a retry of one of them is a duplicate: answered with the offset it got,
never appended again), the coordinator epoch of the last marker written for it,
and the first offset of its open transaction. Per partition: the open
transactions in offset order, whose first one holds the last stable offset (LSO)
back: a ``read_committed`` reader reads only below it.

The state changes with every batch that carries a producer id (`appended`,
`end_txn`), whatever face appended it, and is read back at open: from the latest
snapshot (storage/snapshot.py) at or below the log end, then by replaying the
batches after it (`replay`); a producer whose last batch is older than
``producer.id.expiration.ms`` and that has no open transaction is forgotten then
and at every snapshot, as in Kafka.

The checks (`check`) are Kafka's (``ProducerAppendInfo``): an epoch below the
producer's is fenced (`InvalidProducerEpochError`); a batch of the current epoch
must follow the last sequence (`OutOfOrderSequenceError`), a new epoch starts at
sequence 0; a producer with an open transaction appends transactional batches
only (`InvalidTxnStateError`). Batches the coordinators write (sequence -1) are
checked for their epoch only.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from ..errors import InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError
from ..format.record import BatchHeader
from ..storage.snapshot import SnapshotEntry

KEPT = 5  # batches remembered per producer (Kafka's in-flight maximum)
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms
SEQUENCE_WRAP = 1 << 31
NO_SEQUENCE = -1


class BatchMeta(NamedTuple):
    """One appended batch of a producer."""

    first_sequence: int
    last_sequence: int
    last_offset: int
    offset_delta: int  # last offset - first offset
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its first offset and the marker's."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerEntry:
    """What a partition knows of one producer id."""

    __slots__ = ("batches", "coordinator_epoch", "epoch", "last_timestamp", "txn_first_offset")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMeta] = deque(maxlen=KEPT)
        self.coordinator_epoch = -1
        self.txn_first_offset = -1
        self.last_timestamp = -1

    def set_epoch(self, epoch: int) -> None:
        """A new epoch starts its sequences over: the batches of the old one go."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def duplicate_of(self, header: BatchHeader) -> BatchMeta | None:
        """The batch ``header`` repeats (a producer's retry), if any. A batch
        without a sequence is the coordinator's own (offsets committed in a
        transaction) and never a retry, as Kafka checks duplicates of its
        clients' batches only: every such batch of an epoch has sequence -1."""
        if header.producer_epoch != self.epoch or header.base_sequence == NO_SEQUENCE:
            return None
        last = last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return batch
        return None


def last_sequence(header: BatchHeader) -> int:
    if header.base_sequence < 0:
        return NO_SEQUENCE
    return (header.base_sequence + header.records_count - 1) % SEQUENCE_WRAP


class ProducerState:
    """One partition's producers and open transactions (module docstring)."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # first offset -> producer id of each open transaction; offsets only grow, so
        # insertion order is offset order and the first is the oldest open one
        self.ongoing: dict[int, int] = {}

    # ------------------------------------------------------------ the checks

    def check(self, header: BatchHeader) -> int | None:
        """Before a data batch with a producer id is appended: the offset its first
        record got when it was appended before (a retry), or None to append it.

        Raises:
            InvalidProducerEpochError: its epoch is older than the producer's.
            OutOfOrderSequenceError: its sequence does not follow the last one.
            InvalidTxnStateError: a plain batch from a producer with an open
                transaction.
        """
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None  # an unknown producer (new, or expired): any sequence
        where = f"producer {header.producer_id}"
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"{where}: epoch {header.producer_epoch} is fenced by {entry.epoch}"
            )
        duplicate = entry.duplicate_of(header)
        if duplicate is not None:
            return duplicate.first_offset
        if header.base_sequence != NO_SEQUENCE:
            if header.producer_epoch > entry.epoch:
                if header.base_sequence != 0:
                    raise OutOfOrderSequenceError(
                        f"{where}: a new epoch starts at sequence 0, not {header.base_sequence}"
                    )
            elif entry.batches:
                expected = (entry.last_sequence + 1) % SEQUENCE_WRAP
                if header.base_sequence != expected:
                    raise OutOfOrderSequenceError(
                        f"{where}: sequence {header.base_sequence}, expected {expected}"
                    )
        if entry.txn_first_offset >= 0 and not header.is_transactional:
            raise InvalidTxnStateError(f"{where} has an open transaction: plain batch refused")
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Before a marker is written for ``producer_id``.

        Raises:
            InvalidProducerEpochError: the marker's epoch is older than the producer's.
        """
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: a marker of epoch {epoch} is fenced by {entry.epoch}"
            )

    # ------------------------------------------------------------ changes

    def appended(self, header: BatchHeader) -> None:
        """A data batch with a producer id is in the log (``header`` carries its offsets)."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        entry.set_epoch(header.producer_epoch)
        entry.batches.append(
            BatchMeta(
                header.base_sequence,
                last_sequence(header),
                header.last_offset,
                header.last_offset_delta,
                header.max_timestamp,
            )
        )
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = header.base_offset
            self.ongoing[header.base_offset] = header.producer_id

    def end_txn(
        self, producer_id: int, epoch: int, aborted: bool, coordinator_epoch: int, offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:  # fmt: skip
        """A marker at ``offset`` ended the producer's transaction: the transaction
        (None if it had no record in this partition)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first, entry.txn_first_offset = entry.txn_first_offset, -1
        if first < 0:
            return None
        self.ongoing.pop(first, None)
        return CompletedTxn(producer_id, first, offset, aborted)

    # ------------------------------------------------------------ what it says

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return next(iter(self.ongoing), None)

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is ended (what its `AbortedTxn` records):
        the first open transaction of another producer, else past its marker."""
        for first, producer in self.ongoing.items():
            if producer != completed.producer_id:
                return first
        return completed.last_offset + 1

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def saved(self, producer_ids: set[int]) -> tuple[dict, dict]:
        """What `restore` puts back: the entries of ``producer_ids`` and the open
        transactions, as they are now (an append checks and notes its batches
        one by one before writing them, and undoes that if the write fails)."""
        copies = {}
        for pid in producer_ids:
            e = self.producers.get(pid)
            if e is not None:
                c = ProducerEntry(e.epoch)
                c.batches.extend(e.batches)
                c.coordinator_epoch, c.txn_first_offset = e.coordinator_epoch, e.txn_first_offset
                c.last_timestamp = e.last_timestamp
                e = c
            copies[pid] = e
        return copies, dict(self.ongoing)

    def restore(self, saved: tuple[dict, dict]) -> None:
        copies, ongoing = saved
        for pid, entry in copies.items():
            if entry is None:
                self.producers.pop(pid, None)
            else:
                self.producers[pid] = entry
        self.ongoing = ongoing

    # ------------------------------------------------------------ snapshots, expiry

    def snapshot(self) -> list[SnapshotEntry]:
        """The state as a snapshot stores it (the last batch of each producer)."""
        out = []
        for producer_id, e in self.producers.items():
            last = e.batches[-1] if e.batches else None
            out.append(
                SnapshotEntry(
                    producer_id,
                    e.epoch,
                    last.last_sequence if last else NO_SEQUENCE,
                    last.last_offset if last else -1,
                    last.offset_delta if last else 0,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    e.txn_first_offset,
                )
            )
        return out

    @classmethod
    def restored(cls, entries: list[SnapshotEntry]) -> ProducerState:
        state = cls()
        for s in sorted(entries, key=lambda s: s.txn_first_offset):
            entry = state.producers[s.producer_id] = ProducerEntry(s.epoch)
            if s.last_offset >= 0:
                first_sequence = (s.last_sequence - s.offset_delta) % SEQUENCE_WRAP
                if s.last_sequence == NO_SEQUENCE:
                    first_sequence = NO_SEQUENCE
                entry.batches.append(
                    BatchMeta(first_sequence, s.last_sequence, s.last_offset, s.offset_delta,
                              s.timestamp)
                )  # fmt: skip
            entry.last_timestamp = s.timestamp
            entry.coordinator_epoch = s.coordinator_epoch
            entry.txn_first_offset = s.txn_first_offset
            if s.txn_first_offset >= 0:
                state.ongoing[s.txn_first_offset] = s.producer_id
        return state

    def backfill(self, batches: list[BatchHeader]) -> None:
        """Give the producers of a snapshot (which keeps only each one's last batch)
        their batches before it, from ``batches`` (the headers before the
        snapshot's offset, in offset order): those of the same epoch up to the
        kept one."""
        for header in batches:
            entry = self.producers.get(header.producer_id)
            if entry is None or not entry.batches or header.producer_epoch != entry.epoch:
                continue
            last = entry.batches[-1]
            if header.last_offset >= last.last_offset:
                continue
            meta = BatchMeta(
                header.base_sequence, last_sequence(header), header.last_offset,
                header.last_offset_delta, header.max_timestamp,
            )  # fmt: skip
            kept = [b for b in entry.batches if b.last_offset < last.last_offset]
            entry.batches.clear()
            entry.batches.extend([*kept, meta, last][-KEPT:])

    def expire(self, now: int, expiration_ms: int) -> int:
        """Forget the producers idle for ``expiration_ms`` without an open
        transaction (Kafka's ``removeExpiredProducers``); how many went."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and now - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def forget_before(self, offset: int) -> None:
        """The log now starts at ``offset``: producers whose last batch was below it
        and that have no open transaction are forgotten (Kafka's ``truncateHead``)."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and (not e.batches or e.batches[-1].last_offset < offset)
        ]
        for pid in gone:
            del self.producers[pid]
