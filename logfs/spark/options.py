"""The Spark data source's reader options, with the names, defaults and checks of Spark's
Kafka source (`parse_options`), and the values they are parsed into: topic-partitions, offset
ranges, offsets keyed by topic-partition. Option values are parsed by the configuration's
parsers (`parse_int`, `parse_bool`); only the error type differs (`SparkOptionError`).

Offsets follow Kafka's JSON conventions: ``{"topic": {"0": 23, "1": -2}}`` where -2 means the
earliest offset (the log start offset) and -1 the latest (the next offset).

Where the log is, ``path`` or ``kafka.bootstrap.servers``: `parse_location` (listener.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from ..core.config import parse_bool, parse_int
from ..core.errors import InvalidConfigError, LogfsError
from .errors import SparkOptionError
from .isolation import read_committed
from .listener import Listener, parse_location

EARLIEST, LATEST = -2, -1
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
DATA_LOSS_IGNORED = (
    "Some data may have been lost because they are not available any more; either they were "
    "deleted by retention or the topic was deleted before all its records were read. If you "
    'want your query to fail in such cases, set the source option "failOnDataLoss" to "true".'
)


# The options as Kafka's documentation spells them: Spark hands them over lower-cased, and
# messages name them as users write them.
SPELLING = {
    name.lower(): name
    for name in (
        "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
        "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
        "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "failOnDataLoss",
        "includeHeaders", "minPartitions", "maxRecordsPerPartition", "lockTimeout",
    )
}  # fmt: skip


def spelled(key: str) -> str:
    """An option's name as Kafka's documentation writes it."""
    return SPELLING.get(key.lower(), key)


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
    """The parsed reader options; names and defaults are those of Spark's Kafka source.
    Exactly one of ``path`` and ``listener`` is set."""

    path: str | None
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
    max_records_per_partition: int | None = None  # Kafka's default: ranges are not cut
    listener: Listener | None = None
    read_committed: bool = False  # kafka.isolation.level (isolation.py)


def parse_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Parse the (case-insensitive) option strings Spark hands the source.

    ``streaming`` None (the schema, asked before Spark says which kind of query it is)
    skips the checks that only one kind of query makes.

    Raises:
        SparkOptionError: naming the option and what is wrong with it.
    """
    opts = {k.lower(): v for k, v in options.items()}
    path, listener = parse_location(opts)
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
                raise SparkOptionError(f'option "{spelled(key)}" is not valid in streaming queries')
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
        listener=listener,
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
        max_records_per_partition=_option(opts, "maxrecordsperpartition", _POSITIVE),
        read_committed=read_committed(opts),
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
        raise SparkOptionError(f'option "{spelled(name)}" is not valid JSON: {e}') from None
    if not isinstance(value, dict):
        raise SparkOptionError(f'option "{spelled(name)}" must be a JSON object, got {text!r}')
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
            raise SparkOptionError(
                f'option "{spelled(key)}": {topic!r} must map partitions to values'
            )
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
        raise SparkOptionError(f'option "{spelled(name)}": {e}') from None


def _option(
    opts: Mapping[str, str], key: str, parse: Callable[[Any], _T], default: _T | None = None
) -> _T | None:
    """The option ``key`` (lower case) parsed, or ``default`` when it is not set."""
    return _parsed(parse, opts[key], key) if key in opts else default
