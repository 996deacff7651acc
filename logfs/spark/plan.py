"""Offset planning for the Spark data source, with Spark's Kafka source semantics.

Everything decided from offsets alone: which topic-partitions a query reads, where it starts
and ends, how the ranges are cut for parallelism and rate-limited. It is plain Python over a
`Store` or a `RemoteStore` (only ``topics()`` and ``log(t, p)`` with ``log_start_offset``,
``next_offset`` and ``offset_for_time`` are used, so tests pass a fake), tested without a JVM.
The options it plans from are parsed in options.py.

A resolved offset map, used as the streaming offset, has only real offsets, topics and
partitions sorted::

    {"orders": {"0": 1200, "1": 1187}}

An `OffsetRange` is ``[start, end)`` of one topic-partition; one Spark input partition reads one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.config import INTERNAL_TOPICS
from .options import (
    DATA_LOSS_HINT,
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetRange,
    PartitionOffsets,
    SourceOptions,
    SparkOptionError,
    TopicPartition,
)

if TYPE_CHECKING:
    from ..core.log import Log, Store


def subscribed(store: Store, options: SourceOptions) -> list[TopicPartition]:
    """The topic-partitions the options select that exist now, sorted."""
    topics = store.topics()
    if options.assign is not None:
        missing = [tp for tp in options.assign if tp.partition >= topics.get(tp.topic, 0)]
        if missing:
            raise SparkOptionError(f"assigned partitions do not exist: {_names(missing)}")
        return sorted(set(options.assign))
    if options.subscribe is not None:
        names = [t for t in options.subscribe if t in topics]
    else:
        # Kafka's consumer leaves internal topics out of pattern subscriptions
        # (exclude.internal.topics=true); a listener also marks them is_internal.
        internal = INTERNAL_TOPICS | getattr(store, "internal_topics", frozenset())
        pattern = options.subscribe_pattern
        names = [t for t in topics if t not in internal and re.fullmatch(pattern, t)]
    return sorted(TopicPartition(t, p) for t in set(names) for p in range(topics[t]))


def resolve(
    store: Store,
    tps: list[TopicPartition],
    spec: str | PartitionOffsets,
    timestamps: int | Mapping[TopicPartition, int] | None,
    options: SourceOptions,
    *,
    ending: bool = False,
) -> PartitionOffsets:
    """Real offsets for ``tps`` from an offsets or timestamps option, as the Kafka source does."""
    if timestamps is not None:
        by_tp = timestamps if not isinstance(timestamps, int) else dict.fromkeys(tps, timestamps)
        _check_same_partitions(by_tp, tps, "OffsetsByTimestamp")
        return {tp: _offset_for_time(store.log(*tp), by_tp[tp], options, ending) for tp in tps}
    if isinstance(spec, str):
        spec = dict.fromkeys(tps, EARLIEST if spec == "earliest" else LATEST)
    else:
        _check_same_partitions(spec, tps, "Offsets")
    out = {}
    for tp in tps:
        log = store.log(*tp)
        offset = spec[tp]
        if offset == EARLIEST:
            offset = log.log_start_offset
        elif offset == LATEST:
            offset = log.next_offset
        elif offset < log.log_start_offset:
            if options.fail_on_data_loss and not ending:
                raise DataLossError(
                    f"offset {offset} of {tp.topic}-{tp.partition} is before its log start "
                    f"offset {log.log_start_offset} (deleted by retention). {DATA_LOSS_HINT}"
                )
            offset = log.log_start_offset
        out[tp] = offset
    return out


def _offset_for_time(log: Log, timestamp: int, options: SourceOptions, ending: bool) -> int:
    offset = log.offset_for_time(timestamp)
    if offset is not None:
        return offset
    if ending or options.timestamp_strategy == "latest":
        return log.next_offset
    raise SparkOptionError(
        f"no offset of {log.topic}-{log.partition} has a timestamp >= {timestamp}; "
        'set "startingOffsetsByTimestampStrategy" to "latest" to start at the end'
    )


def _check_same_partitions(spec: Mapping, tps: list[TopicPartition], kind: str) -> None:
    if set(spec) != set(tps):
        raise SparkOptionError(
            f"specific offsets (starting/ending{kind}) must name every subscribed partition, "
            f"and no other (use -1 for latest, -2 for earliest). Specified: {_names(spec)}; "
            f"subscribed: {_names(tps)}"
        )


def _names(tps: Any) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "none"


def batch_ranges(store: Store, options: SourceOptions) -> list[OffsetRange]:
    """The offset ranges of a batch query, split for parallelism."""
    tps = subscribed(store, options)
    start = resolve(store, tps, options.starting, options.starting_timestamp, options)
    end = resolve(store, tps, options.ending, options.ending_timestamp, options, ending=True)
    ranges = []
    for tp in tps:
        if start[tp] > end[tp]:
            raise SparkOptionError(
                f"starting offset {start[tp]} is after ending offset {end[tp]} "
                f"for {tp.topic}-{tp.partition}"
            )
        ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Kafka's KafkaOffsetRangeCalculator: drop empty ranges, cut each into pieces of at most
    ``max_records``, then cut the large ones further until there are ``min_partitions``."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _divide(r, math.ceil(r.size / max_records))]
    if min_partitions is not None and len(ranges) < min_partitions:
        ideal = sum(r.size for r in ranges) / min_partitions
        # math.floor(x + 0.5) is Scala's math.round (half up), not Python's half-to-even.
        ranges = [
            piece for r in ranges for piece in _divide(r, max(math.floor(r.size / ideal + 0.5), 1))
        ]
    return ranges


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out, start, remaining = [], r.start, r.size
    for part in range(parts):
        size = remaining // (parts - part)  # the last piece takes the rounding
        remaining -= size
        if size:
            out.append(r._replace(start=start, end=start + size))
        start += size
    return out


def rate_limit(
    limit: int, start: PartitionOffsets, end: PartitionOffsets, earliest: PartitionOffsets
) -> PartitionOffsets:
    """Kafka's maxOffsetsPerTrigger: share ``limit`` offsets between the partitions in
    proportion to their backlog, never starving a small one (``earliest`` starts new ones)."""
    sizes = {}
    for tp, until in end.items():
        size = until - start.get(tp, earliest.get(tp, until))
        if size > 0:
            sizes[tp] = size
    total = sum(sizes.values())
    if total < 1:
        return dict(end)
    out = {}
    for tp, until in end.items():
        if tp not in sizes:
            out[tp] = until
            continue
        prorate = limit * (sizes[tp] / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(until, start.get(tp, earliest.get(tp, until)) + step)
    return out


# ---------------------------------------------------------------- streaming offsets as JSON


def to_json(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """The stream offset form of an offset map: topics and partitions sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(offset: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {TopicPartition(t, int(p)): int(o) for t, ps in offset.items() for p, o in ps.items()}
