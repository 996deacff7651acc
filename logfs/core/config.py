"""Topic configuration with Kafka's names, units and defaults.

A topic's effective configuration is Kafka's default for each key, overridden
by the mount-wide defaults (``logfs mount -o key=value``), overridden by the
topic's own settings. The topic's own settings are stored in
``DATA/config/<topic>.properties`` as Java-properties-style ``key=value``
lines; only keys that differ from the defaults are written.

The flush and retention decisions are pure predicates over plain numbers so
they can be tested with tables; callers do the I/O. The roll rule is a
segment's (core/storage/books.pyx), where both append paths call it.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from .errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# Kafka's internal topics: the group coordinator's log (logfs/kafka), which pattern
# subscriptions leave out (Kafka's consumer's exclude.internal.topics=true).
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"  # the transaction coordinator's log (logfs/groups)
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})


_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def parse_int(low: int, high: int = LONG_MAX) -> Callable[[Any], int]:
    """A parser of integers in ``[low, high]`` (Kafka's longs by default), from text or int.

    The parsers here are shared by the topic configuration and the Spark source's options;
    they raise `InvalidConfigError` and leave naming the key to the caller.
    """

    def parse(value: Any) -> int:
        text = str(value).strip()
        # ASCII digits only: Python's int() also takes "1_000" and other scripts' digits,
        # which Kafka's configuration parser refuses.
        if not _INTEGER.fullmatch(text):
            raise InvalidConfigError(f"not an integer: {value!r}")
        number = int(text)
        if number < low:
            raise InvalidConfigError(f"{number} is below {low}")
        if number > high:
            raise InvalidConfigError(f"{number} is above {high}")
        return number

    return parse


def parse_choice(*allowed: str) -> Callable[[Any], str]:
    """A parser of one of the ``allowed`` words (case-sensitive, as Kafka's)."""

    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in allowed:
            raise InvalidConfigError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def parse_bool(value: Any) -> bool:
    """``true`` or ``false``, in any case."""
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"{value!r} is not true or false")
    return text == "true"


def parse_ratio(value: Any) -> float:
    """A number in [0, 1]."""
    text = str(value).strip()
    if not _DECIMAL.fullmatch(text):
        raise InvalidConfigError(f"not a number: {value!r}")
    number = float(text)
    if not 0 <= number <= 1:
        raise InvalidConfigError(f"{number} is not between 0 and 1")
    return number


def parse_policy(value: Any) -> str:
    """Kafka's cleanup.policy: ``delete``, ``compact`` or both (a list, any
    order); returned as ``delete``, ``compact`` or ``compact,delete``."""
    words = {w.strip() for w in str(value).split(",")}
    if not words or not words <= {"delete", "compact"}:
        raise InvalidConfigError(f"{str(value).strip()!r} is not delete, compact or both")
    return ",".join(sorted(words))


def _separator(value: Any) -> str:
    text = str(value)
    if not text or "\n" in text:
        raise InvalidConfigError("key.separator must be non-empty and contain no newline")
    return text


@dataclasses.dataclass(frozen=True)
class TopicConfig:
    """The effective configuration of one topic; field names are Kafka's with
    dots as underscores, units are Kafka's (bytes, milliseconds, messages)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    # Kafka leaves both flush settings at "never" and relies on replication.
    # logfs is one node: fsync at least once a second bounds power-failure loss.
    flush_messages: int = LONG_MAX
    flush_ms: int = 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    # The log cleaner (compacted topics), Kafka's keys and defaults.
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3600 * 1000
    compression_type: str = "producer"
    message_timestamp_type: str = "CreateTime"
    # The console producer's key parsing, used by the mount's append files.
    parse_key: bool = False
    key_separator: str = "\t"

    @classmethod
    def from_properties(
        cls, overrides: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
    ) -> TopicConfig:
        """Build a config from Kafka-named properties; raises `InvalidConfigError`."""
        values = {}
        for layer in (defaults or {}, overrides or {}):
            values.update(parse_properties(layer))
        return cls(**values)

    @property
    def compact(self) -> bool:
        """cleanup.policy includes compact: the log cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete: retention.ms and retention.bytes apply."""
        return "delete" in self.cleanup_policy

    def to_properties(self) -> dict[str, str]:
        """All keys with Kafka names and string values."""
        return {
            _kafka_name(f.name): _format(getattr(self, f.name)) for f in dataclasses.fields(self)
        }


PARSERS: dict[str, Callable[[Any], Any]] = {
    "segment.bytes": parse_int(14, INT_MAX),
    "segment.ms": parse_int(1),
    "segment.index.bytes": parse_int(8, INT_MAX),
    "index.interval.bytes": parse_int(0, INT_MAX),
    "flush.messages": parse_int(1),
    "flush.ms": parse_int(0),
    "retention.ms": parse_int(-1),
    "retention.bytes": parse_int(-1),
    "max.message.bytes": parse_int(0, INT_MAX),
    "cleanup.policy": parse_policy,
    "min.cleanable.dirty.ratio": parse_ratio,
    "min.compaction.lag.ms": parse_int(0),
    "max.compaction.lag.ms": parse_int(1),
    "delete.retention.ms": parse_int(0),
    "compression.type": parse_choice(*CODECS),
    "message.timestamp.type": parse_choice(*TIMESTAMP_TYPES),
    "parse.key": parse_bool,
    "key.separator": _separator,
}


def _kafka_name(field: str) -> str:
    return field.replace("_", ".")


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Validate Kafka-named keys and values; returns dataclass field values."""
    fields = {}
    for key, value in properties.items():
        parser = PARSERS.get(key)
        if parser is None:
            raise InvalidConfigError(f"unknown configuration key {key!r}")
        if isinstance(value, str) and not _is_text(value):
            raise InvalidConfigError(f"{key}: the value is not valid UTF-8: {value!r}")
        try:
            fields[key.replace(".", "_")] = parser(value)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"{key}: {e}") from None
    return fields


