"""Members of the classic protocol in a consumer group, and groups converted
from one protocol to the other while they have members: Kafka 4's online
migration (``group.consumer.migration.policy``, ``bidirectional`` by default).

- **Upgrade.** A consumer-protocol member joining a live classic group of the
  ``consumer`` protocol type converts it (policy ``upgrade`` or
  ``bidirectional``): each classic member becomes a member of the consumer
  group at the classic generation, holding what its last assignment gave it,
  and keeps speaking the classic protocol. The joining member then bumps the
  group epoch like any newcomer. A classic group in the middle of a
  rebalance converts once it is stable (the joining member is told to retry:
  COORDINATOR_NOT_AVAILABLE); one of another protocol type, or larger than
  ``group.consumer.max.size``, is refused (GROUP_ID_NOT_FOUND), as in Kafka.
- **Classic members of a consumer group** (joined before or after): JoinGroup
  is answered at once with the member's epoch as the generation (no leader:
  the coordinator assigns), SyncGroup with the member's assigned partitions
  in the ConsumerProtocol's bytes, Heartbeat with REBALANCE_IN_PROGRESS
  whenever the member must join again to move on (the group epoch passed
  its own, it must give partitions up, or a partition it waits for is free);
  its JoinGroup's subscription names its topics and the partitions it still
  owns. Its session is its own session timeout.
- **Downgrade.** When the last member of the consumer protocol leaves and
  classic members remain (policy ``downgrade`` or ``bidirectional``), the
  group becomes a classic group again at its epoch, not bumped by the leave
  (the generation the members commit at until they rejoin), every member
  holding its assignment, and a rebalance starts.
"""

from __future__ import annotations

import logging

from ..core.errors import KafkaCode
from .consumer import (
    PROTOCOL_TYPE,
    assigned_partitions,
    assignment_bytes,
    owned_partitions,
    subscribed_topics,
    version_of,
)
from .heartbeats import new_member_id
from .modern import NOTHING, ConsumerGroup, ConsumerMember
from .reconcile import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, Progress, reconcile
from .state import STABLE as CLASSIC_STABLE
from .state import Group, GroupError, Member, Round

logger = logging.getLogger(__name__)


