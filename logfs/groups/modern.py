"""A consumer group of KIP-848's protocol (type ``consumer``) as the coordinator
keeps it (modern_coordinator.py runs the protocol over it).

The group has an epoch, bumped whenever what its assignment depends on
changes (a member joins, leaves or changes its subscription; a subscribed
topic appears, goes or grows); a target assignment computed by a server-side
assignor at some epoch (``assignment_epoch``); and members, each with its own
epoch and assignment moving towards its target one step per heartbeat
(reconcile.py). Its state is Kafka's: Empty (no members), Assigning (the
target is older than the group epoch), Reconciling (a member has not reached
it), Stable.

``owners`` keeps, for every partition a member holds (assigned or still
revoking), that member and the epoch it was assigned the partition at (its
assignment epoch, KIP-1251): a partition goes to a new member only once
nobody holds it, and a member may commit a partition's offset at an epoch
older than its own as long as it has held the partition since then.
"""

from __future__ import annotations

import trio

from ..core.errors import KafkaCode
from .reconcile import STABLE, Progress
from .state import GroupError

EMPTY, ASSIGNING, RECONCILING, STABLE_STATE, DEAD = (
    "Empty",
    "Assigning",
    "Reconciling",
    "Stable",
    "Dead",
)
CONSUMER = "consumer"

Partitions = dict[str, frozenset[int]]
NOTHING = Progress(STABLE, 0, 0, {}, {})


