"""KIP-848's consumer group protocol in the groups room, without a network: no
partition ever held by two members (the assignors and reconciliation alone:
test_groups_assignors.py), static members, fencing on the trio clock, regex
subscriptions, Kafka's refusals, offsets committed by member epoch, conversion
from and to classic groups, and the records in ``__consumer_offsets`` read
back after a restart."""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from logfs.core.errors import KafkaCode
from logfs.core.log import Store
from logfs.groups import Coordinator, GroupError, GroupSettings, Heartbeat
from logfs.groups import modern_records as rec

FAST = GroupSettings(
    consumer_session_ms=3000,
    consumer_min_session_ms=1000,
    consumer_heartbeat_ms=500,
    consumer_min_heartbeat_ms=100,
)


def in_trio(fn):
    """Run ``fn`` (sync or async) in trio with a clock that jumps when all sleep."""
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main():
        result = fn()
        if hasattr(result, "__await__"):
            await result

    trio.run(main, clock=clock)


class Client:
    """An honest consumer of the protocol: it gives up what its assignment no
    longer holds and reports what it owns in every heartbeat."""

    def __init__(self, coordinator, group="g", topics=("t",), instance=None, regex=None):
        self.c, self.group = coordinator, group
        self.topics, self.instance, self.regex = topics, instance, regex
        self.member_id, self.epoch, self.owned = "", 0, {}

    def beat(self, **changes):
        joining = self.epoch == 0
        h = Heartbeat(
            self.group,
            self.member_id,
            self.epoch,
            instance_id=self.instance,
            rebalance_ms=30000 if joining else -1,
            topics=self.topics if joining else None,
            regex=self.regex if joining else None,
            owned=dict(self.owned),
            **changes,
        )
        answer = self.c.consumer.heartbeat(h)
        self.member_id, self.epoch = answer.member_id, answer.epoch
        if answer.assignment is not None:
            self.owned = dict(answer.assignment)
        return answer

    def leave(self, epoch=-1):
        self.c.consumer.heartbeat(
            Heartbeat(self.group, self.member_id, epoch, instance_id=self.instance)
        )
        self.epoch, self.owned = 0, {}

    def partitions(self):
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def disjoint(clients) -> bool:
    seen = set()
    for c in clients:
        if seen & c.partitions():
            return False
        seen |= c.partitions()
    return True


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as s:
        s.create_topic("t", partitions=6)
        yield s


# ---------------------------------------------------------------- the coordinator


@given(st.randoms(use_true_random=False))
@settings(max_examples=25, deadline=None)
def test_members_joining_and_leaving_in_any_order_never_share_a_partition(rnd):
    import tempfile

    with tempfile.TemporaryDirectory() as d, Store(d) as store:
        store.create_topic("t", partitions=8)
        coordinator = Coordinator(store)

        def run():
            clients = [Client(coordinator)]
            clients[0].beat()
            for _ in range(120):
                action = rnd.random()
                if action < 0.1 and len(clients) < 5:
                    clients.append(Client(coordinator))
                    clients[-1].beat()
                elif action < 0.15 and len(clients) > 1:
                    clients.pop(rnd.randrange(len(clients))).leave()
                else:
                    rnd.choice(clients).beat()
                assert disjoint(clients)
            for _ in range(6):  # settle: everyone heartbeats a few times
                for c in clients:
                    c.beat()
            assert disjoint(clients)
            held = set().union(*(c.partitions() for c in clients))
            assert held == {("t", p) for p in range(8)}
            sizes = [len(c.partitions()) for c in clients]
            assert max(sizes) - min(sizes) <= 1
            assert coordinator.group("g").state == "Stable"

        in_trio(run)


def test_a_static_member_back_under_a_new_id_gets_its_partitions_and_nobody_moves(store):
    coordinator = Coordinator(store)

    def run():
        a, b = Client(coordinator, instance="a"), Client(coordinator, instance="b")
        for _ in range(4):
            a.beat(), b.beat()
        epoch, mine, theirs = coordinator.group("g").epoch, a.partitions(), b.partitions()
        assert mine and theirs and not mine & theirs
        a.leave(epoch=-2)  # a static member's leave: its place is kept
        back = Client(coordinator, instance="a")
        back.beat()
        assert back.member_id != a.member_id and back.partitions() == mine
        b.beat()
        assert b.partitions() == theirs and coordinator.group("g").epoch == epoch
        # its instance id is taken while held: another one is refused
        with pytest.raises(GroupError) as e:
            Client(coordinator, instance="a").beat()
        assert e.value.kafka_code == KafkaCode.UNRELEASED_INSTANCE_ID

    in_trio(run)


def test_a_member_that_stops_heartbeating_is_fenced_and_its_partitions_move(store):
    coordinator = Coordinator(store, settings=FAST)

    async def run():
        a, b = Client(coordinator), Client(coordinator)
        for _ in range(3):
            a.beat(), b.beat()
        assert len(a.partitions()) == 3
        for _ in range(8):  # only b heartbeats; the sweep runs as the daemon's does
            await trio.sleep(0.5)
            coordinator.expire()
            b.beat()
        assert len(b.partitions()) == 6 and list(coordinator.group("g").members) == [b.member_id]
        with pytest.raises(GroupError) as e:
            a.beat()
        assert e.value.kafka_code == KafkaCode.UNKNOWN_MEMBER_ID

    in_trio(run)


