"""Kafka's own clients against the listener beside a real mount: kcat
(librdkafka), kafka-python and confluent-kafka produce and read back, and
every record is checked exactly against the mount's files and the Store API."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time

import pytest
from kafka_helpers import Served, mounted, stored

KCAT = shutil.which("kcat")
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def kcat(*args: str, input: bytes | None = None, timeout: float = 60) -> bytes:
    done = subprocess.run(
        [KCAT, *args], input=input, capture_output=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def read_back(mnt, topic: str, partition: int, count: int) -> list[bytes]:
    """Values of offsets 0..count-1 through the mount's offset/<n> files."""
    base = mnt / topic / str(partition) / "offset"
    return [(base / str(n)).read_bytes() for n in range(count)]


def test_kcat_produces_and_consumes_through_the_mount(tmp_path):
    assert KCAT, "kcat is not installed (mount_scripts/install.sh installs it)"
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt) as (_, bootstrap):
        lines = [f"k{i % 4}:value {i} é".encode() for i in range(200)]
        kcat("-b", bootstrap, "-P", "-t", "clicks", "-K:", "-z", "lz4", input=b"\n".join(lines))
        values = [line.split(b":", 1)[1] for line in lines]
        keys = [line.split(b":", 1)[0] for line in lines]
        # In the mount at once: offset/<n>, stream and the Store API agree.
        assert read_back(mnt, "clicks", 0, 200) == values
        assert (mnt / "clicks" / "0" / "stream").read_bytes() == b"".join(v + b"\n" for v in values)
        records = stored(data, "clicks")
        assert [(r.offset, r.key, r.value) for r in records] == list(
            zip(range(200), keys, values, strict=True)
        )
        # Consumed back with kcat: offsets, keys, values.
        out = kcat("-b", bootstrap, "-C", "-t", "clicks", "-e", "-f", "%o|%k|%s\\n")
        assert out.decode().splitlines() == [
            f"{n}|{k.decode()}|{v.decode()}"
            for n, k, v in zip(range(200), keys, values, strict=True)
        ]
        # Written to the mount, read by kcat.
        with open(mnt / "clicks" / "0" / "append", "ab") as f:
            f.write(b"from the mount\n")
        out = kcat("-b", bootstrap, "-C", "-t", "clicks", "-o", "200", "-e", "-f", "%o %s\\n")
        assert out == b"200 from the mount\n"


