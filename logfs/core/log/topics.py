"""Topics' names and settings: Kafka's topic name rules, each topic's own
settings (``DATA/config/<topic>.properties``, key=value lines) over the data
directory's defaults, the limits on partitions, and the `Catalog` of topics
and partitions.

A file name has at most 255 bytes and a topic name up to 249 characters, so
a long topic's settings file is named by a prefix of the topic and a hash of
the whole name (`settings_file_name`)."""

from __future__ import annotations

import bisect
import hashlib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from ..config import TopicConfig, read_properties, write_properties
from ..errors import (
    InvalidConfigError,
    InvalidTopicError,
    PartitionLimitError,
    PolicyViolationError,
)
from ..storage import Reserve
from ..topic_keys import refuse_here
from .checkpoints import replace_file

logger = logging.getLogger(__name__)

CONFIG_DIR = "config"
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249
NAME_MAX = 255  # bytes in a file name (Linux)
PROPERTIES = ".properties"


class Limits(NamedTuple):
    """Limits on the shape of a data directory, enforced by the store for
    every face (the mount, producers, the Kafka protocol); ``-o`` options of
    `logfs mount` under the names in `LIMIT_OPTIONS`."""

    max_partitions: int = 50_000  # in the data directory (Kafka's max.broker.partitions)
    max_partitions_per_topic: int = 10_000
    # Partitions of topics one user other than root owns, whatever face made them, so that
    # one user cannot use up max.broker.partitions for everyone.
    max_partitions_per_user: int = 10_000
    # The largest max.message.bytes a topic may have, its own or the defaults': a topic's
    # owner sets it, and an open append file may hold a partial line that large.
    max_message_bytes: int = 16 << 20


# mount option (Kafka's name where it has one) -> `Limits` field
LIMIT_OPTIONS = {
    "max.broker.partitions": "max_partitions",
    "logfs.max.partitions.per.topic": "max_partitions_per_topic",
    "logfs.max.partitions.per.user": "max_partitions_per_user",
    "logfs.max.message.bytes.ceiling": "max_message_bytes",
}


def settings_file_name(topic: str) -> str:
    """``<topic>.properties``, or for a topic too long for that name (and its
    ``.tmp`` while it is replaced) ``<first 190 characters>.<sha1>.properties``."""
    name = topic + PROPERTIES
    if len(name) + len(".tmp") <= NAME_MAX:
        return name
    return f"{topic[:190]}.{hashlib.sha1(topic.encode()).hexdigest()}{PROPERTIES}"


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; raises `InvalidTopicError`."""
    if name in ("", ".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters, at most {MAX_TOPIC_LENGTH} allowed"
        )
    if not LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'"
        )


class TopicSettings:
    """Every topic's own settings (overrides) in ``DATA/config``, and the
    effective configuration they make over ``defaults``."""

    def __init__(
        self,
        data: Path,
        defaults: Mapping[str, str],
        ceiling: int = Limits.max_message_bytes,
        reserve: Reserve | None = None,
    ) -> None:
        """Raises `InvalidConfigError` for bad ``defaults``, `PolicyViolationError`
        for a max.message.bytes over ``ceiling`` (`Limits.max_message_bytes`).
        ``reserve``: given back when a settings file finds the disk full."""
        self.dir = data / CONFIG_DIR
        self.reserve = reserve
        self.ceiling = ceiling
        self.defaults = {k: str(v) for k, v in defaults.items()}
        self._check_ceiling(TopicConfig.from_properties(defaults=self.defaults), "the default")
        self._overrides: dict[str, dict[str, str]] = {}

    def load(self, topics: Iterable[str]) -> None:
        """Read the files of ``topics``."""
        if self.dir.is_dir():
            names = {path.name for path in self.dir.glob("*" + PROPERTIES)}
            for topic in topics:
                if (name := settings_file_name(topic)) in names:
                    self._overrides[topic] = read_properties((self.dir / name).read_text())

    def config(self, topic: str) -> TopicConfig:
        """The topic's configuration; the defaults' if its file is not valid."""
        try:
            return TopicConfig.from_properties(self._overrides.get(topic), self.defaults)
        except InvalidConfigError as e:
            logger.warning("config/%s.properties: %s; using defaults", topic, e)
            return TopicConfig.from_properties(defaults=self.defaults)

    def set_defaults(self, defaults: Mapping[str, object]) -> dict[str, str]:
        """Replace the defaults (validated first); the new ones."""
        defaults = {k: str(v) for k, v in defaults.items()}
        self._check_ceiling(TopicConfig.from_properties(defaults=defaults), "the default")
        self.defaults = defaults
        return defaults

    def overrides(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def set(self, topic: str, overrides: Mapping[str, object]) -> TopicConfig:
        """Replace the topic's overrides (validated before anything is
        written); returns the configuration they make."""
        overrides = {k: str(v) for k, v in overrides.items()}
        refuse_here(overrides)
        config = TopicConfig.from_properties(overrides, self.defaults)
        self._check_ceiling(config, f"topic {topic!r}'s")
        path = self.dir / settings_file_name(topic)
        if overrides:
            text = write_properties(overrides)

            def write() -> None:
                self.dir.mkdir(exist_ok=True)
                replace_file(path, text)

            if self.reserve is None:
                write()
            else:
                self.reserve.spend(write)
        else:
            path.unlink(missing_ok=True)
        self._overrides[topic] = overrides
        return config

    def _check_ceiling(self, config: TopicConfig, whose: str) -> None:
        if config.max_message_bytes > self.ceiling:
            raise PolicyViolationError(
                f"{whose} max.message.bytes={config.max_message_bytes} is over this "
                f"data directory's ceiling, logfs.max.message.bytes.ceiling={self.ceiling}"
            )

    def remove(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        (self.dir / settings_file_name(topic)).unlink(missing_ok=True)


def metric_name(topic: str) -> str:
    """Kafka's metrics name a topic with '.' as '_': two topics whose names
    differ only there (a.b beside a_b) collide."""
    return topic.replace(".", "_")


class Catalog:
    """The store's topics and partitions, kept in order as they change, so
    that a listing or a lookup never sorts (3,000 topics, 5,000 partitions of
    one topic: every ``ls`` and ``stat`` asks)."""

    def __init__(self) -> None:
        self._partitions: dict[str, list[int]] = {}  # topic -> its partitions, sorted
        self._metric: dict[str, str] = {}  # metric_name -> topic
        self._counts: Mapping[str, int] | None = None  # topics() until the next change
        self.total = 0  # partitions of all topics

    def __contains__(self, topic: str) -> bool:
        return topic in self._partitions

    def add(self, topic: str, partition: int) -> None:
        parts = self._partitions.get(topic)
        if parts is None:
            parts = self._partitions[topic] = []
            self._metric.setdefault(metric_name(topic), topic)
        if parts and partition > parts[-1]:
            parts.append(partition)  # the usual case: partitions come in order
        else:
            bisect.insort(parts, partition)
        self.total += 1
        self._counts = None

    def remove(self, topic: str) -> None:
        self.total -= len(self._partitions.pop(topic, ()))
        if self._metric.get(metric_name(topic)) == topic:
            del self._metric[metric_name(topic)]
        self._counts = None

    def discard(self, topic: str, partition: int) -> None:
        parts = self._partitions.get(topic, [])
        i = bisect.bisect_left(parts, partition)
        if i < len(parts) and parts[i] == partition:
            del parts[i]
            self.total -= 1
            self._counts = None
            if not parts:
                self.remove(topic)

    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions in order (empty for an unknown topic)."""
        return list(self._partitions.get(topic, ()))

    def count(self, topic: str) -> int:
        return len(self._partitions.get(topic, ()))

    def last(self, topic: str) -> int:
        return self._partitions[topic][-1]

    def colliding(self, topic: str) -> str | None:
        """An existing topic ``topic`` collides with (`metric_name`), or None."""
        other = self._metric.get(metric_name(topic))
        return other if other != topic else None

    def check_limits(self, limits: Limits, topic: str, total: int, making: int = 0) -> None:
        """Refuse to grow ``topic`` to ``total`` partitions past a limit, with
        ``making`` more being made elsewhere (`PartitionLimitError`); logged, as a
        client sees only an errno."""
        more = total - self.count(topic)
        reason = None
        if total > limits.max_partitions_per_topic:
            reason = (
                f"{total} partitions in topic {topic!r} would pass "
                f"logfs.max.partitions.per.topic={limits.max_partitions_per_topic}"
            )
        elif self.total + making + more > limits.max_partitions:
            reason = (
                f"{more} more partitions for topic {topic!r} would make "
                f"{self.total + making + more}{' with those being made' if making else ''}, "
                f"past max.broker.partitions={limits.max_partitions}"
            )
        if reason:
            logger.warning("refused: %s", reason)
            raise PartitionLimitError(reason)

    def counts(self) -> Mapping[str, int]:
        """Topic name -> number of partitions, sorted by name (read-only;
        sorted once per change, not per call)."""
        if self._counts is None:
            self._counts = MappingProxyType(
                {t: len(self._partitions[t]) for t in sorted(self._partitions)}
            )
        return self._counts

    def pairs(self) -> Iterator[tuple[str, int]]:
        """Every (topic, partition), in order."""
        for topic in self.counts():
            for p in self._partitions[topic]:
                yield topic, p
