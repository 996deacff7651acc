"""The groups room on its own, without the Kafka face: the coordinator's
rebalance rounds, sessions and refusals (each a GroupError with Kafka's code),
committed offsets kept in ``__consumer_offsets`` across a restart, and the
ConsumerProtocol bytes read as kafka-python writes them. The same coordinator
behind Kafka's clients: tests/kafka/test_kafka_groups*.py."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
from kafka.protocol.old.consumer_protocol import (  # kafka-python's encoder: independent
    ConsumerProtocolMemberAssignment_v0 as Assignment,
)
from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberMetadata_v0 as Subscription,
)

from logfs.core.errors import KafkaCode
from logfs.core.log import Store
from logfs.groups import EMPTY, PREPARING, STABLE, Coordinator, GroupError, describe_groups
from logfs.groups.consumer import assigned_partitions, subscribed_topics

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS, REBALANCE_MS = 10_000, 30_000


def subscription(*topics: str) -> bytes:
    return Subscription(0, list(topics), b"").encode()


def assignment(*partitions: tuple[str, list[int]]) -> bytes:
    return Assignment(0, list(partitions), b"").encode()


async def join(coordinator: Coordinator, member_id: str = "", *topics: str, client="c"):
    """A consumer's JoinGroup for group "g" (the round's answer, the member id)."""
    return await coordinator.join(
        "g", member_id, None, "consumer", [("range", subscription(*topics or ("orders",)))],
        SESSION_MS, REBALANCE_MS, client, "127.0.0.1", False,
    )  # fmt: skip


def run(test) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("orders", partitions=2)
        store.log("orders", 0).append([b"v%d" % i for i in range(10)])
        yield store


def test_the_room_imports_without_kio_or_any_face(tmp_path):
    """logfs.groups needs core and trio only: with kio blocked it imports and works."""
    code = (
        "import sys\n"
        "sys.modules['kio'] = None  # any import of kio now fails\n"
        "from logfs.core.log import Store\n"
        "import logfs.groups\n"
        f"with Store({str(tmp_path / 'data')!r}) as store:\n"
        "    store.create_topic('t')\n"
        "    groups = logfs.groups.Coordinator(store)\n"
        "    groups.commit_offset('g', 't', 0, 0)\n"
        "    print(groups.committed('g')[('t', 0)].offset, end=' ')\n"
        "    print(logfs.groups.describe_groups(store)[0]['group'], end=' ')\n"
        "faces = ('kio', 'logfs.kafka', 'logfs.mount', 'logfs.daemon', 'logfs.spark', 'pyfuse3')\n"
        "print(sorted(m for m in sys.modules if sys.modules[m] is not None\n"
        "             and any(m == f or m.startswith(f + '.') for f in faces)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 g []"


def test_a_rebalance_hands_out_generations_and_assignments(store):
    async def test():
        groups = Coordinator(store)
        round1, first = await join(groups)
        assert (round1.generation, round1.leader) == (1, first)
        kind, protocol, mine = await groups.sync(
            "g", 1, first, None, {first: assignment(("orders", [0, 1]))}
        )
        assert groups.group("g").state == STABLE and (kind, protocol) == ("consumer", "range")
        assert assigned_partitions(mine) == [("orders", 0), ("orders", 1)]
        answers = {}
        async with trio.open_nursery() as nursery:

            async def second():
                answers["second"] = await join(groups, "", "orders", client="d")

            nursery.start_soon(second)
            await trio.sleep(1)  # the second joins: a round starts, the first must rejoin
            assert groups.group("g").state == PREPARING
            with pytest.raises(GroupError) as refused:
                groups.heartbeat("g", 1, first, None)
            assert refused.value.kafka_code == KafkaCode.REBALANCE_IN_PROGRESS
            answers["first"] = await join(groups, first)
        (round2, first_again), (round2b, other) = answers["first"], answers["second"]
        assert first_again == first and round2 is round2b and round2.generation == 2
        assert round2.leader == first and {m for m, _, _ in round2.members} == {first, other}
        plan = {first: assignment(("orders", [0])), other: assignment(("orders", [1]))}
        async with trio.open_nursery() as nursery:
            got = {}

            async def follower():
                got["other"] = (await groups.sync("g", 2, other, None, {}))[2]

            nursery.start_soon(follower)
            await trio.sleep(0.1)  # the follower waits for the leader's assignments
            assert "other" not in got
            got["first"] = (await groups.sync("g", 2, first, None, plan))[2]
        assert assigned_partitions(got["other"]) == [("orders", 1)]
        groups.heartbeat("g", 2, other, None)
        codes = groups.commit_offsets("g", 2, other, None, {("orders", 1): (7, 3, "meta")})
        assert codes == {("orders", 1): KafkaCode.NONE}
        groups.leave("g", other, None)  # a new round: the first alone rejoins
        assert groups.group("g").state == PREPARING

    run(test)


def test_refusals_carry_kafka_codes(store):
    async def test():
        groups = Coordinator(store)

        async def refused(call, *args) -> int:
            with pytest.raises(GroupError) as e:
                result = call(*args)
                if hasattr(result, "__await__"):
                    await result
            assert e.value.errno == errno.EBUSY  # what the mount's groups/ files answer
            return e.value.kafka_code

        bad_session = groups.join("g", "", None, "consumer", [("range", b"")], 1, 1, "c", "", False)
        assert await refused(lambda: bad_session) == KafkaCode.INVALID_SESSION_TIMEOUT
        assert (
            await refused(groups.heartbeat, "g", 1, "nobody", None) == KafkaCode.UNKNOWN_MEMBER_ID
        )
        assert await refused(groups.delete_group, "nothing") == KafkaCode.GROUP_ID_NOT_FOUND
        _, member = await join(groups, "", "orders")
        assert await refused(groups.commit_offset, "g", "orders", 0, 5) == (
            KafkaCode.UNKNOWN_MEMBER_ID  # the group's members own its commits
        )
        assert await refused(groups.delete_group, "g") == KafkaCode.NON_EMPTY_GROUP
        assert await refused(groups.sync, "g", 9, member, None, {}) == KafkaCode.ILLEGAL_GENERATION
        await groups.sync("g", 1, member, None, {member: b""})
        codes = groups.commit_offsets(
            "g", 1, member, None,
            {("orders", 0): (3, -1, ""), ("orders", 5): (1, -1, ""),
             ("orders", 1): (1, -1, "x" * 5000)},
        )  # fmt: skip
        assert codes == {
            ("orders", 0): KafkaCode.NONE,
            ("orders", 5): KafkaCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("orders", 1): KafkaCode.OFFSET_METADATA_TOO_LARGE,
        }
        gone = groups.delete_offsets("g", [("orders", 0)])
        assert gone == {("orders", 0): KafkaCode.GROUP_SUBSCRIBED_TO_TOPIC}  # its members read it
        assert groups.committed("g")[("orders", 0)].offset == 3

    run(test)


def test_a_member_that_stops_heartbeating_is_removed(store):
    async def test():
        groups = Coordinator(store)
        async with trio.open_nursery() as nursery:
            await nursery.start(groups.run)
            round_, member = await join(groups)
            await groups.sync("g", round_.generation, member, None, {member: b""})
            await trio.sleep(SESSION_MS / 1000 / 2)
            groups.heartbeat("g", 1, member, None)  # alive
            await trio.sleep(SESSION_MS / 1000 + 1)  # silent past its session
            assert groups.group("g") is None or groups.group("g").state == EMPTY
            nursery.cancel_scope.cancel()

    run(test)


def test_committed_offsets_and_members_outlive_a_restart(tmp_path, store):
    async def first_life():
        groups = Coordinator(store, clock=lambda: 1234)
        round_, member = await join(groups)
        await groups.sync("g", 1, member, None, {member: assignment(("orders", [0, 1]))})
        groups.commit_offsets("g", 1, member, None, {("orders", 0): (4, 2, "m")})
        return member

    member = trio.run(first_life)
    path = store.path
    store.close()
    with Store(path) as again:

        async def second_life():  # members go on, on the coordinator's clock
            groups = Coordinator(again)
            committed = groups.committed("g")[("orders", 0)]
            assert (committed.offset, committed.leader_epoch, committed.metadata) == (4, 2, "m")
            assert committed.timestamp == 1234
            group = groups.group("g")
            assert list(group.members) == [member] and group.generation == 1
            groups.heartbeat("g", 1, member, None)

        trio.run(second_life)
        [report] = describe_groups(again)  # offline: no coordinator, no event loop
        assert report["members"][0]["assignment"] == [["orders", 0], ["orders", 1]]
        lag = {(o["topic"], o["partition"]): o["lag"] for o in report["offsets"]}
        assert lag == {("orders", 0): 10 - 4}


def test_consumer_protocol_bytes_read_as_kafka_python_writes_them():
    assert subscribed_topics(subscription("a", "bb", "ccc")) == {"a", "bb", "ccc"}
    wanted = [("a", [0, 2]), ("bb", [1])]
    assert assigned_partitions(assignment(*wanted)) == [("a", 0), ("a", 2), ("bb", 1)]
    for other in (b"", b"\x00", b"\x00\x00\x00\x00\x00\x09\x00\x01a", b"\xff" * 12):
        assert assigned_partitions(other) == []
        assert subscribed_topics(other) <= {"a"}  # what could be read, and nothing made up
