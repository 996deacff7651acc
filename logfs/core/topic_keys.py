"""Every topic-level setting of Kafka 4, as Kafka's ``LogConfig`` defines and
checks it, and what each means on this one node.

`PARSERS` holds each key's parser (types and ranges as Kafka's, so a value
Kafka refuses is refused: ``INVALID_CONFIG``); logfs adds its own two keys of
the console producer (``parse.key``, ``key.separator``). The one difference
kept on purpose: ``segment.bytes`` takes 14 bytes and up (Kafka 3's bound),
not 4's 1 MiB, so that small segments stay possible for tests and tiny
devices.

Most keys are used. The ones that need replicas, tiered storage or a
compression level logfs's codecs do not take are `IGNORED`: accepted,
validated, stored, shown by DescribeConfigs and in the ``config`` file, and
without effect (the reason says why). ``min.insync.replicas`` is honoured as
a cluster with this one replica in sync honours it: above 1, an acks=-1
Produce answers NOT_ENOUGH_REPLICAS. ``remote.storage.enable=true`` is
refused as by a broker without tiered storage.

`LIST_KEYS` take IncrementalAlterConfigs' APPEND and SUBTRACT. `SYNONYMS`
names each key's broker-wide setting (Kafka's ``log.*`` names), `TYPES` its
type as DescribeConfigs reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .errors import InvalidConfigError
from .values import (
    INT_MAX,
    parse_bool,
    parse_choice,
    parse_int,
    parse_policy,
    parse_ratio,
    parse_separator,
    parse_throttled_replicas,
)

CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

PARSERS: dict[str, Callable[[Any], Any]] = {
    "cleanup.policy": parse_policy,
    "compression.gzip.level": lambda v: _gzip_level(parse_int(-1, 9)(v)),
    "compression.lz4.level": parse_int(1, 17),
    "compression.type": parse_choice(*CODECS),
    "compression.zstd.level": parse_int(-131072, 22),
    "delete.retention.ms": parse_int(0),
    "file.delete.delay.ms": parse_int(0),
    "flush.messages": parse_int(1),
    "flush.ms": parse_int(0),
    "follower.replication.throttled.replicas": parse_throttled_replicas,
    "index.interval.bytes": parse_int(0, INT_MAX),
    "leader.replication.throttled.replicas": parse_throttled_replicas,
    "local.retention.bytes": parse_int(-2),
    "local.retention.ms": parse_int(-2),
    "max.compaction.lag.ms": parse_int(1),
    "max.message.bytes": parse_int(0, INT_MAX),
    "message.downconversion.enable": parse_bool,
    "message.timestamp.after.max.ms": parse_int(0),
    "message.timestamp.before.max.ms": parse_int(0),
    "message.timestamp.type": parse_choice(*TIMESTAMP_TYPES),
    "min.cleanable.dirty.ratio": parse_ratio,
    "min.compaction.lag.ms": parse_int(0),
    "min.insync.replicas": parse_int(1, INT_MAX),
    "preallocate": parse_bool,
    "remote.log.copy.disable": parse_bool,
    "remote.log.delete.on.disable": parse_bool,
    "remote.storage.enable": parse_bool,
    "retention.bytes": parse_int(-(1 << 63)),
    "retention.ms": parse_int(-1),
    "segment.bytes": parse_int(14, INT_MAX),
    "segment.index.bytes": parse_int(8, INT_MAX),
    "segment.jitter.ms": parse_int(0),
    "segment.ms": parse_int(1),
    "unclean.leader.election.enable": parse_bool,
    # logfs's own: the console producer's key parsing of the mount's append files
    "parse.key": parse_bool,
    "key.separator": parse_separator,
}


def _gzip_level(level: int) -> int:
    if level == 0:  # Deflater's levels: 1-9, or -1 for its default
        raise InvalidConfigError("0 is not a gzip level: 1 to 9, or -1 for the default")
    return level


_ONE_NODE = "one node: no other replica to elect, throttle or wait for"
_NO_TIERS = "no tiered storage on this node"
_LEVELS = "logfs compresses at its codecs' own default levels"
IGNORED: dict[str, str] = {
    "unclean.leader.election.enable": _ONE_NODE,
    "follower.replication.throttled.replicas": _ONE_NODE,
    "leader.replication.throttled.replicas": _ONE_NODE,
    "local.retention.bytes": _NO_TIERS,
    "local.retention.ms": _NO_TIERS,
    "remote.storage.enable": _NO_TIERS,
    "remote.log.copy.disable": _NO_TIERS,
    "remote.log.delete.on.disable": _NO_TIERS,
    "message.downconversion.enable": "Kafka 4 never converts down either (a no-op there too)",
    "compression.gzip.level": _LEVELS,
    "compression.lz4.level": _LEVELS,
    "compression.zstd.level": _LEVELS,
}

LIST_KEYS = frozenset(
    {"cleanup.policy", "follower.replication.throttled.replicas",
     "leader.replication.throttled.replicas"}
)  # fmt: skip

# Kafka's ConfigType numbers, as DescribeConfigs v3+ reports them.
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
TYPES: dict[str, int] = {
    **dict.fromkeys(PARSERS, LONG),
    **dict.fromkeys(
        ["compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
         "index.interval.bytes", "max.message.bytes", "min.insync.replicas", "segment.bytes",
         "segment.index.bytes"], INT),
    **dict.fromkeys(
        ["message.downconversion.enable", "preallocate", "remote.log.copy.disable",
         "remote.log.delete.on.disable", "remote.storage.enable",
         "unclean.leader.election.enable", "parse.key"], BOOLEAN),
    **dict.fromkeys(LIST_KEYS, LIST),
    "compression.type": STRING,
    "message.timestamp.type": STRING,
    "key.separator": STRING,
    "min.cleanable.dirty.ratio": DOUBLE,
}  # fmt: skip

# Each key's broker-wide default setting, by Kafka's name (its LogConfig synonyms).
SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.type": "compression.type",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


def check_together(values: Mapping[str, Any]) -> None:
    """Kafka's rule between keys (``LogConfig.validateValues``), on parsed values
    by field name.

    Raises:
        InvalidConfigError: min.compaction.lag.ms above max.compaction.lag.ms.
    """
    low, high = values.get("min_compaction_lag_ms", 0), values.get("max_compaction_lag_ms")
    if high is not None and low > high:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


def refuse_here(overrides: Mapping[str, str]) -> None:
    """What a broker without tiered storage refuses to set on a topic.

    Raises:
        InvalidConfigError: remote.storage.enable=true.
    """
    if str(overrides.get("remote.storage.enable", "false")).strip().lower() == "true":
        raise InvalidConfigError(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be "
            "configured with remote log storage."
        )
