"""Both directions of mirroring against a cluster of three brokers (kafka_front.py: brokers
1, 2, 3 in front of one ``logfs serve``, partitions' leaders spread over them, the
coordinators on two of them): each request at its leader or coordinator, leadership
moving under the mirror out and under a follower, and a single listener reached over
one connection as before."""

from __future__ import annotations

import contextlib
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_front import (
    ADD_PARTITIONS,
    END_TXN,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    NODES,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    Front,
)
from kafka_helpers import Served
from mirror_helpers import read_committed
from tcp_proxy import Proxy
from waiting import wait_for

from logfs.core.log import Store
from logfs.mirror import MirrorOut, MirrorSettings
from logfs.mirror.source import EARLIEST, LATEST, Source

TOPICS = {"orders": 3, "logs": 2, "metrics": 4}


@pytest.fixture
def cluster(tmp_path):
    """One ``logfs serve`` (``served``) behind three brokers (``front``)."""
    with (
        Served(tmp_path / "cluster", "segment.bytes=4000") as served,
        Front(served.address) as front,
    ):
        yield served, front


def fill(data, count: int, start: int) -> dict:
    """``count`` records in each partition of `TOPICS`, in batches of 50; their values."""
    values = {}
    with Store(data) as store:
        for topic, partitions in TOPICS.items():
            if topic not in store.topics():
                store.create_topic(topic, partitions)
            for p in range(partitions):
                batch = [f"{topic}-{p}-{i}".encode() for i in range(start, start + count)]
                for i in range(0, count, 50):
                    store.log(topic, p).append(batch[i : i + 50])
                values[(topic, p)] = batch
    return values


def test_the_mirror_out_ships_to_each_leader_exactly_once_while_leadership_moves(tmp_path, cluster):
    served, front = cluster
    data = tmp_path / "edge"
    settings = MirrorSettings.from_options(
        {"mirror.to": f"kafka://{front.bootstrap}", "mirror.id": "edge-1",
         "mirror.timeout.ms": "10000"}
    )  # fmt: skip
    expected = {tp: [] for topic, n in TOPICS.items() for tp in ((topic, p) for p in range(n))}
    mirror = MirrorOut(str(data), settings)
    produce, moves = mirror.target.produce, []

    def produce_after_a_move(topic, partition, batches):
        if moves and moves[-1] == topic:  # its leader moves in the middle of a transaction
            moves[-1] = (topic, partition, front.move(topic, partition))
        produce(topic, partition, batches)

    mirror.target.produce = produce_after_a_move
    runner = threading.Thread(target=mirror.run)
    try:
        for step in range(6):
            # Each change before the step's records: the round that forwards them meets it
            # with the routes of the last round.
            if step in (1, 3):  # at the next Produce of this topic (not the first one sent)
                moves.append("orders" if step == 1 else "metrics")
            if step == 2:  # the transaction coordinator moves
                front.coordinators[1] = NODES[0]
            if step == 4:  # and the group's
                front.coordinators[0] = NODES[1]
            for tp, values in fill(data, 300, 300 * step).items():
                expected[tp] += values
            if step == 0:
                runner.start()
            total = sum(len(v) for v in expected.values())
            wait_for(lambda total=total: mirror.forwarded == total, f"{total} forwarded", 90)
    finally:
        mirror.stop()
        if runner.is_alive():
            runner.join(60)
    assert not runner.is_alive() and mirror.error is None
    assert len(moves) == 2 and all(isinstance(m, tuple) for m in moves)
    for tp, values in expected.items():  # once each, in order: read where it is stored
        assert read_committed({"bootstrap.servers": served.bootstrap}, *tp) == values, tp
    assert (
        read_committed({"bootstrap.servers": front.bootstrap}, "orders", 1)
        == expected[("orders", 1)]
    )
    # Every broker led partitions and took their Produce; the coordinators' requests went to
    # the coordinators of their time, and the moves were met, refused, and routed anew.
    assert all(front.answered[(n, PRODUCE)] for n in NODES)
    for topic, partition, node in moves:
        assert front.leader(topic, partition) == node
        assert front.led[(node, PRODUCE, topic, partition)]  # at its new leader
    assert sum(front.refused[(n, PRODUCE)] for n in NODES) == 2
    assert front.answered[(NODES[1], INIT_PRODUCER_ID)] and front.answered[(NODES[0], END_TXN)]
    assert front.refused[(NODES[1], ADD_PARTITIONS)] == 1
    assert front.answered[(NODES[2], TXN_OFFSET_COMMIT)]
    assert front.refused[(NODES[2], TXN_OFFSET_COMMIT)] == 1
    assert front.answered[(NODES[1], OFFSET_FETCH)]
    assert front.answered[(NODES[1], TXN_OFFSET_COMMIT)]
    assert mirror.target.routes.statistics()["connections"] <= len(NODES)