def _is_text(value: str) -> bool:
    """Whether ``value`` is Unicode text (bytes that were not UTF-8 decode to lone
    surrogates, which can be neither stored nor used as text)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# What write_properties escapes (\t, \n, \\, \xNN, \uNNNN, \UNNNNNNNN); as in Java
# properties, a backslash before any other character stands for that character.
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.?)", re.DOTALL)
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(value: str) -> str:
    def one(m: re.Match) -> str:
        code = m[1]
        if len(code) > 2 and code[0] in "xuU":
            n = int(code[1:], 16)
            if n > sys.maxunicode or 0xD800 <= n < 0xE000:
                raise InvalidConfigError(f"\\{code} names no Unicode character")
            return chr(n)
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(one, value)


def read_properties(text: str) -> dict[str, str]:
    """Parse ``key=value`` lines; ``#`` and ``!`` start comments."""
    props = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise InvalidConfigError(f"line {number}: expected key=value, got {line!r}")
        # Values keep their whitespace: a key.separator may be a space or a tab.
        props[key.strip()] = _unescape(value)
    return props


def write_properties(props: Mapping[str, str]) -> str:
    """The text form read back by `read_properties` (escapes tabs and newlines)."""
    lines = []
    for key, value in sorted(props.items()):
        escaped = value.encode("unicode_escape").decode("latin-1")
        lines.append(f"{key}={escaped}\n")
    return "".join(lines)


def flush_messages_reached(config: TopicConfig, *, unflushed: int) -> bool:
    """Kafka's flush.messages rule: at least flush.messages records are unflushed.

    The append path checks it after every append (a write() that reaches it
    returns once its records are durable); `flush_due` includes it."""
    return unflushed >= config.flush_messages


def flush_due(config: TopicConfig, *, unflushed: int, last_flush_ms: int, now_ms: int) -> bool:
    """Flush when at least flush.messages records are unflushed, or when some
    are and the last flush is at least flush.ms old."""
    if unflushed <= 0:
        return False
    return (
        flush_messages_reached(config, unflushed=unflushed)
        or now_ms - last_flush_ms >= config.flush_ms
    )


def segments_to_delete(
    config: TopicConfig, *, sizes: list[int], max_timestamps: list[int], now_ms: int
) -> int:
    """Kafka's retention rule: how many of a log's oldest segments to delete.

    ``sizes`` and ``max_timestamps`` describe every segment, oldest first, the
    active one last. Segments go oldest first while the oldest is past
    retention.ms (its newest timestamp more than retention.ms before
    ``now_ms``; a segment without timestamps, -1, never expires) or while
    deleting it still leaves at least retention.bytes in the log. -1 turns
    either limit off. The active segment is never deleted.
    """
    retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
    excess = sum(sizes) - retention_bytes if retention_bytes >= 0 else -1
    count = 0
    while count < len(sizes) - 1:
        max_timestamp = max_timestamps[count]
        expired = retention_ms >= 0 and max_timestamp >= 0 and now_ms - max_timestamp > retention_ms
        too_big = retention_bytes >= 0 and excess >= sizes[count]
        if not (expired or too_big):
            break
        excess -= sizes[count]
        count += 1
    return count


def now_ms() -> int:
    """The wall clock in Kafka's unit: milliseconds since the epoch. The one clock of
    logfs; everything that keeps time takes it as an injectable ``clock``."""
    return int(time.time() * 1000)
