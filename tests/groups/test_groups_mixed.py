"""Kafka 4's online migration in the groups room, without a network: a live classic
group converted by a consumer-protocol member, classic members of a consumer group
(JoinGroup answered at once, SyncGroup's assignment, Heartbeat's call to rejoin,
commits at their generation), the conversion back when the last consumer member
leaves, Kafka's refusals, and classic members kept across a restart. No partition
is ever held by two members of either protocol."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from logfs.core.errors import KafkaCode
from logfs.core.log import Store
from logfs.groups import Coordinator, GroupError, GroupSettings, Heartbeat


def subscription(topics, owned=None) -> bytes:
    """A ConsumerProtocol subscription v1: topics, no user data, owned partitions."""
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for t, ps in sorted(owned.items()):
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in sorted(ps))
    return out


def decoded(assignment: bytes) -> set[tuple[str, int]]:
    """An assignment read by kafka-python's own ConsumerProtocol codec."""
    a = ConsumerProtocolAssignment.decode(assignment)
    return {(tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions}


def in_trio(fn):
    trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


def assignment(partitions) -> bytes:
    """A ConsumerProtocol assignment v0 of topic ``t``'s ``partitions``."""
    body = b"".join(struct.pack(">i", p) for p in partitions)
    return (
        struct.pack(">hih", 0, 1, 1)
        + b"t"
        + struct.pack(">i", len(partitions))
        + body
        + struct.pack(">i", -1)
    )


class Classic:
    """An eager classic consumer of topic ``t`` (6 partitions): on
    REBALANCE_IN_PROGRESS it gives up everything and joins again; as the leader it
    assigns ranges; it owns what its SyncGroup gives it."""

    def __init__(self, c: Coordinator, group="g", instance=None):
        self.c, self.group, self.instance = c, group, instance
        self.member_id, self.generation, self.owned = "", -1, set()

    async def join(self):
        self.owned = set()  # eager: revoked before joining
        round_, self.member_id = await self.c.join(
            self.group,
            self.member_id,
            self.instance,
            "consumer",
            [("range", subscription(("t",)))],
            10000,
            10000,
            "cl",
            "/h",
            False,
        )
        self.generation = round_.generation
        given = {}
        if round_.leader == self.member_id:  # a classic round: the leader assigns ranges
            ids = sorted(m for m, _, _ in round_.members)
            share = 6 // len(ids)
            given = {m: assignment(range(i * share, (i + 1) * share)) for i, m in enumerate(ids)}
        _, _, mine = await self.c.sync(
            self.group, self.generation, self.member_id, self.instance, given
        )
        self.owned = decoded(mine) if mine else set()

    async def beat(self):
        try:
            self.c.heartbeat(self.group, self.generation, self.member_id, self.instance)
        except GroupError as e:
            if e.kafka_code != KafkaCode.REBALANCE_IN_PROGRESS:
                raise
            await self.join()


class Modern:
    def __init__(self, c: Coordinator, group="g", topics=("t",)):
        self.c, self.group, self.topics = c, group, topics
        self.member_id, self.epoch, self.owned = "", 0, set()

    def beat(self):
        joining = self.epoch == 0
        owned = {}
        for t, p in self.owned:
            owned.setdefault(t, set()).add(p)
        h = Heartbeat(
            self.group,
            self.member_id,
            self.epoch,
            rebalance_ms=30000 if joining else -1,
            topics=self.topics if joining else None,
            owned={t: frozenset(ps) for t, ps in owned.items()},
        )
        a = self.c.consumer.heartbeat(h)
        self.member_id, self.epoch = a.member_id, a.epoch
        if a.assignment is not None:
            self.owned = {(t, p) for t, ps in a.assignment.items() for p in ps}

    def leave(self):
        self.c.consumer.heartbeat(Heartbeat(self.group, self.member_id, -1))


def disjoint(*clients) -> bool:
    seen = set()
    for c in clients:
        if seen & c.owned:
            return False
        seen |= c.owned
    return True


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as s:
        s.create_topic("t", partitions=6)
        yield s


async def stable_classic_pair(coordinator):
    """Two classic members sharing ``t``, the group Stable."""
    a, b = Classic(coordinator), Classic(coordinator)
    await a.join()
    async with trio.open_nursery() as n:
        n.start_soon(b.join)
        await trio.sleep(0.01)
        await a.beat()  # told of the round: joins again, assigns
    assert coordinator.group("g").state == "Stable" and len(a.owned) == len(b.owned) == 3
    return a, b


def test_a_consumer_member_converts_a_live_classic_group_and_everyone_shares(store):
    coordinator = Coordinator(store)

    async def run():
        a, b = await stable_classic_pair(coordinator)
        assert coordinator.group("g").kind == "classic"
        m = Modern(coordinator)
        m.beat()
        group = coordinator.group("g")
        assert group.kind == "consumer" and set(group.members) == {
            a.member_id,
            b.member_id,
            m.member_id,
        }
        assert disjoint(a, b, m)
        for _ in range(6):
            await a.beat()
            await b.beat()
            m.beat()
            assert disjoint(a, b, m)
        assert a.owned | b.owned | m.owned == {("t", p) for p in range(6)}
        assert [len(c.owned) for c in (a, b, m)] == [2, 2, 2]
        assert group.state == "Stable"
        # a classic member commits at its generation, the member epoch
        ok = coordinator.commit_offsets(
            "g", a.generation, a.member_id, None, {("t", 0): (1, -1, "")}, False
        )
        assert ok == {("t", 0): KafkaCode.NONE}
        bad = coordinator.commit_offsets(
            "g", a.generation - 1, a.member_id, None, {("t", 0): (1, -1, "")}, False
        )
        assert bad == {("t", 0): KafkaCode.ILLEGAL_GENERATION}
        # the last consumer member leaves: a classic group again, rebalancing
        m.leave()
        group = coordinator.group("g")
        assert group.kind == "classic" and group.state == "PreparingRebalance"
        async with trio.open_nursery() as n:
            n.start_soon(a.join)
            n.start_soon(b.join)
        assert coordinator.group("g").state == "Stable"
        assert disjoint(a, b) and a.owned | b.owned == {("t", p) for p in range(6)}

    in_trio(run)


def test_classic_members_commit_at_their_generation_while_the_group_converts_back(store):
    """The last consumer member leaving converts the group back at the epoch the
    classic members are at: what they commit before they rejoin is taken, and their
    sessions go on through the rebalance that follows."""
    coordinator = Coordinator(store)

    async def run():
        a, b = await stable_classic_pair(coordinator)
        m = Modern(coordinator)
        m.beat()
        for _ in range(6):
            await a.beat()
            await b.beat()
            m.beat()
        group = coordinator.group("g")
        assert group.state == "Stable" and a.generation == b.generation == group.epoch
        m.leave()
        group = coordinator.group("g")
        assert group.kind == "classic" and group.state == "PreparingRebalance"
        assert group.generation == a.generation
        for client, p in ((a, 0), (b, 1)):  # the records each processed before rejoining
            done = coordinator.commit_offsets(
                "g", client.generation, client.member_id, None, {("t", p): (7, -1, "")}, False
            )
            assert done == {("t", p): KafkaCode.NONE}
        assert {tp: c.offset for tp, c in coordinator.committed("g").items()} == {
            ("t", 0): 7,
            ("t", 1): 7,
        }
        before = a.generation
        await trio.sleep(5)  # within their 10 s sessions
        async with trio.open_nursery() as n:  # each told of the round by its heartbeat
            n.start_soon(a.beat)
            n.start_soon(b.beat)
        await trio.sleep(8)  # past the sessions they had at the conversion
        coordinator.expire()
        group = coordinator.group("g")
        assert group.state == "Stable" and set(group.members) == {a.member_id, b.member_id}
        assert a.generation == b.generation == before + 1
        assert disjoint(a, b) and a.owned | b.owned == {("t", p) for p in range(6)}

    in_trio(run)


def test_kafkas_refusals_of_a_conversion(store):
    async def run():
        c = Coordinator(store, settings=GroupSettings(migration_policy="downgrade"))
        await stable_classic_pair(c)
        with pytest.raises(GroupError) as e:
            Modern(c).beat()
        assert e.value.kafka_code == KafkaCode.GROUP_ID_NOT_FOUND
        assert "upgrade is disabled" in e.value.message

    in_trio(run)

    async def other_type():
        c = Coordinator(store)
        await c.join("h", "", None, "connect", [("x", b"")], 10000, 10000, "c", "", False)
        with pytest.raises(GroupError) as e:
            Modern(c, group="h").beat()
        assert "consumer embedded protocol" in e.value.message

    in_trio(other_type)


def test_a_classic_member_joins_a_consumer_group_and_is_kept_across_a_restart(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", partitions=4)
        coordinator = Coordinator(store)

        async def run():
            m = Modern(coordinator)
            m.beat()
            a = Classic(coordinator)
            await a.join()
            assert coordinator.group("g").kind == "consumer"
            for _ in range(4):
                m.beat()
                await a.beat()
            assert disjoint(a, m) and len(a.owned) == len(m.owned) == 2
            member = coordinator.group("g").members[a.member_id]
            assert member.classic is not None

        in_trio(run)
    with Store(data) as store:
        coordinator = Coordinator(store)

        async def again():
            group = coordinator.group("g")
            members = list(group.members.values())
            assert sorted(x.classic is not None for x in members) == [False, True]
            [classic] = [x for x in members if x.classic is not None]
            assert classic.classic[1][0][0] == "range"

        in_trio(again)
