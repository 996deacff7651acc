"""A consumer group's state as the coordinator (coordinator.py) keeps it: its
members, the rebalance round under way, and its committed offsets; and
`GroupError`, a request the coordinator refuses."""

from __future__ import annotations

import errno

import trio

from ..core.errors import KafkaCode, LogfsError
from .consumer_offsets import Committed, StoredGroup, StoredMember

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
)


class GroupError(LogfsError):
    """A request refused by the coordinator's rules, with the Kafka error code
    that says which (an unknown member, a stale generation, a rebalance under
    way, ...). On the mount, a ``groups/<group>`` file refused a commit because
    the group's members own its commits: EBUSY.

    Args:
        code: Kafka's error code (`KafkaCode`), carried as ``kafka_code``.
        message: what the client is told (Kafka's error message), if more than the code.
    """

    errno = errno.EBUSY
    kafka_code = KafkaCode.REBALANCE_IN_PROGRESS  # each instance carries its own

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or KafkaCode(code).name)
        self.kafka_code = code
        self.message = message


class Member:
    __slots__ = (
        "member_id",
        "instance_id",
        "client_id",
        "client_host",
        "session_ms",
        "rebalance_ms",
        "protocols",
        "assignment",
        "deadline",
        "joined",
        "waiting",
        "connection",
        "synced",
    )

    def __init__(self, member_id, instance_id, client_id, client_host, session_ms, rebalance_ms):
        self.member_id, self.instance_id = member_id, instance_id
        self.client_id, self.client_host = client_id, client_host
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.protocols: list[tuple[str, bytes]] = []
        self.assignment = b""
        self.deadline = 0.0
        self.joined = False  # rejoined in the current round
        self.waiting = 0  # requests parked in JoinGroup/SyncGroup: the member is alive
        self.connection: int | None = None  # the listener's connection it last joined over
        self.synced = False  # got its assignment since it last joined

    def touch(self) -> None:
        self.deadline = trio.current_time() + self.session_ms / 1000

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")


class Round:
    """One rebalance round: what its JoinGroup answers carry once it ends.
    ``skip_assignment``: the answer to a static leader that rejoined a stable
    group, which must not assign again (KIP-814); ``replaced``: the member id
    a static member's rejoin replaced."""

    def __init__(self, skip_assignment: bool = False) -> None:
        self.done = trio.Event()
        self.generation, self.protocol, self.leader = 0, None, ""
        self.members: list[tuple[str, str | None, bytes]] = []
        self.skip_assignment = skip_assignment
        self.replaced: str | None = None


class Group:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.generation = 0
        self.protocol_type = ""
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.pending: dict[str, float] = {}  # member ids handed out, not yet joined: deadline
        self.offsets: dict[tuple[str, int], Committed] = {}
        self.round: Round | None = None
        self.round_deadline = 0.0
        self.synced: trio.Event | None = None

    def restore(self, stored: StoredGroup) -> None:
        """Take the generation and members ``__consumer_offsets`` kept: after a
        restart, members go on as they were and leave unless they heartbeat."""
        self.generation, self.protocol_type = stored.generation, stored.protocol_type
        self.protocol, self.leader = stored.protocol, stored.leader
        now = trio.current_time()
        for s in stored.members:
            member = Member(
                s.member_id, s.instance_id, s.client_id, s.client_host,
                s.session_timeout_ms, s.rebalance_timeout_ms,
            )  # fmt: skip
            member.protocols = [(stored.protocol or "", s.subscription)]
            member.assignment = s.assignment
            member.deadline = now + s.session_timeout_ms / 1000
            self.members[s.member_id] = member
        self.state = STABLE if self.members else EMPTY

    def stored(self, timestamp: int) -> StoredGroup:
        """The group as its metadata record keeps it."""
        members = tuple(
            StoredMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_ms,
                m.session_ms,
                m.metadata(self.protocol),
                m.assignment,
            )  # fmt: skip
            for m in self.members.values()
        )
        return StoredGroup(
            self.protocol_type, self.generation, self.protocol, self.leader, timestamp, members
        )

    kind = "classic"

    def is_idle(self) -> bool:
        """Nothing to keep: no members, none joining, no offsets, no round under way."""
        return not self.members and not self.pending and not self.offsets and self.round is None

    def instance(self, instance_id: str | None) -> Member | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)


def common(group: Group, names: set[str]) -> set[str]:
    """Protocols every member (and the newcomer's ``names``) supports."""
    common = set(names)
    for m in group.members.values():
        common &= {name for name, _ in m.protocols}
    return common


def choose_protocol(group: Group) -> str | None:
    """Kafka's vote: each member names its most preferred protocol among those
    all support; the most named wins (the first in member order on a tie)."""
    shared = common(group, {n for m in group.members.values() for n, _ in m.protocols})
    votes: dict[str, int] = {}
    for m in group.members.values():
        choice = next((name for name, _ in m.protocols if name in shared), None)
        if choice is not None:
            votes[choice] = votes.get(choice, 0) + 1
    return max(votes, key=votes.get) if votes else None


def settle(round_: Round, group: Group) -> Round:
    """End ``round_`` with the group's generation in force: its protocol, leader and
    members, and wake the members waiting on it."""
    round_.generation, round_.protocol, round_.leader = (
        group.generation,
        group.protocol,
        group.leader or "",
    )
    round_.members = [
        (m.member_id, m.instance_id, m.metadata(group.protocol)) for m in group.members.values()
    ]
    round_.done.set()
    return round_


def current_round(group: Group, skip_assignment: bool = False) -> Round:
    """The answer of the generation in force, for a member joining it again."""
    return settle(Round(skip_assignment), group)
