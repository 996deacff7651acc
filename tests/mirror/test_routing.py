"""The mirror's routes (logfs/mirror/routing.py) without a network: what a cluster's
answers can make it hold, and where a request goes."""

from __future__ import annotations

from types import SimpleNamespace

from logfs.mirror import routing
from logfs.mirror.routing import BOOTSTRAP, MAX_BROKERS, MAX_CONNECTIONS, NO_LEADER, Routes


class Connection:
    """A connection that is never opened: its address, and whether it was closed."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False

    def close(self) -> None:
        self.closed = True


def broker(node: int, host: str = "127.0.0.1", port: int | None = None):
    return SimpleNamespace(node_id=node, host=host, port=9000 + node if port is None else port)


def metadata(brokers, leaders: dict[tuple[str, int], int]):
    topics = {}
    for (topic, p), node in leaders.items():
        topics.setdefault(topic, []).append(SimpleNamespace(partition_index=p, leader_id=node))
    return SimpleNamespace(
        brokers=brokers,
        topics=[SimpleNamespace(name=t, error_code=0, partitions=ps) for t, ps in topics.items()],
    )


def routes() -> tuple[Routes, list[Connection]]:
    made: list[Connection] = []

    def connect(address: str) -> Connection:
        made.append(Connection(address))
        return made[-1]

    return Routes(Connection("bootstrap"), connect), made


def test_one_broker_gets_everything_over_the_bootstrap_connection():
    r, made = routes()
    r.learn(metadata([broker(7, "advertised.elsewhere")], {("t", 0): 7, ("t", 1): 7}))
    assert r.single
    assert r.by_leader([("t", 0), ("t", 1)]) == {BOOTSTRAP: [("t", 0), ("t", 1)]}
    assert r.wire(BOOTSTRAP) is r.bootstrap and made == []


def test_partitions_go_to_their_leaders_one_connection_per_broker():
    r, made = routes()
    r.learn(metadata([broker(1), broker(2), broker(3)], {("t", 0): 1, ("t", 1): 2, ("u", 0): 1}))
    assert r.by_leader([("t", 0), ("t", 1), ("u", 0)]) == {1: [("t", 0), ("u", 0)], 2: [("t", 1)]}
    assert r.wire(1) is r.wire(1)
    assert [c.address for c in made] == ["kafka://127.0.0.1:9001"]
    r.wire(2)
    assert len(made) == 2
    r.stale(("t", 1))
    assert r.unknown([("t", 0), ("t", 1)]) == [("t", 1)]
    r.learn(metadata([broker(1), broker(2)], {("u", 1): 2}), every_topic=True)  # t deleted
    assert r.leaders == {("u", 1): 2}
    r.learn(metadata([broker(1), broker(2)], {("t", 0): 1}))  # one topic asked for
    assert r.leaders == {("u", 1): 2, ("t", 0): 1}
    r.forget()
    assert all(c.closed for c in made) and not r.known and r.statistics()["connections"] == 0
    assert not r.bootstrap.closed  # its owner's to close


def test_a_partition_without_a_leader_or_with_an_unusable_one_has_no_route():
    r, _ = routes()
    hostile = [broker(1), broker(2, "evil,host"), broker(3, port=0), broker(4, "a b")]
    r.learn(metadata([*hostile, broker(5)], {("t", 0): -1, ("t", 1): 2, ("t", 2): 3, ("t", 3): 9}))
    assert set(r.brokers) == {1, 5}
    assert r.by_leader([("t", 0), ("t", 1), ("t", 2), ("t", 3)]) == {
        NO_LEADER: [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    }


def test_a_cluster_naming_endless_brokers_is_held_to_the_bounds():
    r, made = routes()
    many = [broker(n, port=1 + n % 60000) for n in range(MAX_BROKERS * 5)]
    leaders = {("t", p): p for p in range(MAX_CONNECTIONS * 3)}
    r.learn(metadata(many, leaders))
    assert len(r.brokers) == MAX_BROKERS
    for p in range(MAX_CONNECTIONS * 3):  # a request to every leader in turn
        r.wire(r.leader(("t", p)))
        assert r.statistics()["connections"] <= MAX_CONNECTIONS
    assert len(made) == MAX_CONNECTIONS * 3
    assert sum(not c.closed for c in made) == MAX_CONNECTIONS
    assert all(c.closed for c in made[: MAX_CONNECTIONS * 2])  # the least recently used
    coordinator = SimpleNamespace(node_id=MAX_BROKERS * 9, host="127.0.0.1", port=1)
    assert r.learn_coordinator(routing.TRANSACTION, "id", coordinator) is NO_LEADER
    assert len(r.brokers) == MAX_BROKERS


def test_a_broker_that_moved_is_connected_to_afresh():
    r, made = routes()
    r.learn(metadata([broker(1), broker(2)], {("t", 0): 1}))
    first = r.wire(1)
    r.learn(metadata([broker(1, port=9999), broker(2)], {("t", 0): 1}))
    assert first.closed
    assert r.wire(1).address == "kafka://127.0.0.1:9999"
    r.learn(metadata([broker(2), broker(3)], {("t", 0): 3}))  # broker 1 gone
    assert all(c.closed for c in made)
    coordinator = SimpleNamespace(node_id=4, host="::1", port=9004)
    assert r.learn_coordinator(routing.GROUP, "g", coordinator) == 4
    assert r.wire(4).address == "kafka://[::1]:9004"
    assert r.coordinators == {(routing.GROUP, "g"): 4}
