"""The broker's own settings, as DescribeConfigs shows a Kafka broker's: under
Kafka's names, with the daemon's values and where each comes from (Kafka's
config sources: an ``-o`` option is STATIC_BROKER_CONFIG, an unset one
DEFAULT_CONFIG, one changed by IncrementalAlterConfigs or AlterConfigs
DYNAMIC_BROKER_CONFIG for this broker's id or DYNAMIC_DEFAULT_BROKER_CONFIG
for the cluster's default, the empty name).

What can change while the daemon runs is what Kafka lets change without a
restart and what means something here: the topics' broker-wide defaults
(the ``log.*`` synonyms of topic settings, applied to every topic that does
not set them itself), the log cleaner's I/O throttle and back-off, and
``max.connections``. The rest is read-only (Kafka says which of its own are
dynamic; these are read-only here too, or have no meaning on one node).
Dynamic values are kept in ``DATA/config/@broker.properties`` (``@`` is in
no topic's name), applied over the ``-o`` options at the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from ..core.config import TopicConfig, read_properties, write_properties
from ..core.errors import InvalidConfigError
from ..core.topic_keys import SYNONYMS, TYPES

logger = logging.getLogger(__name__)

# Kafka's DescribeConfigs config sources and config types
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7


def kafka_form(value) -> tuple[str, int]:
    """A setting's value as Kafka shows it, and its Kafka type."""
    if isinstance(value, bool):
        return ("true" if value else "false"), BOOLEAN
    if isinstance(value, int):
        return str(value), INT if -(2**31) <= value < 2**31 else LONG
    if isinstance(value, float):
        return repr(value), DOUBLE
    if isinstance(value, tuple):
        return ",".join(value), LIST
    return str(value), STRING


FILE = "@broker.properties"
TOPIC_DEFAULTS = {broker: topic for topic, broker in SYNONYMS.items()}  # log.* -> topic key


class Setting(NamedTuple):
    """One broker setting as DescribeConfigs reports it."""

    value: str | None
    type: int
    source: int
    read_only: bool
    sensitive: bool = False


class BrokerConfigs:
    """The broker's settings.

    Args:
        fixed: settings the daemon has, by Kafka's name: name -> (value, given as an
            option); read-only. A value is a bool, an int, a float, a tuple (a list) or
            text, shown as Kafka shows its type (`kafka_form`).
        topic_defaults: the topic settings the daemon was given (``-o``, topic names).
        appliers: dynamic settings besides the topic defaults: name -> (current
            value, given as an option, a function applying a new value as text
            (raises InvalidConfigError)).
        set_topic_defaults: applies new broker-wide topic defaults (topic names).
        data: DATA, where dynamic values are kept (None: not kept).
    """

    def __init__(
        self,
        fixed: Mapping[str, tuple[object, bool]],
        topic_defaults: Mapping[str, str],
        appliers: Mapping[str, tuple[object, bool, Callable[[str], None]]] | None = None,
        set_topic_defaults: Callable[[dict[str, str]], None] | None = None,
        data: Path | None = None,
    ) -> None:
        self.fixed = dict(fixed)
        self.static_defaults = dict(topic_defaults)
        self.appliers = dict(appliers or {})
        self.set_topic_defaults = set_topic_defaults
        self.path = None if data is None else Path(data) / "config" / FILE
        self.dynamic: dict[str, str] = {}  # name -> value, the cluster's default
        if self.path is not None and self.path.exists():
            try:
                kept = read_properties(self.path.read_text())
                self.alter(kept, [], validate_only=False, keep=False)
            except (OSError, InvalidConfigError) as e:
                logger.warning("%s: not applied: %s", self.path, e)

    def describe(self) -> dict[str, Setting]:
        """Every setting, by name."""
        out = {
            name: Setting(*kafka_form(value), STATIC if given else DEFAULT, True)
            for name, (value, given) in self.fixed.items()
        }
        defaults = TopicConfig.from_properties(self.static_defaults).to_properties()
        for broker_name, topic in TOPIC_DEFAULTS.items():
            source = STATIC if topic in self.static_defaults else DEFAULT
            out[broker_name] = Setting(defaults[topic], TYPES.get(topic, STRING), source, False)
        for name, (value, given, _) in self.appliers.items():
            out[name] = Setting(*kafka_form(value), STATIC if given else DEFAULT, False)
        for name, value in self.dynamic.items():
            out[name] = out[name]._replace(value=value, source=DYNAMIC_DEFAULT)
        return dict(sorted(out.items()))

    def alter(
        self,
        setting: Mapping[str, str],
        deleting: list[str],
        validate_only: bool,
        keep: bool = True,
    ) -> None:
        """Set ``setting`` and delete ``deleting`` (back to the option or Kafka's
        default); all checked before any applies.

        Raises:
            InvalidConfigError: an unknown or read-only setting, or a bad value.
        """
        for name in [*setting, *deleting]:
            if name in self.fixed:
                raise InvalidConfigError(f"Cannot update these configs dynamically: {{{name}}}")
            if name not in TOPIC_DEFAULTS and name not in self.appliers:
                raise InvalidConfigError(f"Unknown broker config: {name}")
        dynamic = {k: v for k, v in self.dynamic.items() if k not in deleting}
        dynamic.update(setting)
        topic_defaults = dict(self.static_defaults)
        topic_defaults |= {TOPIC_DEFAULTS[k]: v for k, v in dynamic.items() if k in TOPIC_DEFAULTS}
        TopicConfig.from_properties(defaults=topic_defaults)  # InvalidConfigError if bad
        if validate_only:
            return
        for name, value in dynamic.items():
            if name in self.appliers:
                self.appliers[name][2](value)  # checks and applies, or raises
        if self.set_topic_defaults is not None:
            self.set_topic_defaults(topic_defaults)
        for name in deleting:
            if name in self.appliers:
                self.appliers[name][2](kafka_form(self.appliers[name][0])[0])
        self.dynamic = dynamic
        if keep and self.path is not None:
            with contextlib.suppress(FileExistsError):
                self.path.parent.mkdir(exist_ok=True)
            aside = self.path.with_name(FILE + ".tmp")
            aside.write_text(write_properties(dynamic))
            os.replace(aside, self.path)
