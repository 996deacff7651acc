"""The soak: every face of one daemon busy at once for minutes, its resident
memory and descriptors sampled as it goes, every count checked at the end.

Two shell-like writers append lines to a topic's partitions, a third to a
topic under ``retention.bytes`` (its segments deleted as it goes); an
idempotent Kafka producer and a consumer group go through the listener;
``keys/`` files of a compacted topic are written over and over; a follower
reads ``from/0`` as it grows. After a warm-up the daemon's RSS must level
off: the largest sample of the last third is at most `GROWTH_MIB` over the
largest of the middle third, and every sample is under `RSS_BOUND_MIB`
(docs/operations.md, "Memory over time").

CI runs it for `CI_MINUTES`; ``LOGFS_STRESS=soak`` with ``LOGFS_SOAK_MINUTES``
(default 30) runs it by hand. ``LOGFS_STRESS_REPORT`` gets the samples.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka_helpers import mounted
from stress import report

CI_MINUTES = 1.5
SOAK = os.environ.get("LOGFS_STRESS") == "soak"
MINUTES = float(os.environ.get("LOGFS_SOAK_MINUTES", "30")) if SOAK else CI_MINUTES
RSS_BOUND_MIB = 256
GROWTH_MIB = 12
SAMPLE_S = 2.0

pytestmark = [pytest.mark.mount, pytest.mark.timeout(int(MINUTES * 60) + 600)]


def descriptors(pid: int, data: Path) -> int:
    """The daemon's open descriptors but its segments' files in DATA: those follow the
    log's size (each segment holds its files open), a leak would be anything else."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        count += not target.startswith(f"{data}/")
    return count


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


class Faces:
    """The load: each face a thread counting what it did, until `stop`."""

    def __init__(self, mnt: Path, bootstrap: str) -> None:
        self.mnt, self.bootstrap = mnt, bootstrap
        self.stopping = threading.Event()
        self.counts: dict[str, int] = {}
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._guard, args=(name, face), name=name)
            for name, face in (
                ("writer0", lambda: self.writer("soak", 0)),
                ("writer1", lambda: self.writer("soak", 1)),
                ("retained", lambda: self.writer("ret", 0)),
                ("producer", self.producer),
                ("consumer", self.consumer),
                ("keys", self.keys),
                ("follower", self.follower),
            )
        ]

    def _guard(self, name: str, face) -> None:
        try:
            face()
        except BaseException as e:  # reported by the test, not lost in a thread
            self.errors.append(e)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=300)

    def writer(self, topic: str, partition: int) -> None:
        name, n = f"{topic}-{partition}", 0
        with open(self.mnt / topic / str(partition) / "append", "ab", buffering=0) as f:
            while not self.stopping.is_set():
                f.write(b"".join(b"line %d\n" % i for i in range(n, n + 500)))
                n += 500
                self.counts[name] = n

    def producer(self) -> None:
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})  # fmt: skip
        delivered = [0]

        def done(err, msg) -> None:
            assert err is None, err
            delivered[0] += 1

        sent = 0
        while not self.stopping.is_set():
            for _ in range(1000):
                p.produce("kt", b"record %d" % sent, on_delivery=done)
                sent += 1
            p.poll(0)
            p.flush(30)
        assert p.flush(60) == 0
        self.counts["produced"] = delivered[0]
        assert delivered[0] == sent

    def consumer(self) -> None:
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})  # fmt: skip
        c.subscribe(["kt"])
        seen = 0
        idle_since = None
        try:
            while True:
                msgs = c.consume(1000, 0.5)
                for m in msgs:
                    assert m.error() is None, m.error()
                seen += len(msgs)
                self.counts["consumed"] = seen
                if self.stopping.is_set() and "produced" in self.counts:
                    if seen >= self.counts["produced"]:
                        break
                    idle_since = idle_since or time.monotonic()
                    assert time.monotonic() - idle_since < 120, "the consumer fell behind"
        finally:
            c.close()

    def keys(self) -> None:
        n = 0
        while not self.stopping.is_set():
            (self.mnt / "kv" / "keys" / f"k{n % 200}").write_bytes(b"value %d" % n)
            n += 1
            self.counts["keys"] = n

    def follower(self) -> None:
        lines = 0
        with open(self.mnt / "soak" / "0" / "from" / "0", "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if chunk:
                    lines += chunk.count(b"\n")
                    self.counts["followed"] = lines
                elif self.stopping.is_set() and lines >= self.counts.get("soak-0", 0):
                    break
                else:
                    time.sleep(0.05)


def test_every_face_busy_memory_levels_off(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    # retention every 5 s (Kafka's default is 5 minutes, longer than the CI soak)
    with mounted(data, mnt, "partitions=2", "log.retention.check.interval.ms=5000") as (
        daemon,
        bootstrap,
    ):
        (mnt / "soak").mkdir()
        (mnt / "ret").mkdir()
        (mnt / "ret" / "config").write_text(
            "retention.bytes=1048576\nsegment.bytes=262144\nfile.delete.delay.ms=1000\n"
        )
        (mnt / "kv").mkdir()
        (mnt / "kv" / "config").write_text("cleanup.policy=compact\n")
        (mnt / "kt").mkdir()
        faces = Faces(mnt, bootstrap)
        samples: list[tuple[float, float, int]] = []  # (s, RSS MiB, descriptors but DATA's)
        started = time.monotonic()
        faces.start()
        try:
            while (elapsed := time.monotonic() - started) < MINUTES * 60 and not faces.errors:
                fds = descriptors(daemon.pid, data)
                samples.append((elapsed, rss_mib(daemon.pid), fds))
                time.sleep(SAMPLE_S)
        finally:
            faces.stop()
        assert not faces.errors, faces.errors
        assert daemon.proc.poll() is None
        counts = faces.counts
        for partition in (0, 1):
            with open(mnt / "soak" / str(partition) / "stream", "rb") as f:
                stored = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
            assert stored == counts[f"soak-{partition}"]
        assert counts["followed"] == counts["soak-0"]
        assert counts["consumed"] == counts["produced"] > 0
        assert counts["keys"] > 0 and len(os.listdir(mnt / "kv" / "keys")) == min(
            200, counts["keys"]
        )
    report("soak", minutes=MINUTES, samples=samples, **counts)
    third = len(samples) // 3
    middle = max(rss for _, rss, _ in samples[third : 2 * third])
    last = max(rss for _, rss, _ in samples[2 * third :])
    peak = max(rss for _, rss, _ in samples)
    assert peak < RSS_BOUND_MIB, f"RSS reached {peak:.0f} MiB"
    assert last - middle <= GROWTH_MIB, (
        f"RSS still growing: {middle:.0f} MiB in the middle third, {last:.0f} MiB at the end"
    )
    fds_middle = max(n for _, _, n in samples[third : 2 * third])
    assert max(n for _, _, n in samples[2 * third :]) <= fds_middle + 16
