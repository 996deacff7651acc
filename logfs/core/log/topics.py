"""Topics' names and settings: Kafka's topic name rules, and each topic's own
settings (``DATA/config/<topic>.properties``, key=value lines) over the data
directory's defaults."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

from ..config import TopicConfig, read_properties, write_properties
from ..errors import InvalidConfigError, InvalidTopicError
from .checkpoints import replace_file

logger = logging.getLogger(__name__)

CONFIG_DIR = "config"
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249


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

    def __init__(self, data: Path, defaults: Mapping[str, str]) -> None:
        """Raises `InvalidConfigError` for bad ``defaults``."""
        self.dir = data / CONFIG_DIR
        self.defaults = {k: str(v) for k, v in defaults.items()}
        TopicConfig.from_properties(defaults=self.defaults)  # validate early
        self._overrides: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read every topic's file."""
        if self.dir.is_dir():
            for path in self.dir.glob("*.properties"):
                self._overrides[path.stem] = read_properties(path.read_text())

    def config(self, topic: str) -> TopicConfig:
        """The topic's configuration; the defaults' if its file is not valid."""
        try:
            return TopicConfig.from_properties(self._overrides.get(topic), self.defaults)
        except InvalidConfigError as e:
            logger.warning("config/%s.properties: %s; using defaults", topic, e)
            return TopicConfig.from_properties(defaults=self.defaults)

    def overrides(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def set(self, topic: str, overrides: Mapping[str, object]) -> TopicConfig:
        """Replace the topic's overrides (validated before anything is
        written); returns the configuration they make."""
        overrides = {k: str(v) for k, v in overrides.items()}
        config = TopicConfig.from_properties(overrides, self.defaults)
        path = self.dir / f"{topic}.properties"
        if overrides:
            self.dir.mkdir(exist_ok=True)
            replace_file(path, write_properties(overrides))
        else:
            path.unlink(missing_ok=True)
        self._overrides[topic] = overrides
        return config

    def remove(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        (self.dir / f"{topic}.properties").unlink(missing_ok=True)
