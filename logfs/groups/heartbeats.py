"""A ConsumerGroupHeartbeat as the groups room takes it (`Heartbeat`, topics by
name: the face maps Kafka's topic ids), its answer, and Kafka's checks of it
that need no group: the request's fields, a member's epoch, a subscription
regex.

Regexes are RE2, the syntax of Kafka's (RE2/J) and matched in linear time,
so no client's pattern can hold the loop; a compiled program is bounded in
memory and a bad one answers INVALID_REGULAR_EXPRESSION without a line in
the daemon's log.
"""

from __future__ import annotations

import base64
import uuid
from typing import NamedTuple

import re2

from ..core.errors import KafkaCode
from .state import GroupError

Partitions = dict[str, frozenset[int]]
# What a leaving member sends; a static member that leaves so is kept at -2.
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2

_RE2 = re2.Options()
_RE2.log_errors = False
_RE2.max_mem = 1 << 20
MAX_REGEXES = 1000  # compiled patterns kept


class Heartbeat(NamedTuple):
    """A ConsumerGroupHeartbeat; a field left None did not change since the last one."""

    group_id: str
    member_id: str
    epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_ms: int = -1
    topics: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: Partitions | None = None  # the partitions the member owns
    client_id: str = ""
    client_host: str = ""
    own_id: bool = False  # v1+ (KIP-1082): the member made its id, even to join

    @property
    def full(self) -> bool:
        """A join, or a request with every field a full one carries (Kafka's rule):
        answered with the whole assignment."""
        subscribed = self.topics is not None or self.regex is not None
        return self.epoch == 0 or (
            self.rebalance_ms != -1 and subscribed and self.owned is not None
        )


class HeartbeatAnswer(NamedTuple):
    member_id: str
    epoch: int
    interval_ms: int
    assignment: Partitions | None  # None: unchanged (not sent)


def _invalid(message: str) -> GroupError:
    return GroupError(KafkaCode.INVALID_REQUEST, message)


def check(h: Heartbeat, assignors: tuple[str, ...]) -> None:
    """Kafka's checks of a ConsumerGroupHeartbeat, in Kafka's order and words.

    Raises:
        GroupError: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR or INVALID_REGULAR_EXPRESSION.
    """
    if (h.own_id or h.epoch > 0 or h.epoch == LEAVE_EPOCH) and not h.member_id.strip():
        raise _invalid("MemberId can't be empty.")
    named = {"GroupId": h.group_id, "InstanceId": h.instance_id, "RackId": h.rack_id}
    for what, value in named.items():
        if value is not None and not value.strip():
            raise _invalid(f"{what} can't be empty.")
    if h.epoch == 0:
        if h.rebalance_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if h.owned is None or any(h.owned.values()):
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        # An empty list of names or an empty regex is a member subscribed to nothing
        # (Kafka's rule), as librdkafka sends an empty regex beside its names.
        if h.topics is None and h.regex is None:
            why = "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null"
            raise _invalid(f"{why} when (re-)joining.")
    elif h.epoch == STATIC_LEAVE_EPOCH:
        if not h.member_id.strip():
            raise _invalid("MemberId can't be empty.")
        if h.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif h.epoch < STATIC_LEAVE_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    if h.assignor is not None and h.assignor not in assignors:
        why = f"ServerAssignor {h.assignor} is not supported. Supported assignors:"
        raise GroupError(KafkaCode.UNSUPPORTED_ASSIGNOR, f"{why} {', '.join(assignors)}.")
    if h.regex:
        Regexes.compile(h.regex)


def check_epoch(epoch: int, previous: int, assigned: Partitions, h: Heartbeat) -> None:
    """Kafka's rule: a member heartbeats at its epoch, or at its previous one when
    it owns only what it is assigned (the answer that bumped it was lost).

    Raises:
        GroupError: FENCED_MEMBER_EPOCH: the member must give up its partitions and rejoin.
    """
    if h.epoch == epoch:
        return
    owned = h.owned
    subset = owned is not None and all(
        ps <= assigned.get(t, frozenset()) for t, ps in owned.items()
    )
    if h.epoch > epoch or h.epoch != previous or not subset:
        side = "greater" if h.epoch > epoch else "smaller"
        why = f"The consumer group member has a {side} member epoch ({h.epoch}) than the one"
        raise GroupError(
            KafkaCode.FENCED_MEMBER_EPOCH,
            f"{why} known by the group coordinator ({epoch}). The member must abandon all "
            "its partitions and rejoin.",
        )


def new_member_id() -> str:
    """A member id as Kafka makes one: a random uuid, printed as Kafka prints it."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class Regexes:
    """Compiled subscription regexes, kept (at most `MAX_REGEXES`)."""

    _compiled: dict[str, object] = {}

    @classmethod
    def compile(cls, regex: str):
        """The compiled pattern.

        Raises:
            GroupError: INVALID_REGULAR_EXPRESSION.
        """
        pattern = cls._compiled.get(regex)
        if pattern is None:
            try:
                pattern = re2.compile(regex, options=_RE2)
            except re2.error as e:
                why = f"SubscribedTopicRegex {regex!r} is not a valid regular expression"
                raise GroupError(KafkaCode.INVALID_REGULAR_EXPRESSION, f"{why}: {e}") from None
            if len(cls._compiled) >= MAX_REGEXES:
                cls._compiled.clear()
            cls._compiled[regex] = pattern
        return pattern
