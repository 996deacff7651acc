"""The server-side assignors of consumer groups (KIP-848): the coordinator,
not a member, decides who reads which partition. A member names one with
``group.remote.assignor`` (ConsumerGroupHeartbeat's ServerAssignor); Kafka's
two are here under Kafka's names, ``uniform`` (the default) and ``range``.

An assignor maps the group's members (their ids, instance ids, subscribed
topics and their current target partitions) and the subscribed topics'
partition counts to each member's partitions, a topic name -> partitions
dict. A partition goes to at most one member, and only to a member
subscribed to its topic.

- ``uniform``: balanced and sticky. Every member keeps what it has as far as
  balance allows; what is free goes to the least loaded subscriber; then
  partitions move from a member to one subscribed to their topic holding at
  least two fewer, until no such move is left. With every member subscribed
  to the same topics the counts then differ by at most one.
- ``range``: per topic, its subscribers in order (static members by instance
  id first, then the rest by member id) each take a run of consecutive
  partitions, the first ``partitions % subscribers`` of them one more, so
  topics of equal size are co-partitioned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

Partitions = dict[str, set[int]]


class Subscriber(NamedTuple):
    """What an assignor knows of a member."""

    member_id: str
    instance_id: str | None
    topics: frozenset[str]
    current: Mapping[str, frozenset[int]]  # its target so far


def _order(s: Subscriber) -> tuple:
    """Static members first (by instance id), then the others by member id."""
    return (s.instance_id is None, s.instance_id or "", s.member_id)


def uniform(members: Sequence[Subscriber], counts: Mapping[str, int]) -> dict[str, Partitions]:
    """Kafka's ``uniform`` assignor's contract: balanced and sticky (see above)."""
    ranked = sorted(members, key=_order)
    rank = {s.member_id: i for i, s in enumerate(ranked)}
    held: dict[str, list[tuple[str, int]]] = {s.member_id: [] for s in ranked}
    owner: dict[tuple[str, int], str] = {}
    subscribers: dict[str, list[str]] = {}
    for s in ranked:
        for topic in sorted(s.topics):
            if topic in counts:
                subscribers.setdefault(topic, []).append(s.member_id)
    for s in ranked:  # stickiness: keep what is still valid and not taken
        for topic in sorted(s.current):
            if s.member_id not in subscribers.get(topic, ()):
                continue
            for p in sorted(s.current[topic]):
                if p < counts[topic] and (topic, p) not in owner:
                    owner[(topic, p)] = s.member_id
                    held[s.member_id].append((topic, p))

    def least(topic: str) -> str:
        return min(subscribers[topic], key=lambda m: (len(held[m]), rank[m]))

    for topic in sorted(subscribers):
        for p in range(counts[topic]):
            if (topic, p) not in owner:
                m = least(topic)
                owner[(topic, p)] = m
                held[m].append((topic, p))
    moved = True
    while moved:  # each move lowers the sum of squared loads: it ends
        moved = False
        for m in sorted(held, key=lambda i: (-len(held[i]), rank[i])):
            for tp in reversed(held[m]):  # the last taken go first
                other = least(tp[0])
                if len(held[other]) <= len(held[m]) - 2:
                    held[m].remove(tp)
                    held[other].append(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: _as_partitions(tps) for m, tps in held.items()}


def range_(members: Sequence[Subscriber], counts: Mapping[str, int]) -> dict[str, Partitions]:
    """Kafka's ``range`` assignor (see above)."""
    ranked = sorted(members, key=_order)
    out: dict[str, Partitions] = {s.member_id: {} for s in ranked}
    for topic in sorted(counts):
        subscribed = [s.member_id for s in ranked if topic in s.topics]
        if not subscribed:
            continue
        quota, extra = divmod(counts[topic], len(subscribed))
        start = 0
        for i, m in enumerate(subscribed):
            end = start + quota + (1 if i < extra else 0)
            if end > start:
                out[m][topic] = set(range(start, end))
            start = end
    return out


def _as_partitions(tps: list[tuple[str, int]]) -> Partitions:
    out: Partitions = {}
    for topic, p in tps:
        out.setdefault(topic, set()).add(p)
    return out


ASSIGNORS: dict[str, Callable[[Sequence[Subscriber], Mapping[str, int]], dict[str, Partitions]]]
ASSIGNORS = {"uniform": uniform, "range": range_}
