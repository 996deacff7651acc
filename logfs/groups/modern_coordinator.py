"""KIP-848's consumer group protocol (``group.protocol=consumer``): the
coordinator assigns, members reconcile, one ConsumerGroupHeartbeat at a time.

A heartbeat joins (member epoch 0), goes on (the member's epoch) or leaves
(-1; -2 for a static member that will come back). Each one, in Kafka's
order: the member is created or updated from what the request carries (a
field left null keeps its value); the group epoch is bumped if the member is
new or changed its subscription, or a subscribed topic changed (appeared,
went, grew); a new target assignment is computed by the member's chosen
server assignor (assignors.py) when the group epoch passed the target's;
the member moves one step towards its target (reconcile.py); the answer
carries its epoch, the heartbeat interval and, when it changed or the
request was a full one, its assignment.

Static members (KIP-345 with KIP-848): a member with an instance id that
leaves with epoch -2 keeps its place and partitions for a session timeout;
a member joining with that instance id takes them over at once, without a
new epoch for anyone. An instance id held by a member that did not leave so
is refused (UNRELEASED_INSTANCE_ID) until that member's session ends.

Bounds: a member is removed (fenced) when its session times out
(``group.consumer.session.timeout.ms``) or when it does not give up its
revoked partitions within its rebalance timeout; a group takes at most
``group.consumer.max.size`` members; subscription regexes are RE2 (Kafka's
syntax, matched in linear time), matched against whole topic names,
internal topics never.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import trio

from ..core.config import INTERNAL_TOPICS
from ..core.errors import KafkaCode
from .assignors import ASSIGNORS, Subscriber
from .heartbeats import (
    STATIC_LEAVE_EPOCH,
    Heartbeat,
    HeartbeatAnswer,
    Regexes,
    check,
    check_epoch,
    new_member_id,
)
from .mixed import ClassicMembers
from .modern import NOTHING, ConsumerGroup, ConsumerMember
from .modern_books import ModernBooks
from .reconcile import UNREVOKED_PARTITIONS, Progress, reconcile
from .state import Group, GroupError

logger = logging.getLogger(__name__)


class ConsumerGroups:
    """The consumer groups of a coordinator's books (`GroupStore`): heartbeats,
    leaving, expiry. ``books`` holds every group, classic and consumer alike."""

    def __init__(self, books) -> None:
        self.books = books
        self.records = ModernBooks(books.store)
        self.classic = ClassicMembers(self)  # classic members and conversions (mixed.py)

    @property
    def settings(self):
        return self.books.settings

    # ------------------------------------------------------------ the group

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        """The consumer group of that id; a classic group becomes one when a member
        joins, as in Kafka: one without members keeps only its offsets, one with
        members converts them (mixed.py, or Kafka's refusal)."""
        group = self.books.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        if group is None and not create:
            raise GroupError(KafkaCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if isinstance(group, Group) and not create:
            raise GroupError(
                KafkaCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        if isinstance(group, Group) and (group.members or group.pending):
            return self.classic.upgrade(group)  # Kafka 4's online upgrade (mixed.py)
        converted = ConsumerGroup(group_id)
        if group is not None:
            converted.offsets = group.offsets
            self.books.drop_classic_metadata(group)
        self.books.groups[group_id] = converted
        return converted

    def _member(self, group: ConsumerGroup, h: Heartbeat) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat ``h`` (a join, epoch 0, or a member's) is from, and
        whether a static member's instance came back under a new member id."""
        static = group.static(h.instance_id)
        if h.epoch == 0 and static is not None and static.member_id != h.member_id:
            if static.epoch != STATIC_LEAVE_EPOCH:
                why = f"Static member {h.member_id} with instance id {h.instance_id} cannot join"
                raise GroupError(
                    KafkaCode.UNRELEASED_INSTANCE_ID,
                    f"{why} the group because the instance id is owned by {static.member_id}"
                    " member.",
                )
            old_id = static.member_id
            group.rename(static, h.member_id)  # takes its place, target and partitions
            group.set_progress(static, static.progress._replace(epoch=0, previous_epoch=0))
            self.records.removed(group, old_id)
            self.records.target(group, [h.member_id])
            logger.info("consumer group %s: %s is back as %s", group.group_id, old_id, h.member_id)
            return static, True
        if h.epoch == 0:
            member = group.members.get(h.member_id)
            if member is None:
                size = self.settings.consumer_max_size
                if len(group.members) >= size:
                    why = f"The consumer group has reached its maximum capacity of {size} members."
                    raise GroupError(KafkaCode.GROUP_MAX_SIZE_REACHED, why)
                return ConsumerMember(h.member_id), False
            # Rejoining under its id: it has given everything up (its request says so).
            group.set_progress(member, NOTHING)
            return member, False
        if h.instance_id is not None:
            if static is None:
                why = f"Instance id {h.instance_id} is unknown."
                raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID, why)
            if static.member_id != h.member_id:
                why = f"Static member {h.member_id} with instance id {h.instance_id} was fenced"
                raise GroupError(KafkaCode.FENCED_INSTANCE_ID, f"{why} by {static.member_id}.")
        member = group.members.get(h.member_id)
        if member is None:
            why = f"Member {h.member_id} is not a member of group {group.group_id}."
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID, why)
        check_epoch(member.epoch, member.progress.previous_epoch, member.progress.assigned, h)
        return member, False

    # ------------------------------------------------------------ heartbeats

    def heartbeat(self, h: Heartbeat) -> HeartbeatAnswer:
        """ConsumerGroupHeartbeat (see the module's description).

        Raises:
            GroupError: Kafka's refusal (INVALID_REQUEST, UNKNOWN_MEMBER_ID,
                FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, ...).
        """
        self.books.load()
        check(h, self.settings.assignors)
        if h.epoch < 0:
            return self._leave(h)
        group = self._group(h.group_id, create=h.epoch == 0)
        h = h._replace(member_id=h.member_id or new_member_id())
        member, replaced = self._member(group, h)
        new = member.member_id not in group.members
        before = (member.subscription(), member.instance_id, member.rack_id, member.rebalance_ms)
        given = {"instance_id": h.instance_id, "rack_id": h.rack_id, "regex": h.regex}
        given |= {"topics": h.topics, "assignor": h.assignor}
        for name, value in given.items():  # a field left null keeps its value
            if value is not None:
                setattr(member, name, value)
        if h.rebalance_ms != -1:
            member.rebalance_ms = h.rebalance_ms
        after = (member.subscription(), member.instance_id, member.rack_id, member.rebalance_ms)
        member.client_id, member.client_host = h.client_id, h.client_host
        if new:
            group.add(member)
        if new or replaced or after != before:
            self.records.member(group, member)
        self.refresh(group, bump=new or after[0][:2] != before[0][:2])
        old = member.progress
        target = group.target.get(member.member_id, {})
        progress = reconcile(old, group.assignment_epoch, target, group.owner_epoch, h.owned)
        if progress is not old:
            self.advance(group, member, progress)
        member.touch(self.settings.consumer_session_ms)
        self.records.write()
        assigned = member.progress.assigned
        send = h.full or assigned != old.assigned
        interval = self.settings.consumer_heartbeat_ms
        return HeartbeatAnswer(member.member_id, member.epoch, interval, assigned if send else None)

    def advance(self, group: ConsumerGroup, member: ConsumerMember, progress: Progress) -> None:
        group.set_progress(member, progress)
        if progress.state == UNREVOKED_PARTITIONS and member.rebalance_ms >= 0:
            member.revoke_deadline = trio.current_time() + member.rebalance_ms / 1000
        else:
            member.revoke_deadline = None
        self.records.current(group, member)

    def refresh(self, group: ConsumerGroup, bump: bool) -> None:
        """Bump the group epoch when a subscription or a subscribed topic changed, and
        compute a new target assignment when the target is older than the group."""
        topics = self.books.store.topics()  # the same object until a topic changes
        if bump or group.seen is not topics:
            group.seen = topics
            for regex in {m.regex for m in group.members.values() if m.regex}:
                group.matches[regex] = self._matching(regex, topics)
            ids = self.books.store.topic_ids
            subscribed = group.subscribed_topics()
            metadata = {t: (ids.id_of(t), topics[t]) for t in subscribed if t in topics}
            if metadata != group.metadata:
                group.metadata, bump = metadata, True
                self.records.metadata(group)
        if bump:
            group.epoch += 1
            self.records.epoch(group)
            logger.info("consumer group %s: epoch %d", group.group_id, group.epoch)
        if group.epoch > group.assignment_epoch:
            self._assign(group)

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor most members name (Kafka's rule), else the first configured."""
        chosen = [m.assignor for m in group.members.values() if m.assignor is not None]
        return max(sorted(set(chosen)), key=chosen.count) if chosen else self.settings.assignors[0]

    def _assign(self, group: ConsumerGroup) -> None:
        counts = {t: n for t, (_, n) in group.metadata.items()}
        name = self.assignor_of(group)
        subscribers = [
            Subscriber(
                m.member_id,
                m.instance_id,
                group.wanted(m) & counts.keys(),
                group.target.get(m.member_id, {}),
            )
            for m in group.members.values()
        ]
        target = ASSIGNORS[name](subscribers, counts)
        new = {
            m: {t: frozenset(ps) for t, ps in parts.items() if ps} for m, parts in target.items()
        }
        changed = [m for m in new if new[m] != group.target.get(m)]
        group.target, group.assignment_epoch = new, group.epoch
        self.records.target(group, changed)

    @staticmethod
    def _matching(regex: str, topics: Mapping[str, int]) -> frozenset[str]:
        pattern = Regexes.compile(regex)
        return frozenset(t for t in topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t))

    # ------------------------------------------------------------ leaving and expiry

    def _leave(self, h: Heartbeat) -> HeartbeatAnswer:
        group = self._group(h.group_id, create=False)
        if h.instance_id is None:
            member = group.members.get(h.member_id)
            if member is None:
                raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static(h.instance_id)
            if member is None:
                why = f"Instance id {h.instance_id} is unknown."
                raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID, why)
            if member.member_id != h.member_id:
                raise GroupError(KafkaCode.FENCED_INSTANCE_ID)
        if h.epoch == STATIC_LEAVE_EPOCH:
            # It keeps its place and partitions for its session: its instance comes back.
            logger.info("consumer group %s: %s left for now", h.group_id, h.member_id)
            kept = member.progress._replace(epoch=STATIC_LEAVE_EPOCH, revoking={})
            self.advance(group, member, kept)
        else:
            logger.info("consumer group %s: member %s left", h.group_id, h.member_id)
            self.fence(group, member)
        self.records.write()
        return HeartbeatAnswer(h.member_id, h.epoch, self.settings.consumer_heartbeat_ms, None)

    def fence(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Remove a member: its partitions go to the others at the next epoch (written
        at the next `ModernBooks.write`). When only classic members remain, the group
        is converted back instead, at the epoch they are at: their commits of that
        generation go on being taken while they rejoin (Kafka's downgrade bumps no
        epoch either)."""
        group.remove(member.member_id)
        self.records.removed(group, member.member_id)
        if self.books.forget_if_idle(group):
            self.records.deleted(group)
        elif not self.classic.maybe_downgrade(group):
            self.refresh(group, bump=True)

    def expire(self, now: float) -> int:
        """Fence the members whose session ended or who kept revoked partitions past
        their rebalance timeout; how many."""
        fenced = 0
        for group in [g for g in self.books.groups.values() if isinstance(g, ConsumerGroup)]:
            for member in list(group.members.values()):
                late = member.revoke_deadline is not None and member.revoke_deadline < now
                if self.books.groups.get(group.group_id) is not group:
                    break  # converted back to a classic group by the last fencing
                if member.deadline < now or late:
                    why = "did not revoke in time" if late else "session expired"
                    logger.info(
                        "consumer group %s: member %s %s", group.group_id, member.member_id, why
                    )
                    self.fence(group, member)
                    fenced += 1
        if fenced:
            self.records.write()
        return fenced