def test_a_regex_subscription_follows_the_topics(store):
    coordinator = Coordinator(store)

    def run():
        c = Client(coordinator, topics=(), regex="or.*")
        c.beat()
        assert c.partitions() == set()
        store.create_topic("orders", partitions=2)
        store.create_topic("__consumer_offsetz", partitions=1)  # matched: not internal
        c.beat()
        assert {t for t, _ in c.partitions()} == {"orders"}

    in_trio(run)


@pytest.mark.parametrize(
    "h, code, words",
    [
        (Heartbeat("", "m", 1), KafkaCode.INVALID_REQUEST, "GroupId can't be empty."),
        (
            Heartbeat("g", "", 0, topics=("t",), owned={}),
            KafkaCode.INVALID_REQUEST,
            "RebalanceTimeoutMs must be provided",
        ),
        (
            Heartbeat("g", "m", 0, rebalance_ms=1, owned={}),
            KafkaCode.INVALID_REQUEST,
            "Either SubscribedTopicNames or SubscribedTopicRegex",
        ),
        (
            Heartbeat("g", "m", 0, rebalance_ms=1, topics=("t",), owned={"t": frozenset({1})}),
            KafkaCode.INVALID_REQUEST,
            "TopicPartitions must be empty",
        ),
        (Heartbeat("g", "m", -3), KafkaCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        (Heartbeat("g", "m", -2), KafkaCode.INVALID_REQUEST, "InstanceId can't be null."),
        (
            Heartbeat("g", "", 0, rebalance_ms=1, topics=("t",), owned={}, own_id=True),
            KafkaCode.INVALID_REQUEST,
            "MemberId can't be empty.",
        ),
        (
            Heartbeat("g", "m", 0, rebalance_ms=1, topics=("t",), owned={}, assignor="sticky"),
            KafkaCode.UNSUPPORTED_ASSIGNOR,
            "Supported assignors: uniform, range.",
        ),
        (
            Heartbeat("g", "m", 0, rebalance_ms=1, regex="(", owned={}),
            KafkaCode.INVALID_REGULAR_EXPRESSION,
            "not a valid regular expression",
        ),
        (Heartbeat("nosuch", "m", 4), KafkaCode.GROUP_ID_NOT_FOUND, "not found"),
    ],
)
def test_kafkas_refusals_with_kafkas_words(store, h, code, words):
    coordinator = Coordinator(store)

    def run():
        with pytest.raises(GroupError) as e:
            coordinator.consumer.heartbeat(h)
        assert e.value.kafka_code == code and words in e.value.message

    in_trio(run)


def test_a_backtracking_regex_costs_linear_time(store):
    store.create_topic("a" * 200 + "b", partitions=1)
    coordinator = Coordinator(store)

    def run():
        started = time.monotonic()
        Client(coordinator, topics=(), regex="(a+)+c").beat()
        assert time.monotonic() - started < 1

    in_trio(run)


def test_an_epoch_behind_is_fenced_but_a_lost_answer_is_forgiven(store):
    coordinator = Coordinator(store)

    def run():
        a, b = Client(coordinator), Client(coordinator)
        a.beat(), b.beat(), a.beat(), a.beat(), b.beat()
        g = coordinator.group("g")
        m = g.members[a.member_id]
        previous = m.progress.previous_epoch
        assert previous < a.epoch
        # the answer that moved it on was lost: its previous epoch, owning what it owns
        again = coordinator.consumer.heartbeat(Heartbeat("g", a.member_id, previous, owned=a.owned))
        assert again.epoch == a.epoch
        with pytest.raises(GroupError) as e:
            coordinator.consumer.heartbeat(Heartbeat("g", a.member_id, a.epoch + 1, owned={}))
        assert e.value.kafka_code == KafkaCode.FENCED_MEMBER_EPOCH

    in_trio(run)


def test_offsets_are_committed_at_the_member_epoch(store):
    coordinator = Coordinator(store)

    def run():
        a = Client(coordinator)
        a.beat()
        commit = {("t", 0): (5, -1, "")}
        ok = coordinator.commit_offsets("g", a.epoch, a.member_id, None, commit)
        assert ok == {("t", 0): KafkaCode.NONE}
        stale = coordinator.commit_offsets("g", a.epoch - 1, a.member_id, None, commit)
        assert stale == {("t", 0): KafkaCode.STALE_MEMBER_EPOCH}
        old_api = coordinator.commit_offsets("g", a.epoch, a.member_id, None, commit, False)
        assert old_api == {("t", 0): KafkaCode.UNSUPPORTED_VERSION}
        stranger = coordinator.commit_offsets("g", -1, "", None, commit)
        assert stranger == {("t", 0): KafkaCode.UNKNOWN_MEMBER_ID}  # it has members
        with pytest.raises(GroupError) as e:
            coordinator.committed("g", a.member_id, a.epoch + 7)
        assert e.value.kafka_code == KafkaCode.STALE_MEMBER_EPOCH
        assert coordinator.committed("g", a.member_id, a.epoch)[("t", 0)].offset == 5

    in_trio(run)


def test_a_commit_crossing_the_heartbeat_that_bumped_the_epoch_is_taken(store):
    """Kafka 4.3's KIP-1251: a member whose revocation was acked commits at the epoch
    its last answer gave (librdkafka sends the commit before the answer that moves it
    on has come back); a partition it has held since that epoch commits, a partition
    it gave up, an epoch ahead or one before it got the partition does not."""
    coordinator = Coordinator(store)

    def run():
        a = Client(coordinator)
        a.beat()
        joined = a.epoch
        b = Client(coordinator)
        b.beat()
        a.beat()  # told to give up half: it stays at its epoch until it has
        assert a.epoch == joined and len(a.partitions()) == 3
        kept, gone = sorted(a.partitions()), sorted({("t", p) for p in range(6)} - a.partitions())
        a.beat()  # the heartbeat saying so moves it on; the commit went out before
        assert a.epoch > joined

        def commit(epoch, tp):
            codes = coordinator.commit_offsets("g", epoch, a.member_id, None, {tp: (1, -1, "")})
            return codes[tp]

        assert commit(joined, kept[0]) == KafkaCode.NONE
        assert commit(a.epoch, kept[1]) == KafkaCode.NONE
        assert commit(joined, gone[0]) == KafkaCode.STALE_MEMBER_EPOCH
        assert commit(a.epoch + 1, kept[0]) == KafkaCode.STALE_MEMBER_EPOCH
        assert commit(joined - 1, kept[0]) == KafkaCode.STALE_MEMBER_EPOCH
        b.beat()  # b takes what a gave up: a zombie commit of it stays refused
        assert gone[0] in b.partitions() and commit(joined, gone[0]) != KafkaCode.NONE

    in_trio(run)


def test_an_empty_group_changes_protocol_keeping_its_offsets(store):
    """(A group with members converts too: test_groups_mixed.py.)"""
    coordinator = Coordinator(store)

    async def run():
        coordinator.commit_offset("g", "t", 0, 9)  # an empty classic group with an offset
        c = Client(coordinator)
        c.beat()
        group = coordinator.group("g")
        assert group.kind == "consumer" and group.offsets[("t", 0)].offset == 9
        c.leave()
        assert coordinator.group("g").kind == "consumer"  # empty, offsets kept
        round_, _ = await coordinator.join(
            "g", "", None, "consumer", [("range", b"")], 10000, 10000, "x", "", False
        )
        assert coordinator.group("g").kind == "classic" and round_.generation == 1
        assert coordinator.committed("g")[("t", 0)].offset == 9

    in_trio(run)


def test_a_restart_finds_every_group_as_it_was(tmp_path):
    data = tmp_path / "data"
    kept = {}
    with Store(data) as store:
        store.create_topic("t", partitions=6)
        coordinator = Coordinator(store)

        def run():
            clients = [Client(coordinator, instance=None if i else "s") for i in range(3)]
            for _ in range(4):
                for c in clients:
                    c.beat()
            coordinator.commit_offsets(
                "g", clients[0].epoch, clients[0].member_id, None, {("t", 1): (3, 7, "m")}
            )
            g = coordinator.group("g")
            kept.update(
                epoch=g.epoch,
                assignment_epoch=g.assignment_epoch,
                members={i: (m.instance_id, m.progress, m.topics) for i, m in g.members.items()},
                target=g.target,
                clients=clients,
            )

        in_trio(run)
    with Store(data) as store:
        coordinator = Coordinator(store)

        def again():
            g = coordinator.group("g")
            assert (g.epoch, g.assignment_epoch, g.target) == (
                kept["epoch"],
                kept["assignment_epoch"],
                kept["target"],
            )
            got = {i: (m.instance_id, m.progress, m.topics) for i, m in g.members.items()}
            assert got == kept["members"] and g.state == "Stable"
            assert coordinator.committed("g")[("t", 1)][:3] == (3, 7, "m")
            for c in kept["clients"]:  # the members go on at their epochs
                c.c = coordinator
                assert c.beat().epoch == kept["epoch"]

        in_trio(again)


def test_the_records_are_kafkas_bytes():
    assert rec.key(rec.GROUP_EPOCH, "g") == b"\x00\x03\x00\x01g"
    assert rec.key(rec.CURRENT, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    assert rec.epoch_value(5) == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"
    topic = bytes(range(16))
    import uuid

    value = rec.target_value({uuid.UUID(bytes=topic): [2, 1]})
    # version 0, one topic (varint 2), the uuid, two partitions (varint 3), tags, tags
    assert value == b"\x00\x00\x02" + topic + b"\x03\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00"
    member = rec.MemberRecord(None, "r", "c", "/h", ("t",), None, 300, "range")
    assert rec.read_member(rec.member_value(member)) == member
