"""What a ``read_committed`` reader sees of a range of a partition, as Kafka's
consumer decides it from a Fetch answer (``CompletedFetch`` with isolation level
READ_COMMITTED): records below the last stable offset only, never a control
batch, never a record of an aborted transaction.

A `Visibility` is made for one range from the partition's last stable offset and
the aborted transactions overlapping it (the segments' ``.txnindex`` files). Kafka's
rule, over batches in offset order: once a batch reaches an aborted transaction's
first offset, that producer's transactional batches are dropped until its abort
marker. Within one producer transactions never overlap, so a transactional batch
is dropped exactly when some aborted transaction of its producer spans its first
offset — which `hides` asks without needing the batches before it (readers start
anywhere).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..format.record import BatchHeader
from ..storage.txnindex import AbortedTxn


class Visibility:
    """The committed view of a range: its end (the last stable offset, or less)
    and the aborted transactions that overlap it. The uncommitted view
    (`everything`) hides control batches only."""

    def __init__(self, end: int, aborted: Iterable[AbortedTxn] = (), *, committed: bool = True):
        self.end = end
        self.committed = committed
        self.aborted_list = sorted(aborted, key=lambda t: t.first_offset)
        self._spans: dict[int, tuple[list[int], list[int]]] = {}
        for txn in self.aborted_list:
            firsts, lasts = self._spans.setdefault(txn.producer_id, ([], []))
            firsts.append(txn.first_offset)
            lasts.append(txn.last_offset)

    @classmethod
    def everything(cls, end: int) -> Visibility:
        return cls(end, committed=False)

    @property
    def plain(self) -> bool:
        """Nothing to hide but control batches (no aborted transaction in range)."""
        return not self._spans

    def aborted(self, header: BatchHeader) -> bool:
        """Whether ``header``'s batch belongs to an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        spans = self._spans.get(header.producer_id)
        if spans is None:
            return False
        firsts, lasts = spans
        i = bisect.bisect_right(firsts, header.base_offset) - 1
        return i >= 0 and header.base_offset <= lasts[i]

    def hides(self, header: BatchHeader) -> bool:
        """Whether a reader of this view leaves the whole batch out (records
        past `end` in a batch that starts before it are the caller's to cut)."""
        if header.is_control:
            return True
        if not self.committed:
            return False
        return header.base_offset >= self.end or self.aborted(header)

    def shows(self, offset: int, header: BatchHeader) -> bool:
        """Whether the record at ``offset`` of ``header``'s batch is visible."""
        return offset < self.end and not self.hides(header)

    def batches(self, batches: Iterable[tuple[BatchHeader, object]]) -> Iterator:
        """The (header, batch) pairs a reader keeps."""
        for header, batch in batches:
            if not self.hides(header):
                yield header, batch


class TxnSummary(NamedTuple):
    """An open transaction of a partition, as ``state`` and DescribeProducers show it."""

    producer_id: int
    epoch: int
    first_offset: int
