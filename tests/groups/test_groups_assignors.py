"""The server-side assignors of KIP-848's consumer groups and reconciliation, as pure
functions: every subscribed partition assigned once and only to a subscriber,
``uniform`` balanced and sticky, ``range`` co-partitioned with static members first,
and a member's steps towards its target (revoke first, wait for partitions still
held elsewhere)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logfs.groups.assignors import Subscriber, range_, uniform
from logfs.groups.reconcile import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, Progress
from logfs.groups.reconcile import reconcile as step

# ---------------------------------------------------------------- assignors


def subscribers(draw_members, topics):
    return [Subscriber(f"m{i}", None, frozenset(topics), {}) for i in range(draw_members)]


@given(
    st.integers(1, 12), st.dictionaries(st.sampled_from("abcde"), st.integers(0, 20), min_size=1)
)
@settings(max_examples=150, deadline=None)
def test_uniform_is_complete_exclusive_and_balanced_for_one_subscription(members, counts):
    out = uniform(subscribers(members, counts), counts)
    got = [(t, p) for parts in out.values() for t, ps in parts.items() for p in ps]
    assert sorted(got) == sorted((t, p) for t, n in counts.items() for p in range(n))
    sizes = [sum(len(ps) for ps in parts.values()) for parts in out.values()]
    assert max(sizes) - min(sizes) <= 1


@given(st.integers(2, 8), st.integers(1, 40), st.randoms())
@settings(max_examples=100, deadline=None)
def test_uniform_is_sticky_when_a_member_joins(members, partitions, rnd):
    counts = {"t": partitions}
    before = uniform(subscribers(members, counts), counts)
    current = [Subscriber(m, None, frozenset(counts), before[m]) for m in before]
    current.append(Subscriber("new", None, frozenset(counts), {}))
    rnd.shuffle(current)
    after = uniform(current, counts)
    moved = sum(len(before[m].get("t", set()) - after[m].get("t", set())) for m in before)
    # only what the newcomer's fair share needs changes hands
    assert moved == sum(len(ps) for ps in after["new"].values()) == partitions // (members + 1)


@given(
    st.lists(st.frozensets(st.sampled_from("abc"), min_size=1), min_size=1, max_size=8),
    st.dictionaries(st.sampled_from("abc"), st.integers(1, 10), min_size=3),
)
@settings(max_examples=150, deadline=None)
def test_both_assignors_give_a_partition_only_to_a_subscriber_and_only_once(subs, counts):
    members = [Subscriber(f"m{i}", None, s, {}) for i, s in enumerate(subs)]
    for assign in (uniform, range_):
        out = assign(members, counts)
        seen = set()
        for m in members:
            for t, ps in out[m.member_id].items():
                assert t in m.topics
                assert not seen & {(t, p) for p in ps}
                seen |= {(t, p) for p in ps}
        subscribed = set().union(*subs)
        assert seen == {(t, p) for t in subscribed for p in range(counts[t])}


def test_range_co_partitions_with_static_members_first():
    members = [
        Subscriber("b", None, frozenset("xy"), {}),
        Subscriber("a", None, frozenset("xy"), {}),
        Subscriber("z", "i1", frozenset("xy"), {}),
    ]
    out = range_(members, {"x": 7, "y": 7})
    assert out["z"] == {"x": {0, 1, 2}, "y": {0, 1, 2}}  # static first, one more
    assert out["a"] == {"x": {3, 4}, "y": {3, 4}}
    assert out["b"] == {"x": {5, 6}, "y": {5, 6}}


# ---------------------------------------------------------------- reconciliation


def owners(table):
    return lambda t, p: table.get((t, p), -1)


def test_a_member_revokes_before_it_moves_to_the_new_epoch():
    now = Progress(STABLE, 3, 2, {"t": frozenset({0, 1, 2})}, {})
    nxt = step(now, 4, {"t": frozenset({0, 3})}, owners({}), {"t": frozenset({0, 1, 2})})
    assert nxt == Progress(
        UNREVOKED_PARTITIONS, 3, 3, {"t": frozenset({0})}, {"t": frozenset({1, 2})}
    )
    # still owned: no progress; once given up: the new epoch, with the free partition
    assert step(nxt, 4, {"t": frozenset({0, 3})}, owners({}), {"t": frozenset({0, 1})}) is nxt
    done = step(nxt, 4, {"t": frozenset({0, 3})}, owners({}), {"t": frozenset({0})})
    assert done == Progress(STABLE, 4, 3, {"t": frozenset({0, 3})}, {})


def test_a_partition_still_held_elsewhere_waits():
    now = Progress(STABLE, 1, 0, {}, {})
    nxt = step(now, 2, {"t": frozenset({0, 1})}, owners({("t", 1): 1}), {})
    assert nxt.state == UNRELEASED_PARTITIONS and nxt.assigned == {"t": frozenset({0})}
    freed = step(nxt, 2, {"t": frozenset({0, 1})}, owners({}), {"t": frozenset({0})})
    assert freed.state == STABLE and freed.assigned == {"t": frozenset({0, 1})}
