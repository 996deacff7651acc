"""The offline tools' view of transactions: `logfs dump` of ``.txnindex`` and
``.snapshot`` files and of markers, and `logfs check`'s comparison of each
segment's ``.txnindex`` with the log.

The check replays a partition's batches in offset order (as the walk of `check`
reads them): a producer's transaction starts at its first transactional batch and
ends at its marker. Every ABORT marker that ends a transaction with records in the
log must have its entry in the ``.txnindex`` of the marker's segment, with the
transaction's first offset; every entry must name an ABORT marker of its producer
(a compacted topic's cleaning may have removed the records before it, never the
marker before its entry).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import CorruptIndexError, CorruptRecordError
from ..format import control
from ..format.record import BatchHeader
from ..storage import snapshot, txnindex


class TxnCheck:
    """One partition's transactions as a walk of its batches finds them."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # producer id -> its transaction's first offset
        self.expected: dict[int, tuple[int, int]] = {}  # marker offset -> (pid, first)
        self.aborts: dict[int, int] = {}  # ABORT marker offset -> producer id

    def batch(self, header: BatchHeader, batch: memoryview) -> None:
        if header.producer_id < 0 or not header.is_transactional:
            return
        if not header.is_control:
            self.open.setdefault(header.producer_id, header.base_offset)
            return
        first = self.open.pop(header.producer_id, None)
        try:
            kind = control.marker_type(batch, header)
        except CorruptRecordError:
            return  # an empty control batch: its transaction was cleaned away
        if kind == control.ABORT:
            self.aborts[header.base_offset] = header.producer_id
            if first is not None:
                self.expected[header.base_offset] = (header.producer_id, first)

    def segment_problems(self, log_path: Path, base: int, end: int) -> list[str]:
        """What the segment's ``.txnindex`` gets wrong about its markers in [base, end)."""
        path = log_path.with_suffix(txnindex.SUFFIX)
        try:
            entries = txnindex.decode(path.read_bytes(), str(path)) if path.exists() else []
        except CorruptIndexError as e:
            return [str(e)]
        problems = []
        indexed = {t.last_offset: t for t in entries}
        for marker, (pid, first) in sorted(self.expected.items()):
            if not base <= marker < end:
                continue
            entry = indexed.get(marker)
            if entry is None:
                problems.append(f"{path}: no entry for the aborted transaction ending at {marker}")
            elif (entry.producer_id, entry.first_offset) != (pid, first):
                problems.append(
                    f"{path}: entry ending at {marker} says producer {entry.producer_id} from "
                    f"{entry.first_offset}; the log says producer {pid} from {first}"
                )
        for entry in entries:
            if self.aborts.get(entry.last_offset) != entry.producer_id:
                problems.append(
                    f"{path}: entry ending at {entry.last_offset} names no ABORT marker of "
                    f"producer {entry.producer_id}"
                )
        return problems


def dump_txn_index(path: Path) -> Iterator[str]:
    """Each aborted transaction, as ``kafka-dump-log.sh`` prints a ``.txnindex``."""
    yield f"Dumping {path}"
    for t in txnindex.decode(path.read_bytes(), str(path)):
        yield (
            f"version: {txnindex.VERSION} producerId: {t.producer_id} "
            f"firstOffset: {t.first_offset} lastOffset: {t.last_offset} "
            f"lastStableOffset: {t.last_stable_offset}"
        )


def dump_snapshot(path: Path) -> Iterator[str]:
    """Each producer of a producer state snapshot, as ``kafka-dump-log.sh`` prints it."""
    yield f"Dumping {path}"
    for e in snapshot.decode(path.read_bytes(), str(path)):
        yield (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {e.txn_first_offset if e.txn_first_offset >= 0 else None} "
            f"lastTimestamp: {e.timestamp} lastSequence: {e.last_sequence} "
            f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta}"
        )


def marker_line(header: BatchHeader, batch: memoryview) -> str:
    """A control record as ``kafka-dump-log.sh --print-data-log`` prints it."""
    try:
        kind = control.NAMES.get(control.marker_type(batch, header), "UNKNOWN")
        epoch = control.marker_coordinator_epoch(batch, header)
    except CorruptRecordError as e:
        return f"| offset: {header.base_offset} unreadable control record: {e}"
    return f"| offset: {header.base_offset} endTxnMarker: {kind} coordinatorEpoch: {epoch}"