class ConsumerMember:
    """A member as its heartbeats describe it, and its assignment's progress."""

    __slots__ = (
        "member_id",
        "instance_id",
        "rack_id",
        "client_id",
        "client_host",
        "topics",
        "regex",
        "rebalance_ms",
        "assignor",
        "progress",
        "deadline",
        "revoke_deadline",
        "classic",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.topics: tuple[str, ...] = ()  # subscribed by name
        self.regex: str | None = None  # subscribed by a regular expression
        self.rebalance_ms = -1
        self.assignor: str | None = None
        self.progress = NOTHING
        self.deadline = 0.0  # the session ends (trio's clock)
        self.revoke_deadline: float | None = None  # must have revoked by then
        # a member of the classic protocol (mixed.py): its session and protocols
        self.classic: tuple[int, list[tuple[str, bytes]]] | None = None

    @property
    def epoch(self) -> int:
        return self.progress.epoch

    def subscription(self) -> tuple:
        """What the target assignment depends on in this member."""
        return self.topics, self.regex, self.assignor

    def touch(self, session_ms: int) -> None:
        self.deadline = trio.current_time() + session_ms / 1000


class ConsumerGroup:
    """A ``consumer`` group: its epochs, members, target assignment and offsets."""

    kind = CONSUMER
    protocol_type = CONSUMER

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Partitions] = {}  # member id -> its target partitions
        # (topic, partition) -> (member id, the member epoch it was assigned at)
        self.owners: dict[tuple[str, int], tuple[str, int]] = {}
        self.offsets: dict = {}  # (topic, partition) -> Committed
        # The subscribed topics the target was computed for: name -> (id, partitions).
        self.metadata: dict[str, tuple[object, int]] = {}
        self.matches: dict[str, frozenset[str]] = {}  # a regex -> the topics it matches
        self.seen: object = None  # the store's topics `metadata` was computed from

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.epoch > self.assignment_epoch:
            return ASSIGNING
        if any(
            m.progress.state != STABLE or m.epoch != self.assignment_epoch
            for m in self.members.values()
        ):
            return RECONCILING
        return STABLE_STATE

    def is_idle(self) -> bool:
        """Nothing to keep: no members and no committed offsets."""
        return not self.members and not self.offsets

    def check_commit(self, member_id: str, epoch: int, modern_api: bool, partitions=None) -> None:
        """Kafka's rule for an OffsetCommit: without a member (epoch -1) only while
        the group has none; else by a member, with OffsetCommit v9+, at its epoch,
        or (Kafka 4.3's KIP-1251) at an older one for ``partitions`` ((topic,
        partition) pairs) it has held since that epoch or before: the answer
        that moved it on may not have reached it when it sent the commit (its
        next heartbeat and the commit cross on the way). ``partitions`` None: at
        its epoch only."""
        if epoch < 0 and not self.members:
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        if member.classic is not None:  # a classic member commits at its generation
            if epoch != member.epoch:
                raise GroupError(KafkaCode.ILLEGAL_GENERATION)
            return
        if not modern_api:
            why = "OffsetCommit version 9 or above must be used by members using the modern group"
            raise GroupError(KafkaCode.UNSUPPORTED_VERSION, why + " protocol")
        if epoch == member.epoch or (
            partitions is not None
            and 0 <= epoch < member.epoch
            and all(self._held_since(member_id, tp) <= epoch for tp in partitions)
        ):
            return
        why = f"The received member epoch {epoch} does not match the expected member epoch"
        raise GroupError(KafkaCode.STALE_MEMBER_EPOCH, f"{why} {member.epoch}.")

    def check_fetch(self, member_id: str | None, epoch: int) -> None:
        """Kafka's rule for an OffsetFetch that names a member (v9+): at its epoch."""
        if member_id is None and epoch < 0:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        if epoch != member.epoch:
            raise GroupError(KafkaCode.STALE_MEMBER_EPOCH)

    def static(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def _held_since(self, member_id: str, tp: tuple[str, int]) -> float:
        """The epoch the member was assigned the partition at; infinity if it does
        not hold it."""
        held = self.owners.get(tp)
        return held[1] if held is not None and held[0] == member_id else float("inf")

    def owner_epoch(self, topic: str, partition: int) -> int:
        """The assignment epoch of the member holding the partition; -1 if none does."""
        held = self.owners.get((topic, partition))
        return -1 if held is None else held[1]

    def set_progress(self, member: ConsumerMember, progress: Progress) -> None:
        """Move ``member`` to ``progress``, keeping ``owners`` in step: a partition
        it keeps keeps its assignment epoch, a new one is assigned at its new epoch
        (a static member back under a new id holds what it kept from epoch 0, as
        in Kafka)."""
        held = self._release(member)
        member.progress = progress
        for ps in (progress.assigned, progress.revoking):
            for topic, partitions in ps.items():
                for p in partitions:
                    since = held.get((topic, p), max(progress.epoch, 0))
                    self.owners[(topic, p)] = (member.member_id, since)

    def _release(self, member: ConsumerMember) -> dict[tuple[str, int], int]:
        """Free what ``member`` holds; the assignment epoch of each partition it held."""
        old, held = member.progress, {}
        for ps in (old.assigned, old.revoking):
            for topic, partitions in ps.items():
                for p in partitions:
                    owner = self.owners.get((topic, p))
                    if owner is not None and owner[0] == member.member_id:
                        held[(topic, p)] = owner[1]
                        del self.owners[(topic, p)]
        return held

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        self.set_progress(member, member.progress)

    def remove(self, member_id: str) -> ConsumerMember | None:
        """Take a member out: its partitions are free, its target is dropped."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
        self.target.pop(member_id, None)
        return member

    def rename(self, member: ConsumerMember, member_id: str) -> None:
        """A static member back under a new id keeps its place, target and partitions."""
        old = member.member_id
        self._release(member)
        del self.members[old]
        if old in self.target:
            self.target[member_id] = self.target.pop(old)
        member.member_id = member_id
        self.add(member)

    def wanted(self, member: ConsumerMember) -> frozenset[str]:
        """The topics ``member`` subscribes to: its names, or what its regex matches
        (``matches``, kept by the coordinator)."""
        if member.regex:
            return frozenset(member.topics) | self.matches.get(member.regex, frozenset())
        return frozenset(member.topics)

    def subscribed_topics(self) -> set[str]:
        """Every topic a member subscribes to."""
        return set().union(*(self.wanted(m) for m in self.members.values()))
