"""acks=-1 answered after fsync (``kafka.acks.all.fsync=true``): a power failure
after the answer loses nothing it acknowledged; without the option, or with
acks=1, the answer comes before the fsync (flush.ms decides).

The power-loss model is the mount's (helpers/powerloss.py): only what was fsynced survives
(`DurableImage` wraps ``os.fsync``/``os.fdatasync``), the broker and the
mount's flusher run in-process on one trio loop with the fsyncs in worker
threads, and at a random moment the power fails."""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest
import trio
from kafka import KafkaProducer
from kafka_helpers import Served, call, encode_request, mounted
from powerloss import MODES, REAL_FDATASYNC, REAL_FSYNC, DurableImage
from test_kafka_protocol import PRODUCE, batch, produce_request
from waiting import wait_for

from logfs import Store
from logfs.core.log.checkpoints import RECOVERY_POINT_FILE, read_checkpoint
from logfs.core.tools.offline import check
from logfs.daemon import Flusher
from logfs.groups import Coordinator
from logfs.kafka import Broker
from logfs.kafka.access import Client
from logfs.kafka.protocol import read_request

NEVER = {"flush.ms": "3600000"}  # the flusher alone would not fsync within a test


def run_until_power_fails(live, *, fsync_option: bool, acks: int, seed: int, mode=None):
    """Produce to two partitions (two producers on partition 0) until the power
    fails; returns what each partition was acknowledged (value -> offset), the
    directory that survived, and the fsyncs modelled. ``mode``: what becomes of
    unsynced tails (powerloss.py's MODES), random if None."""
    rng = random.Random(seed)
    image = DurableImage(live)
    acked: dict[int, dict[bytes, int]] = {0: {}, 1: {}}
    client = Client("127.0.0.1", 9092, None)
    after = live.parent / "after"
    failed = threading.Event()

    async def producer(broker, name: str, partition: int) -> None:
        for n in range(10**6):
            values = [b"%s-%d-%d" % (name.encode(), n, i) for i in range(rng.randrange(1, 20))]
            body = produce_request("t", {partition: batch(values)}, acks=acks)
            request = read_request(memoryview(encode_request(PRODUCE, 9, body)[4:]))
            reply = await broker.handle(request, client)
            if failed.is_set():
                return  # answered after the power failed: acknowledged to nobody
            [answer] = reply.body.responses[0].partition_responses
            assert answer.error_code == 0
            for i, value in enumerate(values):
                acked[partition][value] = answer.base_offset + i
            await trio.sleep(rng.uniform(0, 0.003))

    async def main() -> None:
        with Store(live, defaults=NEVER) as store:
            store.create_topic("t", 2)
            flusher = Flusher(store, tick=0.02)
            broker = Broker(
                store,
                groups=Coordinator(store),
                acks_all_fsync=fsync_option,
                sync=flusher.flush_log,
            )
            async with trio.open_nursery() as nursery:
                await nursery.start(flusher.run)
                for name, partition in (("a", 0), ("b", 0), ("c", 1)):
                    nursery.start_soon(producer, broker, name, partition)
                await trio.sleep(rng.uniform(0.3, 0.6))
                # the power fails: answers given until now are what was acknowledged
                failed.set()
                image.crash(after, rng, mode or rng.choice(MODES))
                nursery.cancel_scope.cancel()

    os.fsync = os.fdatasync = image.fsync
    try:
        trio.run(main)
    finally:
        os.fsync, os.fdatasync = REAL_FSYNC, REAL_FDATASYNC
    return acked, after, image.fsyncs


def survivors(after) -> dict[int, dict[bytes, int]]:
    with Store(after) as store:
        return {p: {r.value: r.offset for r in store.log("t", p).scan()} for p in (0, 1)}


@pytest.mark.parametrize("seed", range(3))
def test_acks_all_after_fsync_survives_power_loss(tmp_path, seed):
    acked, after, fsyncs = run_until_power_fails(
        tmp_path / "data", fsync_option=True, acks=-1, seed=seed
    )
    got = survivors(after)  # opening the store recovers it
    assert check(after) == []
    for partition in (0, 1):
        assert len(acked[partition]) > 50, "too few answers to tell"
        lost = {v: o for v, o in acked[partition].items() if got[partition].get(v) != o}
        assert not lost, f"partition {partition}: {len(lost)} acknowledged records lost"
    assert fsyncs > 0


