"""The Spark data source's reader options, with the names, defaults and checks of Spark's
Kafka source (`parse_options`), and the values they are parsed into: topic-partitions, offset
ranges, offsets keyed by topic-partition. Option values are parsed by the configuration's
parsers (`parse_int`, `parse_bool`); only the error type differs (`SparkOptionError`).

Offsets follow Kafka's JSON conventions: ``{"topic": {"0": 23, "1": -2}}`` where -2 means the
earliest offset (the log start offset) and -1 the latest (the next offset).

Where the log is (`parse_location`, for the source and the sink): ``path``, a data directory,
or Spark's ``kafka.bootstrap.servers``, a logfs Kafka listener (`Listener`), with the Kafka
client options that concern the connection: ``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config`` (SASL/PLAIN), ``kafka.request.timeout.ms``
and ``kafka.client.id``. Other ``kafka.*`` options are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from ..core.client import Producer, RemoteStore
from ..core.config import parse_bool, parse_int
from ..core.errors import InvalidConfigError, LogfsError

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
class Listener:
    """A logfs Kafka listener (or Kafka broker) named by Spark's ``kafka.*`` options."""

    servers: str  # Kafka's bootstrap.servers: HOST:PORT[,HOST:PORT...], tried in order
    username: str | None = None  # SASL/PLAIN
    password: str | None = dataclasses.field(default=None, repr=False)
    timeout: float = 30.0  # seconds: kafka.request.timeout.ms
    client_id: str = "logfs-spark"

    @property
    def address(self) -> str:
        return "kafka://" + self.servers

    def store(self) -> RemoteStore:
        """A read-only view of the listener's topics (connects on first use)."""
        return RemoteStore(
            self.address,
            timeout=self.timeout,
            sasl_plain_username=self.username,
            sasl_plain_password=self.password,
            client_id=self.client_id,
        )

    def producer(self, **options: Any) -> Producer:
        return Producer(
            self.address,
            mount_timeout=self.timeout,
            sasl_plain_username=self.username,
            sasl_plain_password=self.password,
            client_id=self.client_id,
            **options,
        )


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
    max_records_per_partition: int | None = DEFAULT_MAX_RECORDS_PER_PARTITION
    listener: Listener | None = None


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
        max_records_per_partition=_option(
            opts, "maxrecordsperpartition", _POSITIVE, DEFAULT_MAX_RECORDS_PER_PARTITION
        ),
    )


def parse_location(opts: Mapping[str, str]) -> tuple[str | None, Listener | None]:
    """``(path, None)`` or ``(None, listener)`` from the (lower-case) options: exactly one
    of ``path`` and ``kafka.bootstrap.servers`` must be given."""
    path, servers = opts.get("path"), opts.get("kafka.bootstrap.servers")
    if bool(path) == bool(servers):
        raise SparkOptionError(
            'exactly one of the options "path" (a logfs data directory) and '
            '"kafka.bootstrap.servers" (a logfs Kafka listener) must be given'
            + (" (got both)" if path else "")
        )
    if path:
        return path, None
    protocol = opts.get("kafka.security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SASL_PLAINTEXT"):
        raise SparkOptionError(
            f'option "kafka.security.protocol": {protocol} is not supported '
            "(PLAINTEXT or SASL_PLAINTEXT)"
        )
    username = password = None
    if protocol == "SASL_PLAINTEXT":
        # Kafka's default mechanism is GSSAPI, which logfs does not offer.
        mechanism = opts.get("kafka.sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism != "PLAIN":
            raise SparkOptionError(
                f'option "kafka.sasl.mechanism": {mechanism} is not supported (PLAIN)'
            )
        username, password = _plain_jaas(opts.get("kafka.sasl.jaas.config"))
    timeout = _option(opts, "kafka.request.timeout.ms", _POSITIVE, 30_000) / 1000
    listener = Listener(
        servers.strip(),
        username,
        password,
        timeout,
        opts.get("kafka.client.id") or Listener.client_id,
    )
    try:
        listener.store()  # checks the address list; connects only when used
    except InvalidConfigError as e:
        raise SparkOptionError(f'option "kafka.bootstrap.servers": {e}') from None
    return None, listener


PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|([=;]))', re.DOTALL)


def _plain_jaas(text: str | None) -> tuple[str, str]:
    """username and password of ``kafka.sasl.jaas.config`` as Kafka's clients read it:
    ``<PlainLoginModule> required username="u" password="p";`` (values quoted or not,
    backslash escapes inside quotes)."""
    name = '"kafka.sasl.jaas.config"'
    if not text or not text.strip():
        example = f'{PLAIN_LOGIN_MODULE} required username="u" password="p";'
        raise SparkOptionError(f"option {name} is required with SASL_PLAINTEXT, e.g. {example}")
    tokens, pos, text = [], 0, text.strip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise SparkOptionError(f"option {name}: cannot parse {text[pos:]!r}")
        quoted, word, sign = match.groups()
        tokens.append(re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else word or sign)
        pos = match.end()
    if len(tokens) < 3 or tokens[-1] != ";" or ";" in tokens[:-1]:
        raise SparkOptionError(f"option {name}: expected one login module ending with ';'")
    module, flag, pairs = tokens[0], tokens[1], tokens[2:-1]
    if module != PLAIN_LOGIN_MODULE:
        raise SparkOptionError(
            f"option {name}: login module {module} is not supported (only SASL/PLAIN: "
            f"{PLAIN_LOGIN_MODULE})"
        )
    if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
        raise SparkOptionError(f"option {name}: {flag!r} is not a JAAS control flag")
    if len(pairs) % 3 or any(pairs[i + 1] != "=" for i in range(0, len(pairs), 3)):
        raise SparkOptionError(f'option {name}: expected key="value" pairs after {flag}')
    values = {pairs[i]: pairs[i + 2] for i in range(0, len(pairs), 3)}
    if "username" not in values or "password" not in values:
        raise SparkOptionError(f"option {name}: username and password are required")
    return values["username"], values["password"]


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