def test_a_single_listener_is_reached_over_the_bootstrap_connection_alone(tmp_path):
    data = tmp_path / "edge"
    values = fill(data, 120, 0)
    with Served(tmp_path / "cluster") as served:
        settings = MirrorSettings.from_options(
            {"mirror.to": f"kafka://{served.bootstrap}", "mirror.id": "edge-1"}
        )
        with contextlib.closing(MirrorOut(str(data), settings)) as mirror:
            while mirror.round():
                pass
            assert mirror.target.routes.single
            assert mirror.target.routes.statistics()["connections"] == 0  # no broker's own
            assert mirror.forwarded == sum(len(v) for v in values.values())
        assert (
            read_committed({"bootstrap.servers": served.bootstrap}, "metrics", 3)
            == values[("metrics", 3)]
        )


def create_topics(served) -> None:
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    for future in admin.create_topics(
        [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in TOPICS.items()]
    ).values():
        future.result(30)


def segment_files(data, topic: str, p: int) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((data / f"{topic}-{p}").glob("*.log"))}


def copied(cluster_data, follower_data, topic: str, p: int) -> bool:
    mine = (
        segment_files(follower_data, topic, p) if (follower_data / f"{topic}-{p}").is_dir() else {}
    )
    return bool(mine) and mine == segment_files(cluster_data, topic, p)


def test_a_follower_fetches_each_partition_at_its_leader_byte_for_byte_while_leadership_moves(
    tmp_path, cluster
):
    served, front = cluster
    create_topics(served)
    producer = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 5})

    def produce(tag: str, count: int) -> None:
        for topic, n in TOPICS.items():
            for p in range(n):
                for i in range(count):
                    producer.produce(topic, f"{tag} {topic}-{p} {i}".encode(), partition=p)
        assert producer.flush(30) == 0

    def all_copied() -> bool:
        return all(
            copied(served.data, tmp_path / "follower", t, p)
            for t, n in TOPICS.items()
            for p in range(n)
        )

    produce("before", 200)
    follower = Served(
        tmp_path / "follower", f"mirror.from=kafka://{front.bootstrap}", "mirror.id=follower-1",
        "mirror.timeout.ms=3000",
    )  # fmt: skip
    with follower:
        wait_for(all_copied, "every partition copied", timeout=90, poll=0.2)
        fetched = {n: front.answered[(n, FETCH)] for n in NODES}
        assert all(fetched.values()), fetched  # each broker's partitions fetched there
        tps = [("orders", 0), ("metrics", 2), ("logs", 1)]
        moved = [front.move(*tp) for tp in tps]
        produce("after", 150)
        wait_for(all_copied, "every partition copied after the moves", timeout=90, poll=0.2)
        # Fetched at the new leaders. (NOT_LEADER_OR_FOLLOWER at the old one first, unless
        # the follower's look at the cluster's topics came between the move and its Fetch.)
        assert [front.leader(*tp) for tp in tps] == moved
        assert all(front.led[(node, FETCH, *tp)] for node, tp in zip(moved, tps, strict=True))
        for topic, n in TOPICS.items():
            for p in range(n):
                assert len(segment_files(served.data, topic, p)) > 1  # several segments compared
    assert "Traceback" not in follower.output()


