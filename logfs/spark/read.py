"""Batch and streaming readers of the ``logfs`` Spark data source.

Planning (``partitions``, ``initialOffset``, ``latestOffset``) runs on the driver and opens the
data directory read-only each time, so it sees what a live writer appended since; ``read`` runs
in executor workers, is stateless and opens the store read-only too (no lock, no writes, safe
beside a running mount or writer).

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
    SupportsTriggerAvailableNow,
)

from ..core.log import Store
from .plan import (
    DATA_LOSS_HINT,
    DataLossError,
    OffsetMap,
    OffsetRange,
    SourceOptions,
    TopicPartition,
    batch_ranges,
    from_json,
    rate_limit,
    resolve,
    split_ranges,
    subscribed,
    to_json,
)


class RangePartition(InputPartition):
    """One Spark input partition: one offset range of one topic-partition."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)
        self.range = r


def _open(path: str) -> Store:
    return Store(path, read_only=True)


def _read(options: SourceOptions, partition: RangePartition) -> Iterator:
    from .arrow import read_range

    with _open(options.path) as store:
        yield from read_range(
            store,
            partition.range,
            include_headers=options.include_headers,
            fail_on_data_loss=options.fail_on_data_loss,
        )


class LogfsBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[RangePartition]:
        with _open(self.options.path) as store:
            return [RangePartition(r) for r in batch_ranges(store, self.options)]

    def read(self, partition: RangePartition) -> Iterator:
        return _read(self.options, partition)


class LogfsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-partition offsets, with Kafka's admission control."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._target: OffsetMap | None = None  # Trigger.AvailableNow: never read past this

    def initialOffset(self) -> dict:
        with _open(self.options.path) as store:
            tps = subscribed(store, self.options)
            o = self.options
            return to_json(resolve(store, tps, o.starting, o.starting_timestamp, o))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()[0]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        latest, earliest = self._latest()
        if self._target is not None:
            latest = {tp: min(o, latest.get(tp, o)) for tp, o in self._target.items()}
        gone = [tp for tp in begin if tp not in latest]
        if gone and self.options.fail_on_data_loss and self._target is None:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            raise DataLossError(f"partitions {names} are gone (topic deleted?). {DATA_LOSS_HINT}")
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(limit.max_rows, begin, latest, earliest)
        # A partition that went away keeps its last position, so the offset stays comparable.
        return to_json({**{tp: begin[tp] for tp in gone}, **latest})

    def reportLatestOffset(self) -> dict:
        return to_json(self._latest()[0])

    def _latest(self) -> tuple[OffsetMap, OffsetMap]:
        with _open(self.options.path) as store:
            latest, earliest = {}, {}
            for tp in subscribed(store, self.options):
                log = store.log(*tp)
                latest[tp], earliest[tp] = log.next_offset, log.log_start_offset
            return latest, earliest

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin, until = from_json(start), from_json(end)
        ranges = []
        earliest: dict[TopicPartition, int] | None = None
        for tp, stop in until.items():
            if tp not in begin:  # a partition (or topic) that appeared: Kafka reads it all
                if earliest is None:
                    earliest = self._latest()[1]
                begin[tp] = earliest.get(tp, stop)
            if stop < begin[tp]:
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        f"the offset of {tp.topic}-{tp.partition} went back from {begin[tp]} to "
                        f"{stop} (topic recreated?); records may have been missed. "
                        + DATA_LOSS_HINT
                    )
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, begin[tp], stop))
        o = self.options
        return [
            RangePartition(r)
            for r in split_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        ]

    def read(self, partition: RangePartition) -> Iterator:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: every read opens and closes its own read-only store