def test_kcat_metadata_and_offsets_by_time(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt) as (_, bootstrap):
        (mnt / "orders").mkdir()
        (mnt / "orders" / "1").mkdir()  # a second partition
        meta = kcat("-b", bootstrap, "-L", "-t", "orders").decode()
        assert f"broker 0 at {bootstrap}" in meta
        assert 'topic "orders" with 2 partitions' in meta
        assert "partition 0, leader 0" in meta and "partition 1, leader 0" in meta
        with open(mnt / "orders" / "0" / "append", "ab") as f:
            f.write(b"early\n")
        stamp = stored(data, "orders")[0].timestamp
        later = stamp + 5
        while int(time.time() * 1000) <= later:  # a later millisecond for the next record
            time.sleep(0.001)
        with open(mnt / "orders" / "0" / "append", "ab") as f:
            f.write(b"late\n")
        late_stamp = stored(data, "orders")[1].timestamp
        assert late_stamp > stamp
        query = kcat("-b", bootstrap, "-Q", "-t", f"orders:0:{stamp + 1}").decode()
        assert "orders [0] offset 1" in query
        query = kcat("-b", bootstrap, "-Q", "-t", f"orders:0:{stamp}").decode()
        assert "orders [0] offset 0" in query
        assert "orders [0] offset 2" in kcat("-b", bootstrap, "-Q", "-t", "orders:0:-1").decode()
        assert "orders [0] offset 0" in kcat("-b", bootstrap, "-Q", "-t", "orders:0:-2").decode()
        out = kcat("-b", bootstrap, "-C", "-t", "orders", "-p", "0", "-o", f"s@{stamp + 1}", "-e")
        assert out == b"late\n"


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_producer_every_codec_keys_headers(tmp_path, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    data = tmp_path / "data"
    with Served(data, "partitions=2") as served:
        producer = KafkaProducer(
            bootstrap_servers=served.bootstrap, compression_type=codec, acks="all", linger_ms=5
        )
        sent = []
        for i in range(300):
            key = None if i % 7 == 0 else f"key-{i % 5}".encode()
            headers = [("n", str(i).encode()), ("empty", b"")] if i % 3 else []
            value = None if i == 11 else f"v{i}".encode() * (1 + i % 13)
            sent.append(
                (
                    producer.send("events", key=key, value=value, headers=headers),
                    key,
                    value,
                    headers,
                )
            )
        producer.flush(30)
        acked = [(f.get(timeout=30), k, v, h) for f, k, v, h in sent]
        producer.close()
        by_partition: dict[int, list] = {0: [], 1: []}
        for meta, key, value, headers in acked:
            by_partition[meta.partition].append((meta.offset, key, value, headers))
        assert by_partition[0] and by_partition[1]

        consumer = KafkaConsumer(
            bootstrap_servers=served.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
        )
        consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
        consumer.seek_to_beginning()
        fetched: dict[int, list] = {0: [], 1: []}
        for message in consumer:
            fetched[message.partition].append(
                (message.offset, message.key, message.value, [tuple(h) for h in message.headers])
            )
        consumer.close()
        for p in (0, 1):
            expected = sorted(by_partition[p], key=lambda r: r[0])
            assert fetched[p] == [(o, k, v, list(h)) for o, k, v, h in expected]
            assert [r[0] for r in expected] == list(range(len(expected)))
    for p in (0, 1):
        records = stored(data, "events", p)
        expected = sorted(by_partition[p], key=lambda r: r[0])
        assert [(r.offset, r.key, r.value, list(r.headers)) for r in records] == [
            (o, k, v, list(h)) for o, k, v, h in expected
        ]


def test_confluent_kafka_idempotent_producer(tmp_path):
    from confluent_kafka import Producer

    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt) as (_, bootstrap):
        producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "zstd"}
        )
        reports = []
        for i in range(500):
            producer.produce(
                "payments",
                key=f"{i % 3}".encode(),
                value=f"payment {i}".encode(),
                headers=[("seq", str(i).encode())],
                on_delivery=lambda err, msg: reports.append((err, msg.offset(), msg.value())),
            )
        assert producer.flush(30) == 0
        assert [err for err, _, _ in reports if err is not None] == []
        assert sorted((o, v) for _, o, v in reports) == [
            (i, f"payment {i}".encode()) for i in range(500)
        ]
        values = [f"payment {i}".encode() for i in range(500)]
        assert read_back(mnt, "payments", 0, 500) == values
        records = stored(data, "payments")
        assert [(r.key, r.value, r.headers) for r in records] == [
            (f"{i % 3}".encode(), values[i], (("seq", str(i).encode()),)) for i in range(500)
        ]


def test_topics_made_and_deleted_over_the_protocol_show_in_the_mount(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt, "partitions=1") as (_, bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert admin.create_topics([NewTopic("made", 3, 1)])["made"].result(10) is None
        assert sorted(p.name for p in (mnt / "made").iterdir() if p.name.isdigit()) == [
            "0",
            "1",
            "2",
        ]
        kcat("-b", bootstrap, "-P", "-t", "made", "-p", "1", input=b"first\n")
        kept = open(mnt / "made" / "1" / "stream", "rb")  # noqa: SIM115 - held across the delete
        try:
            assert kept.read() == b"first\n"
            assert admin.delete_topics(["made"])["made"].result(10) is None
            assert not (mnt / "made").exists()
            assert admin.create_topics([NewTopic("made", 2, 1)])["made"].result(10) is None
            assert not (mnt / "made" / "1" / "offset" / "0").exists()
            kcat("-b", bootstrap, "-P", "-t", "made", "-p", "1", input=b"second\n")
            assert (mnt / "made" / "1" / "offset" / "0").read_bytes() == b"second"
            with contextlib.suppress(OSError):  # the old descriptor never reaches the new topic
                assert b"second" not in kept.read()
        finally:
            kept.close()