@pytest.mark.parametrize(
    ("fsync_option", "acks"), [(False, -1), (True, 1)], ids=["acks=-1 without", "acks=1 with"]
)
def test_otherwise_the_answer_comes_before_the_fsync(tmp_path, fsync_option, acks):
    """The model does lose answered records when nothing fsyncs them: without
    the option, and for acks=1 with it (acks=1 is answered after the append).
    Unsynced tails are dropped whole here (the other modes keep parts)."""
    acked, after, _ = run_until_power_fails(
        tmp_path / "data", fsync_option=fsync_option, acks=acks, seed=7, mode="clean"
    )
    got = survivors(after)
    assert all(len(acked[p]) > 50 for p in (0, 1))
    assert got == {0: {}, 1: {}}, "flush.ms=1 h: nothing was fsynced"


def partition_state(mnt, topic: str, partition: int = 0) -> dict:
    return json.loads((mnt / topic / str(partition) / "state").read_text())


def test_mount_option_fsyncs_before_answering_acks_all(tmp_path):
    """kafka-python with acks='all' and acks=1 against a mount with and without
    the option: the partition's recovery point (its ``state``) covers what an
    acks=-1 answer acknowledged only with the option."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with Store(data) as store:
        for topic in ("all", "one"):
            store.create_topic(topic, 1, NEVER)
    for option, expected in (("kafka.acks.all.fsync=true", True), (None, False)):
        with mounted(data, mnt, *([option] if option else [])) as (_, bootstrap):
            for topic, acks in (("all", "all"), ("one", 1)):
                producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0)
                try:
                    sent = [producer.send(topic, b"v%d" % i) for i in range(20)]
                    producer.flush()
                    last = max(f.get(timeout=30).offset for f in sent)
                finally:
                    producer.close()
                state = partition_state(mnt, topic)
                assert state["next_offset"] == last + 1
                durable = state["recovery_point"] > last
                assert durable == (expected and acks == "all"), (option, acks, state)


def test_serve_option_fsyncs_before_answering(tmp_path):
    """``logfs serve`` takes the option too: the recovery point the flusher
    checkpoints (every 20 ms here) covers an acks=-1 answer at once; the
    checkpoints are read, so the answer came after an fsync, not a flush.ms."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", 1, NEVER)
    options = ("kafka.acks.all.fsync=true", "log.flush.offset.checkpoint.interval.ms=20")
    with Served(data, *options) as served:
        response = call(served.address, PRODUCE, 9, produce_request("t", {0: batch([b"x"] * 5)}))
        [answer] = response.responses[0].partition_responses
        assert (answer.error_code, answer.base_offset) == (0, 0)
        checkpoint = data / RECOVERY_POINT_FILE
        wait_for(
            lambda: checkpoint.exists() and read_checkpoint(checkpoint).get(("t", 0), 0) >= 5,
            "the recovery point after an acks=-1 answer",
        )


def test_concurrent_acks_all_producers_each_covered(tmp_path):
    """Several connections producing acks=-1 to one partition at once: each
    answer comes once its own records are durable (one flush may cover
    several requests)."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with Store(data) as store:
        store.create_topic("t", 1, NEVER)
    with mounted(data, mnt, "kafka.acks.all.fsync=true") as (_, bootstrap):
        errors: list[BaseException] = []

        def produce(n: int) -> None:
            try:
                for i in range(20):
                    body = produce_request("t", {0: batch([b"%d-%d" % (n, i)] * 3)})
                    response = call(bootstrap, PRODUCE, 9, body)
                    [answer] = response.responses[0].partition_responses
                    assert answer.error_code == 0
                    state = partition_state(mnt, "t")
                    assert state["recovery_point"] >= answer.base_offset + 3, state
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors[0]
        assert time.monotonic() - started < 120
        assert partition_state(mnt, "t")["next_offset"] == 4 * 20 * 3
