"""Exactly once under kill -9: a consume-transform-produce loop (librdkafka,
`send_offsets_to_transaction`, tests/helpers/txn_ctp.py) copies ``in`` to
``out`` through ``logfs serve`` while the loop and the daemon are killed with
SIGKILL at random moments, each restarted at once (the daemon on the same
address, so a loop that survives its daemon goes on with it). At the end a
read_committed reader of ``out`` sees every input record transformed exactly
once, in order per partition: no gap, no duplicate.

The moments and victims come from a seeded generator; the seed is printed (run
again with LOGFS_STRESS_SEED=<seed> to replay the same schedule) and
LOGFS_STRESS=long runs more rounds over more records (tests/helpers/stress.py).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from kafka_helpers import Served
from stress import report, scale
from txn_helpers import end_offsets, read_all

from logfs.core.log import Store

CTP = Path(__file__).resolve().parents[1] / "helpers" / "txn_ctp.py"
PARTITIONS = 3
RECORDS = scale(400, 4000)  # per input partition
ROUNDS = scale(8, 60)
STALL = 15
PAUSE = 0.05  # seconds between the loop's transactions: kills land mid-run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Loop:
    """The consume-transform-produce process, started again whenever it is gone."""

    def __init__(self, bootstrap: str, log: Path):
        self.bootstrap = bootstrap
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def ensure(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            with open(self.log, "ab") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, str(CTP), self.bootstrap, "ctp", "ctp-group",
                     str(PARTITIONS), str(PAUSE)],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                )  # fmt: skip
            self.starts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


def produce_input(bootstrap: str) -> dict[int, list[bytes]]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        for p in range(PARTITIONS):
            value = f"{p}-{i}".encode()
            producer.produce("in", value, partition=p)
            values[p].append(value)
    assert producer.flush(60) == 0
    return values


def test_consume_transform_produce_is_exactly_once_under_kill_9(tmp_path):
    seed = int(os.environ.get("LOGFS_STRESS_SEED") or random.randrange(1 << 32))
    print(f"LOGFS_STRESS_SEED={seed}")
    rng = random.Random(seed)
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("in", partitions=PARTITIONS)
        store.create_topic("out", partitions=PARTITIONS)
    listen = f"127.0.0.1:{free_port()}"
    daemon = Served(data, listen=listen).start()
    loop = Loop(daemon.bootstrap, tmp_path / "ctp.log")
    kills = {"loop": 0, "daemon": 0}
    try:
        values = produce_input(daemon.bootstrap)
        loop.ensure()
        progress = []  # records the loop had committed at each kill
        done = 0
        for _ in range(ROUNDS):
            # each kill comes at a random moment after the loop committed again
            # since the last one, so that it lands in the run, not in a start
            deadline = time.monotonic() + 30
            while (now := committed_count(daemon.bootstrap)) <= done:
                assert time.monotonic() < deadline, f"seed {seed}: no progress"
                loop.ensure()
                time.sleep(0.05)
            if now == PARTITIONS * RECORDS:
                break
            time.sleep(rng.uniform(0, 0.6))
            victim = rng.choice(("loop", "loop", "daemon", "both"))
            if victim in ("loop", "both"):
                loop.kill()
                kills["loop"] += 1
            if victim in ("daemon", "both"):
                daemon.kill()
                kills["daemon"] += 1
                daemon.start()
            done = committed_count(daemon.bootstrap)
            progress.append(done)
            loop.ensure()
        # Let the last loop finish the input: every input offset committed. A loop
        # that commits nothing for STALL seconds is killed and started again (its
        # client can wait out its own timeouts after its daemon died); counted.
        want = [RECORDS] * PARTITIONS
        deadline = time.monotonic() + 120
        last, since, stalls = None, time.monotonic(), 0
        while (now := committed_positions(daemon.bootstrap)) != want:
            assert time.monotonic() < deadline, (
                f"seed {seed}: the loop did not finish: {now}"
                f"\n{loop.log.read_text(errors='replace')[-3000:]}"
            )
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since > STALL:
                loop.kill()
                stalls += 1
                since = time.monotonic()
            loop.ensure()
            time.sleep(0.5)
        loop.kill()
        out = read_all(daemon.bootstrap, "out", PARTITIONS, "read_committed")
        got = {p: [v for _, _, v in records] for p, records in out.items()}
        expected = {p: [b"T" + v for v in values[p]] for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            assert got[p] == expected[p], f"seed {seed}, partition {p}: {summary(got[p])}"
        # Nothing is left open: the stable end is the log end.
        ends = end_offsets(daemon.address, "out", PARTITIONS, isolation=0)
        assert end_offsets(daemon.address, "out", PARTITIONS, isolation=1) == ends
        everything = read_all(daemon.bootstrap, "out", PARTITIONS, "read_uncommitted")
        aborted = sum(len(r) for r in everything.values()) - PARTITIONS * RECORDS
        print(f"kills {kills}, loop starts {loop.starts}, aborted records {aborted}, "
              f"stalls {stalls}, committed at each kill {progress}")  # fmt: skip
        assert any(0 < n < PARTITIONS * RECORDS for n in progress), "no kill hit the run"
        report("txn_exactly_once", rounds=ROUNDS, records=PARTITIONS * RECORDS,
               loop_kills=kills["loop"], daemon_kills=kills["daemon"],
               aborted_records=aborted, stalls=stalls)  # fmt: skip
    finally:
        loop.kill()
        if daemon.proc is not None and daemon.alive():
            daemon.terminate()


def committed_positions(bootstrap: str) -> list[int]:
    """The loop's group's committed offsets of ``in`` (what its transactions committed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp-group",
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        wanted = [TopicPartition("in", p) for p in range(PARTITIONS)]
        return [tp.offset for tp in consumer.committed(wanted, timeout=10)]
    finally:
        consumer.close()


def committed_count(bootstrap: str) -> int:
    return sum(max(offset, 0) for offset in committed_positions(bootstrap))


def summary(values: list[bytes]) -> str:
    """Where a partition's output departs from a gapless, duplicate-free copy."""
    dups = [v for v, n in Counter(values).items() if n > 1]
    return f"{len(values)} records, duplicates {dups[:5]}, first {values[:3]}, last {values[-3:]}"
