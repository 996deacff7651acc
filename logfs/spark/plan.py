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

import logging
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.config import INTERNAL_TOPICS
from .options import (
    DATA_LOSS_HINT,
    DATA_LOSS_IGNORED,
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

log = logging.getLogger("logfs.spark")


def subscribed(store: Store, options: SourceOptions) -> list[TopicPartition]:
    """The topic-partitions the options select that exist now, sorted."""
    topics = store.topics()
    if options.assign is not None:
        # Kafka's AssignStrategy: the assigned partitions that exist now (one that appears
        # later is read as new, one that goes away is gone).
        return sorted({tp for tp in options.assign if tp.partition < topics.get(tp.topic, 0)})
    if options.subscribe is not None:
        names = [t for t in options.subscribe if t in topics]
    else:
        # Kafka's SubscribePatternStrategy: a topic matches when the pattern is found in its
        # name (Scala's findFirstIn), and internal topics are never listed; a listener also
        # marks them is_internal.
        internal = INTERNAL_TOPICS | getattr(store, "internal_topics", frozenset())
        pattern = options.subscribe_pattern
        names = [t for t in topics if t not in internal and re.search(pattern, t)]
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
    """The offset ranges of a batch query, one per topic-partition, or cut for parallelism.

    As Kafka's ``getOffsetRangesFromUnresolvedOffsets``: the ranges are cut only when
    ``minPartitions`` exceeds the number of topic-partitions or a range *as the options give
    it* is longer than ``maxRecordsPerPartition`` (``earliest`` and ``latest`` count as -2
    and -1 there, so a range between them is never cut by ``maxRecordsPerPartition`` alone).
    Uncut, every topic-partition keeps its range, an empty one too (an empty task).
    """
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
    min_partitions, max_records = options.min_partitions, options.max_records_per_partition
    given_from = _as_given(options.starting, options.starting_timestamp, start)
    given_until = _as_given(options.ending, options.ending_timestamp, end)
    if (min_partitions is not None and min_partitions > len(ranges)) or (
        max_records is not None
        and any(given_until[tp] - given_from[tp] > max_records for tp in tps)
    ):
        return split_ranges(ranges, min_partitions, max_records)
    return ranges


def _as_given(
    spec: str | PartitionOffsets, timestamps: object, resolved: PartitionOffsets
) -> PartitionOffsets:
    """The offsets as the options name them before they are looked up: -2 for earliest, -1
    for latest (timestamps are looked up first, as Kafka's source does)."""
    if timestamps is not None:
        return resolved
    if isinstance(spec, str):
        return dict.fromkeys(resolved, EARLIEST if spec == "earliest" else LATEST)
    return {tp: spec.get(tp, offset) for tp, offset in resolved.items()}


def late_bound(options: SourceOptions, ranges: list[OffsetRange]) -> list[tuple[bool, bool]]:
    """Per range of a batch query, whether its start and its end are bound when the task
    reads, as Kafka's source binds ``earliest`` and ``latest`` (``resolveRange``): the first
    range of a topic-partition whose start the options give as earliest starts at the log
    start offset of the moment it is read, the last one whose end they give as latest ends
    at the next offset of that moment."""
    first, last = {}, {}
    for i, r in enumerate(ranges):
        first.setdefault((r.topic, r.partition), i)
        last[(r.topic, r.partition)] = i

    def given(spec: str | PartitionOffsets, timestamps: object, special: int, name: str):
        if timestamps is not None:
            return lambda tp: False
        if isinstance(spec, str):
            return lambda tp: spec == name
        return lambda tp: spec.get(TopicPartition(*tp)) == special

    early = given(options.starting, options.starting_timestamp, EARLIEST, "earliest")
    late = given(options.ending, options.ending_timestamp, LATEST, "latest")
    return [
        (first[tp] == i and early(tp), last[tp] == i and late(tp))
        for i, tp in enumerate((r.topic, r.partition) for r in ranges)
    ]


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Kafka's ``KafkaOffsetRangeCalculator.getRanges``, rule for rule.

    Empty ranges are dropped. Each range longer than ``max_records`` is cut into
    ``ceil(size / max_records)`` pieces. Then, while there are fewer ranges than
    ``min_partitions``, each range gets ``round(size / total * min_partitions)`` pieces (at
    least one); the topic-partitions of the ranges that get one are left whole and taken out of
    the sums, and the others share what is left of ``min_partitions``.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records is None and (min_partitions is None or len(ranges) >= min_partitions):
        return ranges
    if max_records is not None:
        ranges = [p for r in ranges for p in _divide(r, math.ceil(r.size / max_records))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
    # Kafka keys this by topic-partition: every piece of a partition with one whole piece
    # stays whole.
    whole = {(r.topic, r.partition) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    return [
        piece
        for r in ranges
        for piece in _divide(
            r, 1 if (r.topic, r.partition) in whole else _part_count(r.size, split_total, split_min)
        )
    ]


def _part_count(size: int, total: int, parts: int) -> int:
    # math.floor(x + 0.5) is Scala's math.round (half up), not Python's half-to-even.
    return max(math.floor(size / total * parts + 0.5), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out, start, remaining = [], r.start, r.size
    for part in range(parts):
        size = remaining // (parts - part)  # the last piece takes the rounding
        remaining -= size
        end = min(start + size, r.end)
        if end > start:
            out.append(r._replace(start=start, end=end))
        start = end
    return out


def micro_batch_ranges(
    begin: PartitionOffsets,
    until: PartitionOffsets,
    earliest: PartitionOffsets,
    options: SourceOptions,
) -> list[OffsetRange]:
    """The ranges of one micro-batch from its start and end offsets, as Kafka's
    ``getOffsetRangesFromResolvedOffsets``: a partition in the end offset but not the start is
    new and read from ``earliest`` (its log start now); one in the start but not the end is
    gone; one whose offset went back has lost what it had. Each of these is data loss
    (`report_data_loss`: an error, or with ``failOnDataLoss=false`` a warning); so is a new
    partition that does not start at offset 0, or is gone again already.
    """
    new = [tp for tp in until if tp not in begin]
    found = {tp: earliest[tp] for tp in new if tp in earliest}
    if len(found) < len(new):
        missing = [tp for tp in new if tp not in found]
        report_data_loss(
            f"Cannot find earliest offsets of {_names(missing)}. Some data may have been missed",
            options,
        )
    for tp, offset in found.items():
        if offset != 0:
            report_data_loss(
                f"Added partition {tp.topic}-{tp.partition} starts from {offset} instead of 0. "
                "Some data may have been missed",
                options,
            )
    gone = [tp for tp in begin if tp not in until]
    if gone:
        report_data_loss(f"{_names(gone)} are gone. Some data may have been missed", options)
    ranges = []
    for tp, stop in until.items():
        if tp not in begin and tp not in found:
            continue
        first = begin.get(tp, found.get(tp))
        if stop < first:
            report_data_loss(
                f"Partition {tp.topic}-{tp.partition}'s offset was changed from {first} to "
                f"{stop}, some data may have been missed",
                options,
            )
        ranges.append(OffsetRange(tp.topic, tp.partition, first, stop))
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


def report_data_loss(message: str, options: SourceOptions) -> None:
    """Kafka's ``reportDataLoss``: `DataLossError` with ``failOnDataLoss`` (the default),
    else a warning in the log of the process that planned or read."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    log.warning("%s. %s", message, DATA_LOSS_IGNORED)


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
