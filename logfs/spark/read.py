"""Batch and streaming readers of the ``logfs`` Spark data source.

Planning (``partitions``, ``initialOffset``, ``latestOffset``) runs on the driver and opens the
data directory read-only each time, so it sees what a live writer appended since; ``read`` runs
in executor workers, is stateless and opens the store read-only too (no lock, no writes, safe
beside a running mount or writer). With ``kafka.bootstrap.servers`` instead of ``path`` both
open a `RemoteStore` of the listener instead: the same planning over ListOffsets, the same
reading over Fetch.

The stream offset is the Kafka source's per-partition JSON, ``{"topic": {"0": 42}}``: the next
offset to read of every partition. A micro-batch reads ``[start, end)`` of each partition, so a
query restarted from its checkpoint resumes exactly where the last committed batch ended.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from ..core.client import RemoteStore
from ..core.config import now_ms
from ..core.errors import UnknownTopicError
from ..core.log import Store
from .isolation import Committed
from .options import OffsetRange, PartitionOffsets, SourceOptions
from .plan import (
    batch_ranges,
    from_json,
    late_bound,
    micro_batch_ranges,
    rate_limit,
    resolve,
    subscribed,
    to_json,
)


class RangePartition(InputPartition):
    """One Spark input partition: one offset range of one topic-partition; a batch query's
    ``earliest`` start and ``latest`` end are bound when the task reads (`late_bound`)."""

    def __init__(self, r: OffsetRange, late_start: bool = False, late_end: bool = False) -> None:
        super().__init__(r)
        self.range = r
        self.late_start = late_start
        self.late_end = late_end


def _open(options: SourceOptions) -> Store | RemoteStore | Committed:
    """The store a query reads, as ``kafka.isolation.level`` says (isolation.py)."""
    if options.listener is not None:  # it reads as asked itself
        return options.listener.store(read_committed=options.read_committed)
    store = Store(options.path, read_only=True)
    return Committed(store) if options.read_committed else store


def _read(options: SourceOptions, partition: InputPartition) -> Iterator:
    from .arrow import read_range

    if not isinstance(partition, RangePartition):
        # Spark hands a bare InputPartition when `partitions` planned none (an empty
        # selection): nothing to read, as the Kafka source reads nothing.
        return
    with _open(options) as store:
        r = partition.range
        if partition.late_start or partition.late_end:
            try:
                log = store.log(r.topic, r.partition)
            except UnknownTopicError:
                pass  # read_range reports it
            else:
                start = log.log_start_offset if partition.late_start else r.start
                r = r._replace(start=start, end=log.next_offset if partition.late_end else r.end)
        yield from read_range(
            store,
            r,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
        )


class LogfsBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[RangePartition]:
        with _open(self.options) as store:
            ranges = batch_ranges(store, self.options)
        return [
            RangePartition(r, *late)
            for r, late in zip(ranges, late_bound(self.options, ranges), strict=True)
        ]

    def read(self, partition: InputPartition) -> Iterator:
        return _read(self.options, partition)


class LogfsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-partition offsets, with Kafka's admission control:
    ``maxOffsetsPerTrigger``, and ``minOffsetsPerTrigger`` waiting at most
    ``maxTriggerDelay`` (both off under ``Trigger.AvailableNow`` and ``Once``, which read
    all that was there)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: PartitionOffsets | None = None  # Trigger.AvailableNow: not past this
        self._last_trigger_ms = 0  # when minOffsetsPerTrigger last let a batch run

    def initialOffset(self) -> dict:
        with _open(self.options) as store:
            tps = subscribed(store, self.options)
            o = self.options
            return to_json(resolve(store, tps, o.starting, o.starting_timestamp, o))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()[0]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end offset of the next micro-batch: every subscribed partition that exists now
        (Kafka's ``fetchLatestOffsets``), so a partition that went away leaves the offset
        and one that appears (again) is read as new, from its log start. A batch whose end
        lost partitions of its start reports them as gone (`partitions`)."""
        begin = from_json(start)
        current, earliest = self._latest()
        latest = current
        if self._target is not None:
            latest = {tp: min(o, current[tp]) for tp, o in self._target.items() if tp in current}
        if not isinstance(limit, ReadAllAvailable):
            latest = self._admit(limit, begin, latest, earliest)
        return to_json(latest)

    def _admit(
        self,
        limit: ReadLimit,
        begin: PartitionOffsets,
        latest: PartitionOffsets,
        earliest: PartitionOffsets,
    ) -> PartitionOffsets:
        """Kafka's admission control: no batch while fewer than minOffsetsPerTrigger
        offsets wait and maxTriggerDelay has not passed since the last batch; at most
        maxOffsetsPerTrigger offsets in one. Spark's Python API passes one limit, so the
        other comes from the options."""
        o = self.options
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_offsets_per_trigger
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
        if min_rows is not None and self._target is None:
            now = now_ms()
            waiting = sum(end - begin.get(tp, 0) for tp, end in latest.items())  # Kafka's sum
            if now - self._last_trigger_ms < o.max_trigger_delay_ms and waiting < min_rows:
                return begin  # the start again: no batch
            self._last_trigger_ms = now
        if max_rows is not None:
            return rate_limit(max_rows, begin, latest, earliest)
        return latest

    def reportLatestOffset(self) -> dict:
        return to_json(self._latest()[0])

    def _latest(self) -> tuple[PartitionOffsets, PartitionOffsets]:
        with _open(self.options) as store:
            latest, earliest = {}, {}
            for tp in subscribed(store, self.options):
                log = store.log(*tp)
                latest[tp], earliest[tp] = log.next_offset, log.log_start_offset
            return latest, earliest

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin, until = from_json(start), from_json(end)
        earliest = self._latest()[1] if any(tp not in begin for tp in until) else {}
        return [RangePartition(r) for r in micro_batch_ranges(begin, until, earliest, self.options)]

    def read(self, partition: InputPartition) -> Iterator:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: every read opens and closes its own read-only store
