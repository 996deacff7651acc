"""What classic members' protocol metadata may cost (groups/budget.py): a member
over its bound and members over the daemon's budget are refused with Kafka's
codes, and the count goes down when members leave, time out, or lose their
connection before syncing (within the shortest session), on trio's clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from logfs.core.errors import KafkaCode
from logfs.core.log import Store
from logfs.groups import Coordinator, GroupError, GroupSettings
from logfs.groups.budget import MEMBER_OVERHEAD, MetadataBudget, cost

SESSION_MS = 10_000
KiB = 1024


def run(test) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as store:
        yield store


async def join(groups, group: str, size: int, member_id: str = "", connection=None):
    """A JoinGroup of a new member with ``size`` bytes of metadata (its id, once joined)."""
    return await groups.join(
        group, member_id, None, "consumer", [("range", bytes(size))],
        SESSION_MS, SESSION_MS, "c", "127.0.0.1", False, connection=connection,
    )  # fmt: skip


def code(error: pytest.ExceptionInfo) -> int:
    return error.value.kafka_code


def test_cost_counts_names_metadata_and_an_overhead():
    assert cost([]) == MEMBER_OVERHEAD
    assert cost([("range", b"abc"), ("sticky", b"")]) == MEMBER_OVERHEAD + 5 + 3 + 6


def test_the_budget_refuses_past_either_bound_and_replaces_what_a_member_held():
    budget = MetadataBudget(per_member=10 * KiB, total=20 * KiB)
    with pytest.raises(GroupError) as e:
        budget.admit([("r", bytes(10 * KiB))])
    assert code(e) == KafkaCode.INVALID_REQUEST and budget.held == 0
    big = [("r", bytes(8 * KiB))]
    budget.admit(big)
    budget.admit(big)
    assert budget.held == 2 * cost(big)
    with pytest.raises(GroupError) as e:
        budget.admit(big)
    assert code(e) == KafkaCode.GROUP_MAX_SIZE_REACHED and budget.held == 2 * cost(big)
    budget.admit([("r", b"")], replacing=cost(big))  # a member rejoining smaller
    assert budget.held == cost(big) + cost([("r", b"")])
    budget.recount([[("r", b"x")]])
    assert budget.held == cost([("r", b"x")])


def test_members_over_the_budget_are_refused_until_others_go(store):
    settings = GroupSettings(member_metadata_max_bytes=64 * KiB, metadata_max_bytes=200 * KiB)

    async def test():
        groups = Coordinator(store, settings=settings)
        with pytest.raises(GroupError) as e:
            await join(groups, "huge", 64 * KiB)
        assert code(e) == KafkaCode.INVALID_REQUEST and "huge" not in groups.groups
        ids = [(await join(groups, f"g{i}", 60 * KiB, connection=i))[1] for i in range(3)]
        with pytest.raises(GroupError) as e:
            await join(groups, "g3", 60 * KiB, connection=3)
        assert code(e) == KafkaCode.GROUP_MAX_SIZE_REACHED
        # g0's member leaves, g1's connection closes before it synced, g2's synced.
        groups.leave("g0", ids[0], None)
        await groups.sync("g2", 1, ids[2], None, {ids[2]: b""})
        assert groups.disconnected(1) == 1 and groups.disconnected(2) == 0
        await trio.sleep(settings.min_session_ms / 1000 + 0.5)  # within the shortest session
        groups.expire()  # and the sweep takes the count again
        assert "g1" not in groups.groups and ids[2] in groups.group("g2").members
        assert groups.metadata.held == cost([("range", bytes(60 * KiB))])
        await join(groups, "g3", 60 * KiB, connection=3)
        await join(groups, "g4", 60 * KiB, connection=4)
        # A session that runs out lets go of its metadata too.
        await trio.sleep(SESSION_MS / 1000 + 1)
        groups.expire()
        assert groups.metadata.held == 0

    run(test)


def test_a_member_that_rejoins_is_counted_once(store):
    settings = GroupSettings(member_metadata_max_bytes=64 * KiB, metadata_max_bytes=130 * KiB)

    async def test():
        groups = Coordinator(store, settings=settings)
        _, member = await join(groups, "g", 60 * KiB)
        await groups.sync("g", 1, member, None, {member: b""})
        for _ in range(5):  # rejoining in place costs nothing more
            await join(groups, "g", 60 * KiB, member_id=member)
            await groups.sync("g", groups.group("g").generation, member, None, {member: b""})
        assert groups.metadata.held == cost([("range", bytes(60 * KiB))])
        await join(groups, "h", 60 * KiB)

    run(test)
