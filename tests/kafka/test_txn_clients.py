"""Transactions with four real clients against ``logfs serve``: librdkafka
(confluent-kafka), kafka-python, aiokafka and KafkaJS each commit and abort
transactions over several partitions; a read_committed consumer sees exactly the
committed records, in order, and a read_uncommitted one every data record. Then
fencing of a zombie, a transaction its killed producer left open aborted at its
timeout, and the coordinator's and the partitions' state as Kafka's admin
requests describe them."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kafka_helpers import Served, call
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from logfs.core.log import Store

NODE_MODULES = Path(sys.prefix) / "node" / "node_modules"
KAFKAJS_SCRIPT = Path(__file__).resolve().parents[1] / "helpers" / "kafkajs" / "transactions.js"
PARTITIONS = 3
LIST_OFFSETS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 2, 61, 65, 66


@pytest.fixture
def served(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("out", partitions=PARTITIONS)
    with Served(data) as served:
        yield served


def expected(prefixes: str, count: int) -> dict[int, list[bytes]]:
    """Per partition, the values of the transactions of ``prefixes`` in order, each
    sending ``count`` records round-robin over the partitions."""
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for prefix in prefixes:
        for i in range(count):
            out[i % PARTITIONS].append(f"{prefix}{i}".encode())
    return out


def consumed(bootstrap: str, isolation: str) -> dict[int, list[bytes]]:
    """Every record of ``out`` a kafka-python consumer of ``isolation`` reads, per partition."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
        consumer_timeout_ms=3000, enable_auto_commit=False,
    )  # fmt: skip
    consumer.assign([TopicPartition("out", p) for p in range(PARTITIONS)])
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for message in consumer:
        out[message.partition].append(message.value)
    consumer.close()
    return out


def check_views(served, committed: str, everything: str, count: int) -> None:
    assert consumed(served.bootstrap, "read_committed") == expected(committed, count)
    assert consumed(served.bootstrap, "read_uncommitted") == expected(everything, count)


def test_librdkafka_commits_and_aborts(served):
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "rd"})
    producer.init_transactions(30)
    for prefix, commit in (("c", True), ("a", False), ("d", True)):
        producer.begin_transaction()
        for i in range(6):
            producer.produce("out", f"{prefix}{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)  # in the partitions before the decision
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    check_views(served, "cd", "cad", 6)
    # librdkafka's own consumer at read_committed too
    consumer = Consumer({
        "bootstrap.servers": served.bootstrap, "group.id": "rd-reader",
        "isolation.level": "read_committed", "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([TopicPartition("out", p, 0) for p in range(PARTITIONS)])
    got, ends = {p: [] for p in range(PARTITIONS)}, set()
    deadline = time.monotonic() + 30
    while len(ends) < PARTITIONS and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        if message.error():
            ends.add(message.partition())
            continue
        got[message.partition()].append(message.value())
    consumer.close()
    assert got == expected("cd", 6)


def test_kafka_python_commits_and_aborts(served):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=served.bootstrap, transactional_id="kp")
    producer.init_transactions()
    for prefix, commit in (("c", True), ("a", False), ("d", True)):
        producer.begin_transaction()
        for i in range(6):
            producer.send("out", f"{prefix}{i}".encode(), partition=i % PARTITIONS)
        producer.flush()
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    check_views(served, "cd", "cad", 6)


def test_aiokafka_commits_and_aborts(served):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=served.bootstrap, transactional_id="aio")
        await asyncio.wait_for(producer.start(), 30)  # was pending forever before
        try:
            for prefix, commit in (("c", True), ("a", False), ("d", True)):
                await producer.begin_transaction()
                for i in range(6):
                    sent = await producer.send("out", f"{prefix}{i}".encode(), partition=i % 3)
                    await sent
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    check_views(served, "cd", "cad", 6)


def test_kafkajs_commits_aborts_and_sends_offsets(tmp_path):
    """KafkaJS's producer, and its consumers reading the control batches logfs writes."""
    with Served(tmp_path / "data") as served:
        done = subprocess.run(
            ["node", str(KAFKAJS_SCRIPT), served.bootstrap],
            capture_output=True, text=True, timeout=180,
            env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    committed = [[p, v] for p, _, v in seen["committed"]]
    assert committed == [
        [0, "c0"], [0, "c2"], [0, "IN0"], [0, "IN2"], [1, "c1"], [1, "c3"], [1, "IN1"], [1, "IN3"],
    ]  # fmt: skip
    everything = [[p, v] for p, _, v in seen["uncommitted"]]
    assert everything == [
        [0, "c0"], [0, "c2"], [0, "a0"], [0, "IN0"], [0, "IN2"], [0, "lost"],
        [1, "c1"], [1, "c3"], [1, "a1"], [1, "IN1"], [1, "IN3"],
    ]  # fmt: skip
    assert seen["ctp"] == [[0, "4"]]  # committed with the transaction
    assert seen["lost"] == [[0, "-1"]]  # sent in an aborted one: never


def test_a_zombie_is_fenced(served):
    from confluent_kafka import KafkaException, Producer

    old = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "same"})
    old.init_transactions(30)
    old.begin_transaction()
    old.produce("out", b"zombie", partition=0)
    old.flush(30)
    new = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "same"})
    new.init_transactions(30)  # aborts what the old one left open, and fences it
    new.begin_transaction()
    new.produce("out", b"fresh", partition=0)
    new.commit_transaction(30)
    old.produce("out", b"zombie again", partition=0)
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
    assert consumed(served.bootstrap, "read_committed")[0] == [b"fresh"]


