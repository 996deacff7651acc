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
import random
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

from .errors import InvalidConfigError
from .topic_keys import CODECS, IGNORED, PARSERS, TIMESTAMP_TYPES, check_together
from .values import INT_MAX, LONG_MAX, parse_bool, parse_choice, parse_int, parse_ratio

__all__ = [
    "CODECS", "IGNORED", "INT_MAX", "LONG_MAX", "TIMESTAMP_TYPES", "parse_bool", "parse_choice",
    "parse_int", "parse_ratio",
]  # fmt: skip
# Kafka's internal topics: the group coordinator's log (logfs/kafka), which pattern
# subscriptions leave out (Kafka's consumer's exclude.internal.topics=true).
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"  # the transaction coordinator's log (logfs/groups)
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})


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
    # A producer's timestamps (CreateTime) at most this far behind or ahead of the
    # append's clock (Kafka 4's defaults: any age, an hour ahead); INVALID_TIMESTAMP else.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600 * 1000
    # segment.ms less a random share of this, fixed per segment (`random_segment_jitter`)
    segment_jitter_ms: int = 0
    preallocate: bool = False  # a new segment's disk space reserved whole (segment.bytes)
    file_delete_delay_ms: int = 60000  # a deleted segment's files stay this long as .deleted
    min_insync_replicas: int = 1  # above 1 an acks=-1 Produce is refused (one replica)
    # Accepted, stored and shown, not used on one node (topic_keys.IGNORED says why).
    unclean_leader_election_enable: bool = False
    follower_replication_throttled_replicas: str = ""
    leader_replication_throttled_replicas: str = ""
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    message_downconversion_enable: bool = True
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
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
        check_together(values)
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

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Kafka's ``randomSegmentJitter``: how much sooner than segment.ms a new
        segment rolls, drawn once per segment, below min(segment.jitter.ms, segment.ms),
        so that the partitions' segments do not all roll at the same moment."""
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return 0 if bound <= 0 else (rng or random).randrange(bound)


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
    return unflushed >= flush_messages_limit(config)


def flush_messages_limit(config: TopicConfig) -> int:
    """The unflushed count at which `flush_messages_reached` holds (the
    one-line fast path keeps it per config instead of asking per line)."""
    return config.flush_messages


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