def test_a_broker_whose_connections_drop_costs_rounds_never_records(tmp_path, cluster):
    served, front = cluster
    data = tmp_path / "edge"
    # Broker 2 (the transaction coordinator, and a leader) behind a proxy that drops its
    # connections: the cluster names the proxy's port as broker 2's.
    with Proxy(("127.0.0.1", front.ports[NODES[1]])) as proxy:
        front.ports[NODES[1]] = proxy.address[1]
        settings = MirrorSettings.from_options(
            {"mirror.to": f"kafka://{front.bootstrap}", "mirror.id": "edge-1",
             "mirror.timeout.ms": "10000"}
        )  # fmt: skip
        expected = {tp: [] for t, n in TOPICS.items() for tp in ((t, p) for p in range(n))}
        mirror = MirrorOut(str(data), settings)
        produce, cuts = mirror.target.produce, []

        def produce_after_a_cut(topic, partition, batches):
            if cuts and cuts[-1] is None and front.leader(topic, partition) == NODES[1]:
                cuts[-1] = (topic, partition)  # in the middle of a transaction
                proxy.cut()
            produce(topic, partition, batches)

        mirror.target.produce = produce_after_a_cut
        runner = threading.Thread(target=mirror.run)
        try:
            for step in range(5):
                if step in (1, 3):
                    cuts.append(None)
                for tp, values in fill(data, 200, 200 * step).items():
                    expected[tp] += values
                if step == 0:
                    runner.start()
                total = sum(len(v) for v in expected.values())
                wait_for(lambda total=total: mirror.forwarded == total, f"{total} forwarded", 90)
        finally:
            mirror.stop()
            if runner.is_alive():
                runner.join(60)
    assert mirror.error is None and len(cuts) == 2 and None not in cuts
    assert proxy.connections == 3  # broker 2 connected to again after each drop
    for tp, values in expected.items():
        assert read_committed({"bootstrap.servers": served.bootstrap}, *tp) == values, tp


def test_list_offsets_and_fetch_go_once_to_each_leader_and_follow_a_move(cluster):
    served, front = cluster
    create_topics(served)
    producer = Producer({"bootstrap.servers": served.bootstrap})
    for p in range(4):
        for i in range(10 + p):
            producer.produce("metrics", f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    tps = [("metrics", p) for p in range(4)]
    with contextlib.closing(
        Source(f"kafka://{front.bootstrap}", "f", None, 10, 1 << 20, 1 << 16)
    ) as source:
        assert source.offsets(tps, LATEST) == {tp: 10 + tp[1] for tp in tps}
        leaders = {front.leader(*tp) for tp in tps}
        assert {n for n in NODES if front.answered[(n, LIST_OFFSETS)]} == leaders
        assert all(front.answered[(n, LIST_OFFSETS)] == 1 for n in leaders)  # one per leader
        answers = list(source.fetch(dict.fromkeys(tps, 0)))
        assert sorted(node for node, _ in answers) == sorted(leaders)
        assert all(front.answered[(n, FETCH)] == 1 for n in leaders)
        fetched = {tp: f for _, answer in answers for tp, f in answer.items()}
        assert {tp: f.high_watermark for tp, f in fetched.items()} == {tp: 10 + tp[1] for tp in tps}
        moved = front.move("metrics", 3)
        assert source.offsets(tps, EARLIEST)[("metrics", 3)] == "NOT_LEADER_OR_FOLLOWER"
        assert source.offsets(tps, EARLIEST) == dict.fromkeys(tps, 0)  # Metadata asked again
        assert front.led[(moved, LIST_OFFSETS, "metrics", 3)] == 1
