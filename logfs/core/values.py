"""Configuration values as Kafka's ``ConfigDef`` parses them: integers in a
range, one word of a set, booleans, ratios, lists; each parser takes text (or
a value) and raises `InvalidConfigError` without the key's name, which the
caller adds. The topic settings (topic_keys.py), the group coordinator's
settings and the Spark source's options all use them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

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


def parse_separator(value: Any) -> str:
    text = str(value)
    if not text or "\n" in text:
        raise InvalidConfigError("key.separator must be non-empty and contain no newline")
    return text


_REPLICA = re.compile(r"[0-9]+:[0-9]+", re.ASCII)


def parse_throttled_replicas(value: Any) -> str:
    """Kafka's ``*.replication.throttled.replicas``: ``*``, or
    ``partition:broker`` pairs separated by commas (possibly none)."""
    items = [item.strip() for item in str(value).split(",") if item.strip()]
    if items == ["*"] or all(_REPLICA.fullmatch(item) for item in items):
        return ",".join(items)
    raise InvalidConfigError(
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )
