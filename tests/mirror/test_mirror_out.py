"""Mirror out: a data directory's partitions forwarded to a second logfs (TLS, SCRAM)
exactly once, read back by confluent-kafka with ``read_committed``."""

from __future__ import annotations

import contextlib

import pytest
from mirror_helpers import committed_values, kcat_values

from logfs.core.log import Store, clean_store
from logfs.mirror import MirrorOut, MirrorSettings


def fill(data, topics: dict[str, int], count: int, start: int = 0) -> dict:
    """``count`` records in each partition of ``topics``; their values by partition."""
    values = {}
    with Store(data) as store:
        for topic, partitions in topics.items():
            if topic not in store.topics():
                store.create_topic(topic, partitions)
            for p in range(partitions):
                batch = [f"{topic}-{p}-{i}".encode() for i in range(start, start + count)]
                for i in range(0, count, 100):  # several batches
                    store.log(topic, p).append(batch[i : i + 100])
                values[(topic, p)] = batch
    return values


def drain(mirror: MirrorOut, rounds: int = 200) -> None:
    for _ in range(rounds):
        if not mirror.round():
            assert mirror.lag_records == 0
            return
    raise AssertionError(f"still {mirror.lag_records} records to forward")


def test_every_partition_forwarded_once_in_order_and_resumed_after_a_restart(tmp_path, cluster):
    data = tmp_path / "edge"
    first = fill(data, {"orders": 3, "logs": 1, "private": 1}, 1000)
    settings = MirrorSettings.from_options({**cluster.options, "mirror.topics": "orders|logs"})
    with contextlib.closing(MirrorOut(str(data), settings)) as mirror:
        drain(mirror)
    assert mirror.forwarded == 4000 and mirror.error is None
    for (topic, p), values in first.items():
        if topic != "private":
            assert committed_values(cluster, topic, p) == values
    second = fill(data, {"orders": 3, "logs": 1}, 500, start=1000)
    with contextlib.closing(MirrorOut(str(data), settings)) as again:  # positions from the cluster
        drain(again)
    assert again.forwarded == 2000
    for tp, values in second.items():
        assert committed_values(cluster, *tp) == first[tp] + values
        assert kcat_values(cluster, *tp) == first[tp] + values
    with Store(cluster.data, read_only=True) as store:
        assert "private" not in store.topics()
        assert store.topics()["orders"] == 3


def test_a_transaction_cut_short_is_aborted_by_the_next_mirror(tmp_path, cluster):
    data = tmp_path / "edge"
    values = fill(data, {"t": 2}, 300)
    settings = MirrorSettings.from_options(cluster.options)
    with contextlib.closing(MirrorOut(str(data), settings)) as dead:
        # A round that sends its batches and dies before its commit, as a killed mirror does.
        dead.target.commit = lambda positions: (_ for _ in ()).throw(SystemExit)
        with pytest.raises(SystemExit):
            dead.round()
        assert dead.target.sequences  # the batches were sent
        with contextlib.closing(MirrorOut(str(data), settings)) as successor:
            drain(successor)
    for tp, expected in values.items():
        assert committed_values(cluster, *tp) == expected


def test_a_topic_with_another_partition_count_is_reported_not_mirrored(tmp_path, cluster):
    data = tmp_path / "edge"
    from confluent_kafka.admin import AdminClient, NewTopic
    from mirror_helpers import PASSWORD, USER

    admin = AdminClient({
        "bootstrap.servers": cluster.served.bootstrap, "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
        "ssl.ca.location": str(cluster.pki.ca),
    })  # fmt: skip
    admin.create_topics([NewTopic("narrow", 1)])["narrow"].result(30)
    fill(data, {"narrow": 2, "fine": 1}, 10)
    with contextlib.closing(
        MirrorOut(str(data), MirrorSettings.from_options(cluster.options))
    ) as mirror:
        drain(mirror)
    status = mirror.status()
    assert "narrow has 1 partitions" in status["topic_errors"]["narrow"]
    assert list(status["partitions"]) == ["fine-0"]
    assert committed_values(cluster, "fine", 0) == [f"fine-0-{i}".encode() for i in range(10)]


def test_a_compacted_topic_is_forwarded_as_the_cleaner_left_it(tmp_path, cluster):
    data = tmp_path / "edge"
    with Store(data) as store:
        store.create_topic("keys", 1, {"cleanup.policy": "compact", "segment.bytes": "2000"})
        log = store.log("keys", 0)
        for i in range(40):
            log.append(
                [f"v{i}-{k}".encode() for k in range(5)], keys=[b"a", b"b", b"c", b"a", b"d"]
            )
        assert clean_store(store, ["keys"], force=True)
        kept = [r.value for r in log.scan()]
    assert len(kept) < 200  # the cleaner did thin batches
    with contextlib.closing(
        MirrorOut(str(data), MirrorSettings.from_options(cluster.options))
    ) as m:
        drain(m)
    assert committed_values(cluster, "keys", 0) == kept


def test_a_round_holds_a_bounded_share_and_every_partition_gets_its_turn(
    tmp_path, cluster, monkeypatch
):
    from logfs.mirror import outbound

    monkeypatch.setattr(outbound, "ROUND_BYTES", 2000)
    monkeypatch.setattr(outbound, "ROUND_TOTAL", 1)  # one partition's share a round
    data = tmp_path / "edge"
    values = fill(data, {"wide": 5}, 300)
    settings = MirrorSettings.from_options(cluster.options)
    with contextlib.closing(MirrorOut(str(data), settings)) as m:
        assert m.round() and m.lag_records > 0
        turns = []
        while m.lag_records:
            before = {tp: lag.position for tp, lag in m.lags.items()}
            assert m.round()
            turns.append(sorted(tp[1] for tp, lag in m.lags.items() if lag.position != before[tp]))
        assert turns[:6] == [[1], [2], [3], [4], [0], [1]]  # in turns, from where it stopped
        with Store(data) as store:
            store.delete_topic("wide")
        m.round()
        assert m.lags == {} and m.lag_records == 0
    for tp, expected in values.items():
        assert committed_values(cluster, *tp) == expected


def test_records_deleted_before_they_were_forwarded_are_counted_once(tmp_path, cluster):
    data = tmp_path / "edge"
    first = fill(data, {"t": 1}, 100)[("t", 0)]
    settings = MirrorSettings.from_options(cluster.options)
    with contextlib.closing(MirrorOut(str(data), settings)) as m:
        drain(m)
        second = fill(data, {"t": 1}, 200, start=100)[("t", 0)]
        with Store(data) as store:
            # the log starts at 250 now, in the batch of 200-299, which is forwarded whole
            store.log("t", 0).delete_records(250)
        drain(m)
        drain(m)
        assert m.partitions()["t-0"]["lost_to_retention"] == 100  # 100-199
        assert m.partitions()["t-0"]["position"] == 300
    assert committed_values(cluster, "t", 0) == first + second[100:]
