"""Fetch sized as Kafka's ReplicaManager sizes it (KIP-74): only the first partition
with data may pass the limits, by at most its first batch; later partitions get
what is left of ``max_bytes``, cut mid-batch; and librdkafka with tight but legal
limits (``receive.message.max.bytes`` = ``fetch.max.bytes`` + 512) reads
everything."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import Served, call
from test_kafka_protocol import fetch_request

FETCH = 1
PARTITIONS = 8


def produce(bootstrap: str, topic: str, count: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 5})
    for i in range(count):
        p.produce(topic, value=b"%05d" % i + b"." * 40, partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(30) == 0


def fetch(address, topic, partitions, max_bytes, partition_max):
    """Each partition's records from offset 0 (Fetch v11, as test_kafka_protocol builds it)."""
    body = fetch_request(
        topic, dict.fromkeys(partitions, 0), max_bytes=max_bytes, partition_max_bytes=partition_max
    )
    answer = call(address, FETCH, 11, body)
    return [p.records or b"" for p in answer.responses[0].partitions]


def batch_sizes(records: bytes) -> list[int]:
    """The whole batches' sizes in ``records``, and the partial one's at the end."""
    sizes, at = [], 0
    while at + 12 <= len(records):
        size = 12 + int.from_bytes(records[at + 8 : at + 12], "big")
        sizes.append(min(size, len(records) - at))
        at += size
    return sizes


def test_only_the_first_partition_with_data_may_pass_the_limits(tmp_path):
    with Served(tmp_path / "data") as served:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic("tight", PARTITIONS, 1)])["tight"].result(30)
        produce(served.bootstrap, "tight", 400)
        whole = {p: fetch(served.address, "tight", [p], 1 << 20, 1 << 20)[0] for p in range(3)}
        first = batch_sizes(whole[0])  # batches of partition 0, in order
        # limits below one batch: the first partition gets one whole batch, the rest nothing
        got = fetch(served.address, "tight", range(PARTITIONS), 10, 10)
        assert [len(r) for r in got] == [first[0]] + [0] * (PARTITIONS - 1)
        assert got[0] == whole[0][: first[0]]
        # room for two and a half batches: cut there, the partial batch last
        room = first[0] + first[1] + first[2] // 2
        got = fetch(served.address, "tight", range(PARTITIONS), room, 1 << 20)
        assert [len(r) for r in got] == [room] + [0] * (PARTITIONS - 1)
        assert batch_sizes(got[0]) == [first[0], first[1], first[2] // 2]
        # each partition bounded by its own limit, the request by max_bytes: what is
        # left for a later partition is cut mid-batch
        each = first[0] + first[1] // 2
        got = fetch(served.address, "tight", range(PARTITIONS), 2 * each + 100, each)
        sizes = [len(r) for r in got]
        assert sizes[:3] == [each, each, 100] and sum(sizes) == 2 * each + 100
        assert got[1] == whole[1][:each] and got[2] == whole[2][:100]


def test_librdkafka_with_tight_legal_limits_reads_everything(tmp_path):
    with Served(tmp_path / "data") as served:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic("tight", PARTITIONS, 1)])["tight"].result(30)
        produce(served.bootstrap, "tight", 2000)
        errors = []
        consumer = ck.Consumer(
            {
                "bootstrap.servers": served.bootstrap,
                "group.id": "tight",
                "auto.offset.reset": "earliest",
                "message.max.bytes": 1000,  # librdkafka's floor, and fetch.max.bytes' floor
                "fetch.max.bytes": 1024,
                "receive.message.max.bytes": 1024 + 512,
                "max.partition.fetch.bytes": 600,
                "error_cb": errors.append,
            }
        )
        consumer.subscribe(["tight"])
        seen = set()
        deadline = time.monotonic() + 120
        while len(seen) < 2000 and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                seen.add(m.value()[:5])
        consumer.close()
        assert len(seen) == 2000, f"{len(seen)} of 2000 read; errors: {errors[:3]}"
        assert not [e for e in errors if "Invalid response size" in str(e)]
