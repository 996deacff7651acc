"""The group coordinator's settings: Kafka's broker configurations of its
group coordinator (``group.*``), given as ``-o`` options of ``logfs mount``
and ``logfs serve``, checked as Kafka's ``GroupCoordinatorConfig`` checks
them. One node: a group holds at most 1000 members whatever Kafka's
``group.max.size`` default (unbounded) says, and classic members' protocol
metadata is bounded per member and in all (budget.py), so that a client
cannot grow the daemon without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..core.config import INT_MAX, parse_int
from ..core.errors import InvalidConfigError
from .assignors import ASSIGNORS
from .budget import MEMBER_METADATA_MAX_BYTES, METADATA_MAX_BYTES

MAX_MEMBERS = 1000
POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def _assignors(value: Any) -> tuple[str, ...]:
    names = tuple(n.strip() for n in str(value).split(",") if n.strip())
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        raise InvalidConfigError(
            f"{', '.join(unknown) or 'none'}: expected a list of {', '.join(ASSIGNORS)}"
        )
    return names


def _policy(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in POLICIES:
        raise InvalidConfigError(f"{value!r} is not one of {', '.join(POLICIES)}")
    return text


class GroupSettings(NamedTuple):
    """The settings, with Kafka's defaults (`OPTIONS` names each after Kafka)."""

    min_session_ms: int = 6000
    max_session_ms: int = 1800000
    max_size: int = MAX_MEMBERS
    consumer_session_ms: int = 45000
    consumer_min_session_ms: int = 45000
    consumer_max_session_ms: int = 60000
    consumer_heartbeat_ms: int = 5000
    consumer_min_heartbeat_ms: int = 5000
    consumer_max_heartbeat_ms: int = 15000
    consumer_max_size: int = MAX_MEMBERS
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    migration_policy: str = "bidirectional"
    member_metadata_max_bytes: int = MEMBER_METADATA_MAX_BYTES  # budget.py
    metadata_max_bytes: int = METADATA_MAX_BYTES

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> GroupSettings:
        """Settings from Kafka-named options; raises `InvalidConfigError` as Kafka would
        refuse to start."""
        values = {}
        for name, text in options.items():
            field, parse = OPTIONS[name]
            try:
                values[field] = parse(text)
            except InvalidConfigError as e:
                raise InvalidConfigError(f"{name}: {e}") from None
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Kafka's rules between the settings."""
        rules = [
            (self.min_session_ms <= self.max_session_ms, "group.max.session.timeout.ms "
             "must be at least group.min.session.timeout.ms"),
            (self.consumer_min_session_ms <= self.consumer_session_ms
             <= self.consumer_max_session_ms, "group.consumer.session.timeout.ms must be "
             "within group.consumer.min.session.timeout.ms and its max"),
            (self.consumer_min_heartbeat_ms <= self.consumer_heartbeat_ms
             <= self.consumer_max_heartbeat_ms, "group.consumer.heartbeat.interval.ms must be "
             "within group.consumer.min.heartbeat.interval.ms and its max"),
            (self.consumer_heartbeat_ms < self.consumer_session_ms, "group.consumer."
             "heartbeat.interval.ms must be below group.consumer.session.timeout.ms"),
        ]  # fmt: skip
        for ok, why in rules:
            if not ok:
                raise InvalidConfigError(why)

    def to_options(self) -> dict[str, str]:
        """Every setting under Kafka's name, as DescribeConfigs shows it."""
        out = {}
        for name, (field, _) in OPTIONS.items():
            value = getattr(self, field)
            out[name] = ",".join(value) if isinstance(value, tuple) else str(value)
        return out


# Kafka's name -> (field, parser)
OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "group.min.session.timeout.ms": ("min_session_ms", parse_int(1, INT_MAX)),
    "group.max.session.timeout.ms": ("max_session_ms", parse_int(1, INT_MAX)),
    "group.max.size": ("max_size", parse_int(1, MAX_MEMBERS)),
    "group.consumer.session.timeout.ms": ("consumer_session_ms", parse_int(1, INT_MAX)),
    "group.consumer.min.session.timeout.ms": ("consumer_min_session_ms", parse_int(1, INT_MAX)),
    "group.consumer.max.session.timeout.ms": ("consumer_max_session_ms", parse_int(1, INT_MAX)),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_ms", parse_int(1, INT_MAX)),
    "group.consumer.min.heartbeat.interval.ms": (
        "consumer_min_heartbeat_ms",
        parse_int(1, INT_MAX),
    ),  # fmt: skip
    "group.consumer.max.heartbeat.interval.ms": (
        "consumer_max_heartbeat_ms",
        parse_int(1, INT_MAX),
    ),  # fmt: skip
    "group.consumer.max.size": ("consumer_max_size", parse_int(1, MAX_MEMBERS)),
    "group.consumer.assignors": ("assignors", _assignors),
    "group.consumer.migration.policy": ("migration_policy", _policy),
    # logfs's own: what classic members' protocol metadata may hold (budget.py)
    "group.member.metadata.max.bytes": ("member_metadata_max_bytes", parse_int(1, INT_MAX)),
    "group.metadata.max.bytes": ("metadata_max_bytes", parse_int(1, 2**62)),
}
