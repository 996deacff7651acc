"""Options and offset planning for the Spark data source, with Spark's Kafka source semantics.

Owns the reader options (`parse_options`) and everything decided from offsets alone: which
topic-partitions a query reads, where it starts and ends, how the ranges are cut for
parallelism and rate-limited. It is plain Python over a `Store` (only ``topics()`` and
``log(t, p)`` with ``log_start_offset``, ``next_offset`` and ``offset_for_time`` are used, so
tests pass a fake), tested without a JVM. Option values are parsed by the configuration's
parsers (`parse_int`, `parse_bool`); only the error type differs (`SparkOptionError`).

Offsets follow Kafka's JSON conventions: ``{"topic": {"0": 23, "1": -2}}`` where -2 means the
earliest offset (the log start offset) and -1 the latest (the next offset). A resolved offset
map, used as the streaming offset, has only real offsets, topics and partitions sorted::

    {"orders": {"0": 1200, "1": 1187}}

An `OffsetRange` is ``[start, end)`` of one topic-partition; one Spark input partition reads one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..core.config import parse_bool, parse_int
from ..core.errors import InvalidConfigError, LogfsError

if TYPE_CHECKING:
    from ..core.log import Log, Store

EARLIEST, LATEST = -2, -1
# Kafka leaves maxRecordsPerPartition unset (one Spark partition per topic-partition); logfs
# cuts large ranges so that every core gets work even from a single-partition topic.
DEFAULT_MAX_RECORDS_PER_PARTITION = 500_000
# The configuration's parsers of Kafka longs, as the options use them.
_OFFSET = parse_int(EARLIEST)  # an offset, or -2 (earliest) / -1 (latest)
_NATURAL = parse_int(0)  # a partition number or a timestamp
_POSITIVE = parse_int(1)  # a count
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Kafka's maxTriggerDelay default, "15m"
# Spark's time strings (Utils.timeStringAsMs): a number and a unit, milliseconds without one.
_TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
               "d": 86_400_000}  # fmt: skip
DATA_LOSS_HINT = (
    'If you want your query to go on in such cases, set the source option "failOnDataLoss" '
    'to "false".'
)


class SparkOptionError(LogfsError, ValueError):
    """An invalid or inconsistent data source option."""


class DataLossError(LogfsError):
    """Offsets a query needs are gone: deleted by retention, or the topic was deleted."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetRange(NamedTuple):
    """Offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


# Offsets keyed by topic-partition, as the Kafka source prints them.
PartitionOffsets = dict[TopicPartition, int]


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """The parsed reader options; names and defaults are those of Spark's Kafka source."""

    path: str
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: str | PartitionOffsets = "earliest"  # "earliest", "latest" or specific offsets
    ending: str | PartitionOffsets = "latest"
    starting_timestamp: int | Mapping[TopicPartition, int] | None = None
    ending_timestamp: int | Mapping[TopicPartition, int] | None = None
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = DEFAULT_MAX_RECORDS_PER_PARTITION


def parse_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Parse the (case-insensitive) option strings Spark hands the source.

    ``streaming`` None (the schema, asked before Spark says which kind of query it is)
    skips the checks that only one kind of query makes.

    Raises:
        SparkOptionError: naming the option and what is wrong with it.
    """
    opts = {k.lower(): v for k, v in options.items()}
    path = opts.get("path")
    if not path:
        raise SparkOptionError('option "path" (the logfs data directory) is required')
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(strategies) != 1:
        raise SparkOptionError(
            "exactly one of the options subscribe, subscribePattern, assign must be given"
            + (f" (got {', '.join(strategies)})" if strategies else "")
        )
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise SparkOptionError('no topics to subscribe to for option "subscribe"')
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise SparkOptionError(f'bad "subscribePattern" {pattern!r}: {e}') from None
    else:
        assign = tuple(
            TopicPartition(t, p)
            for t, parts in _json(opts["assign"], "assign").items()
            for p in _partition_list(parts)
        )

    starting = _offsets_option(opts, "startingoffsets", "latest" if streaming else "earliest")
    ending = _offsets_option(opts, "endingoffsets", "latest")
    if streaming:
        for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key in opts:
                raise SparkOptionError(f'option "{key}" is not valid in streaming queries')
    elif streaming is not None:
        if starting == "latest" or isinstance(starting, dict) and LATEST in starting.values():
            raise SparkOptionError("starting offset can't be latest for batch queries")
        if ending == "earliest" or isinstance(ending, dict) and EARLIEST in ending.values():
            raise SparkOptionError("ending offset can't be earliest for batch queries")

    max_rows = _option(opts, "maxoffsetspertrigger", _POSITIVE)
    min_rows = _option(opts, "minoffsetspertrigger", _POSITIVE)
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise SparkOptionError(
            f"The value of minOffsetPerTrigger({min_rows}) is higher than the "
            f"maxOffsetsPerTrigger({max_rows})."
        )
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SparkOptionError('"startingOffsetsByTimestampStrategy" must be error or latest')
    return SourceOptions(
        path=path,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamp=_timestamp_option(opts, "starting"),
        ending_timestamp=_timestamp_option(opts, "ending"),
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_rows,
        min_offsets_per_trigger=min_rows,
        max_trigger_delay_ms=_option(
            opts, "maxtriggerdelay", _time_ms, DEFAULT_MAX_TRIGGER_DELAY_MS
        ),
        fail_on_data_loss=_option(opts, "failondataloss", parse_bool, True),
        include_headers=_option(opts, "includeheaders", parse_bool, False),
        min_partitions=_option(opts, "minpartitions", _POSITIVE),
        max_records_per_partition=_option(
            opts, "maxrecordsperpartition", _POSITIVE, DEFAULT_MAX_RECORDS_PER_PARTITION
        ),
    )


def _time_ms(value: Any) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``, ``1000``) in ms."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(value).lower())
    if not match or match.group(2) not in (*_TIME_UNITS, ""):
        raise InvalidConfigError(f"not a duration (e.g. 15m, 30s, 500ms): {value!r}")
    return int(int(match.group(1)) * _TIME_UNITS.get(match.group(2), 1))


def _json(text: str, name: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise SparkOptionError(f'option "{name}" is not valid JSON: {e}') from None
    if not isinstance(value, dict):
        raise SparkOptionError(f'option "{name}" must be a JSON object, got {text!r}')
    return value


def _partition_list(parts: Any) -> list[int]:
    if not isinstance(parts, list) or not all(isinstance(p, int) and p >= 0 for p in parts):
        raise SparkOptionError(f'option "assign" wants lists of partition numbers, got {parts!r}')
    return parts


def _offsets_option(opts: Mapping[str, str], key: str, default: str) -> str | PartitionOffsets:
    text = opts.get(key, default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    return {
        tp: _parsed(_OFFSET, value, key) for tp, value in _tp_map(_json(text, key), key).items()
    }


def _timestamp_option(opts: Mapping[str, str], which: str) -> int | dict | None:
    # Kafka: <which>Timestamp (all partitions) wins over <which>OffsetsByTimestamp (JSON).
    if f"{which}timestamp" in opts:
        return _parsed(_NATURAL, opts[f"{which}timestamp"], f"{which}Timestamp")
    key = f"{which}offsetsbytimestamp"
    if key in opts:
        return {
            tp: _parsed(_NATURAL, v, key) for tp, v in _tp_map(_json(opts[key], key), key).items()
        }
    return None


def _tp_map(obj: dict, key: str) -> dict[TopicPartition, Any]:
    out = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise SparkOptionError(f'option "{key}": {topic!r} must map partitions to values')
        for p, value in parts.items():
            out[TopicPartition(topic, _parsed(_NATURAL, p, key))] = value
    return out


_T = TypeVar("_T")


def _parsed(parse: Callable[[Any], _T], value: Any, name: str) -> _T:
    """``parse(value)``, its `InvalidConfigError` turned into a `SparkOptionError` naming the
    option."""
    try:
        return parse(value)
    except InvalidConfigError as e:
        raise SparkOptionError(f'option "{name}": {e}') from None


def _option(
    opts: Mapping[str, str], key: str, parse: Callable[[Any], _T], default: _T | None = None
) -> _T | None:
    """The option ``key`` (lower case) parsed, or ``default`` when it is not set."""
    return _parsed(parse, opts[key], key) if key in opts else default


# ---------------------------------------------------------------- resolving against a store


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
        names = [t for t in topics if re.fullmatch(options.subscribe_pattern, t)]
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
