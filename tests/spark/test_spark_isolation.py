"""The mount and the Spark source show what a read_committed Kafka consumer shows.

Over one mount with a Kafka listener, librdkafka producers interleave plain
records, committed transactions, an aborted one and one left open (followed by
more plain and committed records, which the open one holds back) across the
partitions of a topic and of a compacted topic, each record with its own
timestamp. Then, per partition, what a model of Kafka's rules expects (the
records in order, less the aborted transactions', up to the first record of the
open one) must be what each reader gives:

- a confluent-kafka consumer with ``isolation.level=read_committed``;
- the mount's ``stream``, every ``offset/<n>`` (present exactly for those
  records), ``from/<n>``, ``time/<ms>`` for every record's timestamp and the
  compacted topic's ``keys/``;
- the Spark source with ``kafka.isolation.level=read_committed``, over ``path``
  and over the listener.

And every data record (aborted and open ones too, never a marker) for a
read_uncommitted consumer and for the Spark source's default.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from typing import NamedTuple

import pytest
from kafka_helpers import mounted
from txn_helpers import end_offsets, read_all

from logfs.core.log import Store, key_name

pytestmark = [pytest.mark.spark, pytest.mark.mount]

TOPICS = {"events": 3, "table": 2}  # "table" is compacted


class Sent(NamedTuple):
    topic: str
    partition: int
    key: bytes
    value: bytes
    timestamp: int
    fate: str  # plain, commit, abort, open


# Steps in log order: (fate, records as (topic, partition, key, value)).
STEPS = [
    ("plain", [("events", 0, "a0"), ("events", 1, "a1"), ("events", 2, "a2"),
               ("table", 0, "k1=v1a"), ("table", 1, "k2=v2a")]),
    ("commit", [("events", 0, "c0"), ("events", 1, "c1"), ("events", 2, "c2"),
                ("events", 0, "c3"), ("table", 0, "k1=v1b")]),
    ("abort", [("events", 0, "x0"), ("events", 1, "x1"), ("events", 2, "x2"),
               ("table", 0, "k1=ABORTED"), ("table", 1, "k2=ABORTED")]),
    ("plain", [("events", 0, "b0"), ("events", 2, "b2"), ("table", 1, "k3=v3a")]),
    ("commit", [("events", 1, "d1"), ("events", 2, "d2"), ("table", 1, "k2=v2b")]),
    ("open", [("events", 0, "o0"), ("events", 1, "o1"), ("table", 1, "k3=OPEN"),
              ("table", 0, "k4=OPEN")]),
    ("plain", [("events", 0, "e0"), ("events", 1, "e1"), ("events", 2, "e2"),
               ("table", 0, "k1=v1c")]),
    ("commit", [("events", 2, "f2"), ("events", 0, "f0"), ("table", 1, "k5=v5")]),
]  # fmt: skip


def write_steps(bootstrap: str):
    """Send STEPS in order (each flushed before the next); return what was sent and
    the producer holding the open transaction (kept open until the test ends)."""
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": bootstrap})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "steps"})
    txn.init_transactions(30)
    held = Producer({"bootstrap.servers": bootstrap, "transactional.id": "held",
                     "transaction.timeout.ms": 900000})  # fmt: skip
    held.init_transactions(30)
    base = int(time.time() * 1000) - 600_000
    sent: list[Sent] = []
    for step, (fate, records) in enumerate(STEPS):
        producer = {"plain": plain, "open": held}.get(fate, txn)
        if fate != "plain":
            producer.begin_transaction()
        for i, (topic, partition, text) in enumerate(records):
            key, _, value = text.rpartition("=")
            record = Sent(topic, partition, (key or text).encode(), value.encode(),
                          base + step * 1000 + i, fate)  # fmt: skip
            producer.produce(topic, record.value, key=record.key, partition=partition,
                             timestamp=record.timestamp)  # fmt: skip
            sent.append(record)
        assert producer.flush(30) == 0
        if fate == "commit":
            txn.commit_transaction(30)
        elif fate == "abort":
            txn.abort_transaction(30)
    return sent, held


def committed_model(sent: list[Sent], topic: str, partition: int) -> list[Sent]:
    """Kafka's read_committed view of a partition: the records in order, less the
    aborted ones, up to the first record of a transaction still open."""
    out = []
    for record in sent:
        if (record.topic, record.partition) != (topic, partition):
            continue
        if record.fate == "open":
            break
        if record.fate != "abort":
            out.append(record)
    return out


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory):
    base = tmp_path_factory.mktemp("isolation")
    data, mnt = base / "data", base / "mnt"
    with Store(data) as store:
        store.create_topic("events", partitions=TOPICS["events"])
        store.create_topic("table", partitions=TOPICS["table"],
                           config={"cleanup.policy": "compact"})  # fmt: skip
    with mounted(data, mnt) as (_daemon, bootstrap):
        sent, held = write_steps(bootstrap)
        host, _, port = bootstrap.rpartition(":")
        views = {
            topic: {
                "committed": read_all(bootstrap, topic, n, "read_committed"),
                "uncommitted": read_all(bootstrap, topic, n, "read_uncommitted"),
                "lso": end_offsets((host, int(port)), topic, n, isolation=1),
                "end": end_offsets((host, int(port)), topic, n, isolation=0),
            }
            for topic, n in TOPICS.items()
        }
        yield data, mnt, bootstrap, sent, views
        held.abort_transaction(30)


def test_librdkafka_read_committed_is_the_model(interleaved):
    _, _, _, sent, views = interleaved
    for topic, n in TOPICS.items():
        for p in range(n):
            got = [(k, v) for _, k, v in views[topic]["committed"][p]]
            assert got == [(r.key, r.value) for r in committed_model(sent, topic, p)]
            everything = [(k, v) for _, k, v in views[topic]["uncommitted"][p]]
            assert everything == [(r.key, r.value) for r in sent
                                  if (r.topic, r.partition) == (topic, p)]  # fmt: skip
        # the open transaction holds the LSO of the partitions it wrote to
        held = {r.partition for r in sent if r.topic == topic and r.fate == "open"}
        for p in range(n):
            lso, end = views[topic]["lso"][p], views[topic]["end"][p]
            assert (lso < end) == (p in held), (topic, p, lso, end)


def test_the_mount_shows_the_committed_view(interleaved):
    _, mnt, _, sent, views = interleaved
    for p in range(TOPICS["events"]):
        part = mnt / "events" / str(p)
        committed = views["events"]["committed"][p]
        offsets = [o for o, _, _ in committed]
        values = [v for _, _, v in committed]
        lso, end = views["events"]["lso"][p], views["events"]["end"][p]
        state = json.loads((part / "state").read_text())
        assert state["last_stable_offset"] == lso and state["next_offset"] == end
        assert bool(state["open_transactions"]) == (lso < end)
        assert (part / "stream").read_bytes() == b"".join(v + b"\n" for v in values)
        for n in range(end):  # exactly the committed records, never an aborted one or a marker
            path = part / "offset" / str(n)
            if n in offsets:
                assert path.read_bytes() == values[offsets.index(n)], (p, n)
            else:
                with pytest.raises(FileNotFoundError):
                    path.read_bytes()
        for n in range(lso):
            assert (part / "from" / str(n)).read_bytes() == b"".join(
                v + b"\n" for o, v in zip(offsets, values, strict=True) if o >= n
            ), (p, n)
        for n in range(lso, end):  # past the LSO: nothing shown
            with contextlib.suppress(FileNotFoundError):
                assert (part / "from" / str(n)).read_bytes() == b"", (p, n)
        stamps = [r.timestamp for r in committed_model(sent, "events", p)]
        for record in (r for r in sent if (r.topic, r.partition) == ("events", p)):
            first = next((o for o, t in zip(offsets, stamps, strict=True)
                          if t >= record.timestamp), None)  # fmt: skip
            link = part / "time" / str(record.timestamp)
            if first is None:
                with pytest.raises(OSError) as missing:
                    os.readlink(link)
                assert missing.value.errno == errno.ENOENT
            else:
                assert os.readlink(link) == f"../offset/{first}", (p, record)


def test_the_mount_keys_are_the_committed_latest_values(interleaved):
    _, mnt, _, _, views = interleaved
    latest: dict[bytes, bytes] = {}
    for p in range(TOPICS["table"]):
        for _, key, value in views["table"]["committed"][p]:
            latest[key] = value
    assert latest == {b"k1": b"v1b", b"k2": b"v2b", b"k3": b"v3a"}  # the model's
    keys = mnt / "table" / "keys"
    assert sorted(os.listdir(keys)) == sorted(key_name(k) for k in latest)
    for key, value in latest.items():
        assert (keys / key_name(key)).read_bytes() == value


def rows(spark, source: dict[str, str], isolation: str | None) -> dict:
    reader = spark.read.format("logfs").options(**source).option("subscribe", "events,table")
    if isolation is not None:
        reader = reader.option("kafka.isolation.level", isolation)
    got: dict = {}
    for row in reader.load().select("topic", "partition", "offset", "key", "value").collect():
        got.setdefault(row.topic, {}).setdefault(row.partition, []).append(
            (row.offset, bytes(row.key), bytes(row.value))
        )
    for partitions in got.values():
        for records in partitions.values():
            records.sort()
    return got


def consumer_view(views, which: str) -> dict:
    return {
        topic: {p: records for p, records in views[topic][which].items() if records}
        for topic in TOPICS
    }


@pytest.mark.parametrize("over", ["path", "listener"])
def test_spark_reads_what_the_consumers_read(spark, interleaved, over):
    data, _, bootstrap, _, views = interleaved
    source = {"path": str(data)} if over == "path" else {"kafka.bootstrap.servers": bootstrap}
    assert rows(spark, source, "read_committed") == consumer_view(views, "committed")
    everything = consumer_view(views, "uncommitted")
    assert rows(spark, source, "read_uncommitted") == everything
    assert rows(spark, source, None) == everything  # Spark's default: read_uncommitted