class ClassicMembers:
    """The classic protocol's requests for members of consumer groups, and the
    conversions. ``modern``: the coordinator's `ConsumerGroups`."""

    def __init__(self, modern) -> None:
        self.modern = modern

    @property
    def settings(self):
        return self.modern.settings

    # ------------------------------------------------------------ conversions

    def upgrade(self, group: Group) -> ConsumerGroup:
        """A live classic group as a consumer group (its members keep the classic protocol).

        Raises:
            GroupError: GROUP_ID_NOT_FOUND when Kafka would refuse the conversion,
                COORDINATOR_NOT_AVAILABLE while it rebalances (the member retries).
        """
        refusal = None
        if self.settings.migration_policy not in ("upgrade", "bidirectional"):
            refusal = "the online upgrade is disabled"
        elif group.protocol_type != PROTOCOL_TYPE:
            refusal = "the group does not use the consumer embedded protocol"
        elif len(group.members) > self.settings.consumer_max_size:
            refusal = "the group is larger than a consumer group may be"
        if refusal is not None:
            raise GroupError(
                KafkaCode.GROUP_ID_NOT_FOUND,
                f"Group {group.group_id} is not a consumer group: {refusal}.",
            )
        if group.state != CLASSIC_STABLE or group.pending:
            why = f"Group {group.group_id} converts to a consumer group once it is stable."
            raise GroupError(KafkaCode.COORDINATOR_NOT_AVAILABLE, why)
        converted = ConsumerGroup(group.group_id)
        converted.offsets = group.offsets
        converted.epoch = converted.assignment_epoch = group.generation
        for m in group.members.values():
            member = ConsumerMember(m.member_id)
            member.instance_id, member.client_id, member.client_host = (
                m.instance_id,
                m.client_id,
                m.client_host,
            )
            member.rebalance_ms, member.deadline = m.rebalance_ms, m.deadline
            member.classic = (m.session_ms, list(m.protocols))
            member.topics = tuple(sorted(subscribed_topics(m.metadata(group.protocol))))
            assigned = _grouped(assigned_partitions(m.assignment))
            member.progress = Progress(STABLE, group.generation, group.generation, assigned, {})
            converted.target[m.member_id] = assigned
            converted.add(member)
        records = self.modern.records
        self.modern.books.drop_classic_metadata(group)
        records.epoch(converted)
        records.target(converted, list(converted.members))
        for member in converted.members.values():
            records.member(converted, member)
            records.current(converted, member)
        self.modern.books.groups[group.group_id] = converted
        logger.info("group %s: converted to a consumer group", group.group_id)
        return converted

    def maybe_downgrade(self, group: ConsumerGroup) -> bool:
        """Back to a classic group when only classic members remain (then rebalanced),
        its generation the group's epoch as it stands: the one the members are at
        once they have reconciled, so that what they commit meanwhile is taken.
        Whether it was converted."""
        members = list(group.members.values())
        if (
            not members
            or any(m.classic is None for m in members)
            or self.settings.migration_policy not in ("downgrade", "bidirectional")
            or len(members) > self.settings.max_size
        ):
            return False
        classic = Group(group.group_id)
        classic.offsets, classic.protocol_type = group.offsets, PROTOCOL_TYPE
        classic.generation = group.epoch
        for m in members:
            session_ms, protocols = m.classic
            member = Member(
                m.member_id, m.instance_id, m.client_id, m.client_host, session_ms, m.rebalance_ms
            )
            member.protocols = list(protocols)
            member.assignment = assignment_bytes(
                m.progress.assigned, version_of(protocols[0][1] if protocols else b"")
            )
            member.deadline = m.deadline
            classic.members[m.member_id] = member
        classic.protocol = _first_common(classic)
        classic.leader = next(iter(classic.members))
        classic.state = CLASSIC_STABLE
        self.modern.records.deleted(group)
        self.modern.books.groups[group.group_id] = classic
        logger.info("group %s: converted back to a classic group", group.group_id)
        self.modern.books.rebalance(classic)
        return True

    # ------------------------------------------------------------ the classic requests

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None):
        if instance_id is not None:
            static = group.static(instance_id)
            if static is None:
                raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
            if static.member_id != member_id:
                raise GroupError(KafkaCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or member.classic is None:  # a consumer-protocol member: unknown
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        return member

    def join(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_ms: int,
        rebalance_ms: int,
        client_id: str,
        client_host: str,
        require_known_id: bool,
    ) -> tuple[Round | None, str]:
        """JoinGroup of a classic member: answered at once (see the module)."""
        names = {name for name, _ in protocols}
        classic = [m for m in group.members.values() if m.classic is not None]
        shared = all(names & {n for n, _ in m.classic[1]} for m in classic)
        if protocol_type != PROTOCOL_TYPE or not protocols or not shared:
            raise GroupError(KafkaCode.INCONSISTENT_GROUP_PROTOCOL)
        unknown = not member_id
        member_id = member_id or new_member_id()
        if unknown and len(group.members) >= self.settings.consumer_max_size:
            raise GroupError(KafkaCode.GROUP_MAX_SIZE_REACHED)
        if unknown and require_known_id and instance_id is None:
            return None, member_id  # MEMBER_ID_REQUIRED
        records = self.modern.records
        static = group.static(instance_id)
        if static is not None and unknown:  # a static member back: its place and partitions
            old = static.member_id
            group.rename(static, member_id)
            group.set_progress(static, static.progress._replace(epoch=0, previous_epoch=0))
            records.removed(group, old)
            records.target(group, [member_id])
        elif static is not None and static.member_id != member_id:
            raise GroupError(KafkaCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        new = member is None
        if new:
            member = ConsumerMember(member_id)
            member.progress = NOTHING
        metadata = protocols[0][1]
        before = member.topics
        member.instance_id, member.rebalance_ms = instance_id, rebalance_ms
        member.client_id, member.client_host = client_id, client_host
        member.topics = tuple(sorted(subscribed_topics(metadata)))
        member.regex, member.assignor = None, None
        member.classic = (session_ms, list(protocols))
        if new:
            group.add(member)
        records.member(group, member)
        self.modern.refresh(group, bump=new or member.topics != before)
        target = group.target.get(member_id, {})
        owned = owned_partitions(metadata) or {}
        progress = reconcile(
            member.progress, group.assignment_epoch, target, group.owner_epoch, owned
        )
        if progress is not member.progress:
            self.modern.advance(group, member, progress)
        member.touch(session_ms)
        records.write()
        answer = Round()
        answer.generation, answer.protocol = member.epoch, protocols[0][0]
        return settle_answer(answer), member_id

    def sync(
        self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None
    ) -> bytes:
        """SyncGroup of a classic member: its assigned partitions."""
        member = self._member(group, member_id, instance_id)
        if generation != member.epoch:
            raise GroupError(KafkaCode.ILLEGAL_GENERATION)
        member.touch(member.classic[0])
        version = version_of(member.classic[1][0][1]) if member.classic[1] else 0
        return assignment_bytes(member.progress.assigned, version)

    def heartbeat(
        self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None
    ) -> None:
        """Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it must join again."""
        member = self._member(group, member_id, instance_id)
        if generation != member.epoch:
            raise GroupError(KafkaCode.ILLEGAL_GENERATION)
        member.touch(member.classic[0])
        progress = member.progress
        waiting = {
            (t, p)
            for t, ps in group.target.get(member_id, {}).items()
            for p in ps - progress.assigned.get(t, frozenset())
        }
        freed = progress.state == UNRELEASED_PARTITIONS and any(
            group.owner_epoch(t, p) == -1 for t, p in waiting
        )
        if member.epoch < group.epoch or progress.state == UNREVOKED_PARTITIONS or freed:
            raise GroupError(KafkaCode.REBALANCE_IN_PROGRESS)

    def leave(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
        """LeaveGroup of a classic member (by member id, or by instance id alone)."""
        if instance_id is not None and not member_id:
            static = group.static(instance_id)
            member_id = static.member_id if static is not None else member_id
        member = self._member(group, member_id, instance_id)
        logger.info("consumer group %s: classic member %s left", group.group_id, member_id)
        self.modern.fence(group, member)
        self.modern.records.write()


def settle_answer(answer: Round) -> Round:
    """A JoinGroup answer that needs no round: done at once, no leader, no members."""
    answer.leader, answer.members = "", []
    answer.done.set()
    return answer


def _grouped(pairs: list[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for topic, p in pairs:
        out.setdefault(topic, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def _first_common(group: Group) -> str | None:
    names = None
    for m in group.members.values():
        mine = [n for n, _ in m.protocols]
        names = mine if names is None else [n for n in names if n in mine]
    return names[0] if names else None