KILLED_PRODUCER = """
import os, signal
from confluent_kafka import Producer
p = Producer({{"bootstrap.servers": {bootstrap!r}, "transactional.id": "doomed",
              "transaction.timeout.ms": 10000}})
p.init_transactions(30)
p.begin_transaction()
p.produce("out", b"left open", partition=1)
p.flush(30)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_transaction_a_killed_producer_left_open_aborts_at_its_timeout(served):
    from confluent_kafka import Producer

    killed = subprocess.run(
        [sys.executable, "-c", KILLED_PRODUCER.format(bootstrap=served.bootstrap)],
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _stable(served, 1) == 0  # held by the open transaction
    other = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "other"})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce("out", b"after", partition=1)
    other.commit_transaction(30)
    assert consumed(served.bootstrap, "read_committed")[1] == []  # behind the open one
    deadline = time.monotonic() + 30
    while _stable(served, 1) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _stable(served, 1) == 4  # record, abort marker, record, commit marker
    assert consumed(served.bootstrap, "read_committed")[1] == [b"after"]
    states = {t.transactional_id: t.transaction_state for t in _list(served).transaction_states}
    assert states == {"doomed": "CompleteAbort", "other": "CompleteCommit"}


def _stable(served, partition: int) -> int:
    t = load_request_schema(LIST_OFFSETS, 7)
    m = sys.modules[t.__module__]
    body = t(
        replica_id=-1, isolation_level=1,
        topics=(m.ListOffsetsTopic(name="out", partitions=(
            m.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                   current_leader_epoch=-1),
        )),),
    )  # fmt: skip
    [part] = call(served.address, LIST_OFFSETS, 7, body).topics[0].partitions
    return part.offset


def _list(served, **filters):
    t = load_request_schema(LIST_TRANSACTIONS, 1)
    body = t(
        state_filters=filters.get("states", ()), producer_id_filters=(),
        duration_filter=filters.get("duration", -1),
    )  # fmt: skip
    return call(served.address, LIST_TRANSACTIONS, 1, body)


def test_describe_and_list_transactions_and_producers(served):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "seen"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("out", b"x", partition=2)
    producer.flush(30)
    t = load_request_schema(DESCRIBE_TRANSACTIONS, 0)
    answer = call(served.address, DESCRIBE_TRANSACTIONS, 0, t(transactional_ids=("seen", "none")))
    seen, none = answer.transaction_states
    assert seen.error_code == ErrorCode.none and seen.transaction_state == "Ongoing"
    assert [(d.topic, d.partitions) for d in seen.topics] == [("out", (2,))]
    assert seen.transaction_timeout == datetime.timedelta(seconds=60)
    assert none.error_code == ErrorCode.transactional_id_not_found
    listed = _list(served, states=("Ongoing", "Nonsense"))
    assert [t.transactional_id for t in listed.transaction_states] == ["seen"]
    assert listed.unknown_state_filters == ("Nonsense",)
    t = load_request_schema(DESCRIBE_PRODUCERS, 0)
    m = sys.modules[t.__module__]
    body = t(topics=(m.TopicRequest(name="out", partition_indexes=(2, 9)),))
    part, missing = call(served.address, DESCRIBE_PRODUCERS, 0, body).topics[0].partitions
    [state] = part.active_producers
    assert state.producer_id == seen.producer_id and state.current_txn_start_offset == 0
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    producer.commit_transaction(30)
    answer = call(served.address, DESCRIBE_TRANSACTIONS, 0, t_describe(("seen",)))
    assert answer.transaction_states[0].transaction_state == "CompleteCommit"


def t_describe(ids):
    return load_request_schema(DESCRIBE_TRANSACTIONS, 0)(transactional_ids=ids)


def test_a_transactional_batch_for_a_partition_not_added_is_refused(served):
    """Kafka's broker verifies a transactional batch's partition is in its
    producer's transaction (KIP-890); a producer id the coordinator never gave,
    or an older epoch, is refused too."""
    from txn_helpers import produce, producer_batch

    batch = producer_batch([b"sneaky"], 12345, 0, 0, transactional=True)
    [(code, _)] = produce(served.address, "out", {0: batch}).values()
    assert code == ErrorCode.invalid_producer_id_mapping
    script = textwrap.dedent(
        f"""
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": {served.bootstrap!r}, "transactional.id": "v"}})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("out", b"ok", partition=0)
        p.flush(30)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    answer = call(served.address, DESCRIBE_TRANSACTIONS, 0, t_describe(("v",)))
    pid, epoch = (
        answer.transaction_states[0].producer_id,
        answer.transaction_states[0].producer_epoch,
    )
    elsewhere = producer_batch([b"elsewhere"], pid, epoch, 1, transactional=True)
    assert produce(served.address, "out", {1: elsewhere})[1][0] == ErrorCode.invalid_txn_state
    stale = producer_batch([b"stale"], pid, epoch - 1, 1, transactional=True)
    assert produce(served.address, "out", {0: stale})[0][0] == ErrorCode.invalid_producer_epoch
