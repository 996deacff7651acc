"""The group coordinator: Kafka's classic consumer group protocol on one node.

A group moves through Kafka's states: Empty (no members), PreparingRebalance
(members are rejoining; the round ends when every known member has rejoined
or the longest rebalance timeout has passed, and members that did not rejoin
are dropped), CompletingRebalance (a new generation and leader are chosen;
the leader's SyncGroup hands each member its assignment), Stable. A join, a
leave or an expired session starts a new round; members learn of it from
REBALANCE_IN_PROGRESS in their heartbeats.

Bounds: a member that does not heartbeat within its session timeout is
removed (`expire`, run by the daemon), and one whose connection closed
before it synced within the shortest session (`disconnected`); a group without members or committed
offsets is forgotten, so an idle group costs only its offsets; a group holds
at most ``group.max.size`` members (settings.py); members' protocol metadata
is bounded per member and in all (budget.py).

Consumer groups of KIP-848's protocol share the groups' names and offsets;
their protocol is modern_coordinator.py's (`Coordinator.consumer`), and the
sweep expires their members too.

Committed offsets and group metadata are written to ``__consumer_offsets``
(consumer_offsets.py) before they are acknowledged, and read back at the first
request after a restart. Refusals are `GroupError`s carrying Kafka's error code.
"""

from __future__ import annotations

import logging
import uuid

import trio

from ..core.errors import KafkaCode
from .budget import MetadataBudget, cost, member_protocols
from .consumer import PROTOCOL_TYPE
from .modern import ConsumerGroup
from .modern_coordinator import ConsumerGroups
from .settings import MAX_MEMBERS
from .state import (
    COMPLETING,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    GroupError,
    Member,
    Round,
    choose_protocol,
    common,
    current_round,
    settle,
)
from .store import GroupStore

logger = logging.getLogger(__name__)

MAX_GROUP_SIZE = MAX_MEMBERS
SWEEP_SECONDS = 0.5


class Coordinator(GroupStore):
    """Kafka's classic group protocol over the groups of the store (`GroupStore`);
    ``consumer``: KIP-848's protocol over the same groups (`ConsumerGroups`).
    Arguments: `GroupStore`'s."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.consumer = ConsumerGroups(self)
        self.metadata = MetadataBudget(
            self.settings.member_metadata_max_bytes, self.settings.metadata_max_bytes
        )
        self._joined_over: dict[int, set[tuple[str, str]]] = {}  # connection -> its members

    # ------------------------------------------------------------ rebalancing

    def _prepare(self, group: Group) -> None:
        """Start a round unless one is under way."""
        if group.state == PREPARING:
            return
        group.state = PREPARING
        group.round = Round()
        longest = max((m.rebalance_ms for m in group.members.values()), default=0)
        group.round_deadline = trio.current_time() + longest / 1000
        for m in group.members.values():
            m.joined = False
        if group.synced is not None:  # members parked in SyncGroup learn of the round
            group.synced.set()
            group.synced = None
        self._maybe_complete(group)

    def _maybe_complete(self, group: Group, overdue: bool = False) -> None:
        if group.state != PREPARING:
            return
        everyone = all(m.joined for m in group.members.values()) and not group.pending
        if not everyone and not overdue:
            return
        for member_id in [i for i, m in group.members.items() if not m.joined]:
            del group.members[member_id]
        group.pending.clear()
        round_, group.round = group.round, None
        group.generation += 1
        if not group.members:
            group.state, group.protocol, group.leader = EMPTY, None, None
            self._save_group(group)
        else:
            group.state = COMPLETING
            group.protocol = choose_protocol(group)
            if group.leader not in group.members:
                group.leader = next(iter(group.members))
            group.synced = trio.Event()
            for m in group.members.values():
                m.touch()
        settle(round_, group)
        self.forget_if_idle(group)

    def rebalance(self, group: Group) -> None:
        """Start a round in ``group`` (a group converted back from the consumer protocol)."""
        self._prepare(group)

    def _remove(self, group: Group, member_id: str) -> None:
        del group.members[member_id]
        if group.state in (STABLE, COMPLETING):
            self._prepare(group)
        else:
            self._maybe_complete(group)
        self.forget_if_idle(group)

    async def join(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_ms: int,
        rebalance_ms: int,
        client_id: str,
        client_host: str,
        require_known_id: bool,
        connection: int | None = None,
    ) -> tuple[Round | None, str]:
        """JoinGroup: the round the member joined once it has ended, and the
        member's id. (None, new id) when the client must rejoin with that id
        (MEMBER_ID_REQUIRED). ``connection``: the listener's connection it came
        over, whose close drops the member unless it synced."""
        self.load()
        if not group_id:
            raise GroupError(KafkaCode.INVALID_GROUP_ID)
        if not self.settings.min_session_ms <= session_ms <= self.settings.max_session_ms:
            raise GroupError(KafkaCode.INVALID_SESSION_TIMEOUT)
        if not protocol_type or not protocols:
            raise GroupError(KafkaCode.INCONSISTENT_GROUP_PROTOCOL)
        self.metadata.check(protocols)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.members:  # a classic member there
            return self.consumer.classic.join(
                group, member_id, instance_id, protocol_type, protocols, session_ms,
                rebalance_ms, client_id, client_host, require_known_id,
            )  # fmt: skip
        if group is None and member_id:
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        group = self._group(group_id)
        if group.members and (
            protocol_type != group.protocol_type
            or not common(group, {name for name, _ in protocols})
        ):
            raise GroupError(KafkaCode.INCONSISTENT_GROUP_PROTOCOL)
        static = group.instance(instance_id)
        rejoined = False  # a static member's new id: it joins the round, never a shortcut
        if not member_id:
            full = len(group.members) + len(group.pending) >= self.settings.max_size
            if static is None and full:
                raise GroupError(KafkaCode.GROUP_MAX_SIZE_REACHED)
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if static is not None:  # the instance restarted: it takes its place anew
                self.metadata.admit(protocols, cost(static.protocols))
                self._track(connection, group_id, member_id, static)
                answer = self._rejoin_static(
                    group, static, member_id, protocols, session_ms, rebalance_ms
                )
                if answer is not None:
                    return answer, member_id
                rejoined = True
            elif require_known_id and instance_id is None:
                group.pending[member_id] = trio.current_time() + session_ms / 1000
                return None, member_id
        elif member_id not in group.members and member_id not in group.pending:
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        elif static is not None and static.member_id != member_id:
            raise GroupError(KafkaCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if not rejoined:
            self.metadata.admit(protocols, cost(member.protocols) if member else 0)
        group.pending.pop(member_id, None)
        if member is None:
            member = group.members[member_id] = Member(
                member_id, instance_id, client_id, client_host, session_ms, rebalance_ms
            )
        elif (
            not rejoined
            and member.protocols == protocols
            and (group.state == COMPLETING or (group.state == STABLE and member_id != group.leader))
        ):
            # A repeated join of this generation, or a follower's that changes nothing
            # while the group is stable (Kafka's rule): the generation's answer again.
            member.touch()
            return current_round(group), member_id
        member.session_ms, member.rebalance_ms = session_ms, rebalance_ms
        member.protocols = list(protocols)
        self._track(connection, group_id, member_id, member)
        group.protocol_type = protocol_type
        round_ = group.round
        self._prepare(group)
        round_ = group.round or round_
        member.joined = True
        self._maybe_complete(group)
        return await self._await_round(group, member, round_), member_id

    def _rejoin_static(self, group, member, member_id, protocols, session_ms, rebalance_ms):
        """A static member that restarted (KIP-345) takes its instance's place under
        ``member_id``, and its old id is fenced. In a Stable group whose protocol it does
        not change, that is all: no rebalance, the generation's answer at once (the
        leader is told to skip the assignment) and its assignment back at SyncGroup.
        None when a round must run instead (the group is rebalancing, or the protocol
        would change): the caller joins the member to it."""
        old_id = member.member_id
        del group.members[old_id]
        member.member_id = member_id
        group.members[member_id] = member
        if group.leader == old_id:
            group.leader = member_id
        member.protocols = list(protocols)
        member.session_ms, member.rebalance_ms = session_ms, rebalance_ms
        logger.info("group %s: static member %s rejoined as %s", group.group_id, old_id, member_id)
        if group.state == STABLE and choose_protocol(group) == group.protocol:
            member.touch()
            self._save_group(group)
            answer = current_round(group, skip_assignment=member_id == group.leader)
            answer.replaced = old_id
            return answer
        return None

    async def _await_round(self, group: Group, member: Member, round_: Round | None) -> Round:
        if round_ is None:  # completed as this member joined
            return current_round(group)
        member.waiting += 1
        try:
            while not round_.done.is_set():
                with trio.move_on_at(group.round_deadline):
                    await round_.done.wait()
                if not round_.done.is_set() and group.round is round_:
                    self._maybe_complete(group, overdue=True)
        finally:
            member.waiting -= 1
            member.touch()
        return round_

    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        assignments: dict[str, bytes],
        protocol_type: str | None = None,
        protocol: str | None = None,
    ) -> tuple[str, str | None, bytes]:
        """SyncGroup: (protocol type, protocol, the member's assignment), once the
        leader has sent them. A request that names a protocol type or protocol
        (SyncGroup v5+) other than the group's is refused once synced
        (INCONSISTENT_GROUP_PROTOCOL). A classic member of a consumer group gets
        its assigned partitions at once (mixed.py)."""
        self.load()
        mixed = self.groups.get(group_id)
        if isinstance(mixed, ConsumerGroup):
            assignment = self.consumer.classic.sync(mixed, generation, member_id, instance_id)
            return PROTOCOL_TYPE, protocol, assignment
        group, member = self._known(group_id, member_id, instance_id)
        if generation != group.generation:
            raise GroupError(KafkaCode.ILLEGAL_GENERATION)
        if group.state == PREPARING:
            raise GroupError(KafkaCode.REBALANCE_IN_PROGRESS)
        if group.state == COMPLETING:
            if member_id == group.leader:
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                group.state = STABLE
                self._save_group(group)
                if group.synced is not None:
                    group.synced.set()
                    group.synced = None
            else:
                synced = group.synced
                member.waiting += 1
                try:
                    await synced.wait()
                finally:
                    member.waiting -= 1
                    member.touch()
                if group.generation != generation or group.state != STABLE:
                    raise GroupError(KafkaCode.REBALANCE_IN_PROGRESS)
                if group.members.get(member_id) is not member:
                    raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        member.touch()
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol is not None and protocol != group.protocol
        ):
            raise GroupError(KafkaCode.INCONSISTENT_GROUP_PROTOCOL)
        member.synced = True
        return group.protocol_type, group.protocol, member.assignment

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None):
        self.load()
        mixed = self.groups.get(group_id)
        if isinstance(mixed, ConsumerGroup):
            return self.consumer.classic.heartbeat(mixed, generation, member_id, instance_id)
        group, member = self._known(group_id, member_id, instance_id)
        member.touch()
        if group.state == PREPARING:
            raise GroupError(KafkaCode.REBALANCE_IN_PROGRESS)
        if generation != group.generation:
            raise GroupError(KafkaCode.ILLEGAL_GENERATION)

    def leave(self, group_id: str, member_id: str, instance_id: str | None) -> None:
        """LeaveGroup for one member (by member id, or by instance id alone)."""
        self.load()
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return self.consumer.classic.leave(group, member_id, instance_id)
        if group is not None and member_id in group.pending:
            del group.pending[member_id]
            self._maybe_complete(group)
            return
        if group is not None and instance_id is not None and not member_id:
            static = group.instance(instance_id)
            member_id = static.member_id if static else member_id
        self._known(group_id, member_id, instance_id)
        logger.info("group %s: member %s left", group_id, member_id)
        self._remove(group, member_id)

    def expire(self) -> int:
        """Remove members whose session ran out and end overdue rounds; how many
        members were removed."""
        now = trio.current_time()
        removed = self.consumer.expire(now)
        for group in list(self.groups.values()):
            if isinstance(group, ConsumerGroup):
                continue
            for member_id, deadline in list(group.pending.items()):
                if deadline < now:
                    del group.pending[member_id]
                    self._maybe_complete(group)
            for member in list(group.members.values()):
                if member.deadline < now and not member.waiting:
                    logger.info("group %s: member %s expired", group.group_id, member.member_id)
                    self._remove(group, member.member_id)
                    removed += 1
            if group.state == PREPARING and group.round_deadline < now:
                self._maybe_complete(group, overdue=True)
            self.forget_if_idle(group)
        self.metadata.recount(member_protocols(self.groups.values()))
        return removed

    def _track(self, connection: int | None, group_id: str, member_id: str, member) -> None:
        """Remember that ``member`` joined over ``connection`` (`disconnected`)."""
        member.connection, member.synced = connection, False
        if connection is None:
            return
        joined = self._joined_over.setdefault(connection, set())
        joined.add((group_id, member_id))
        if len(joined) > 2 * self.settings.max_size:  # members gone since: forget them
            joined -= {(g, m) for g, m in joined if self._member(g, m, connection) is None}

    def _member(self, group_id: str, member_id: str, connection: int):
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if isinstance(group, Group) else None
        return member if member is not None and member.connection == connection else None

    def disconnected(self, connection: int) -> int:
        """The listener's ``connection`` closed: the sessions of its members that
        have not synced since they last joined end within
        ``group.min.session.timeout.ms`` (their metadata is let go then, not at
        the end of a session the client chose), unless they sync or heartbeat
        meanwhile, on another connection. How many were cut short."""
        cut, soon = 0, trio.current_time() + self.settings.min_session_ms / 1000
        for group_id, member_id in self._joined_over.pop(connection, ()):
            member = self._member(group_id, member_id, connection)
            if member is None or member.synced or member.deadline <= soon:
                continue
            member.deadline = soon
            cut += 1
        return cut

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Expire sessions every `SWEEP_SECONDS` until cancelled."""
        task_status.started()
        while True:
            await trio.sleep(SWEEP_SECONDS)
            self.expire()
