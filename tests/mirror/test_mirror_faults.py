"""Mirror out through kill -9 of the mirror, of the cluster, and a network that drops
and stalls connections (a TCP proxy on 127.0.0.1 the test drives), while records are
appended: at the end the cluster holds every record once and in order for a
``read_committed`` reader."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time

from kafka_helpers import Served
from mirror_helpers import committed_values
from mount_helpers import LOGFS
from tcp_proxy import Proxy
from waiting import wait_for

from logfs.core.log import Store

TOPICS = {"a": 2, "b": 1}


class Appender:
    """Appends numbered records to every partition of `TOPICS`, a batch at a time."""

    def __init__(self, data) -> None:
        self.store = Store(data)
        for topic, n in TOPICS.items():
            self.store.create_topic(topic, n)
        self.next = {(t, p): 0 for t, n in TOPICS.items() for p in range(n)}

    def append(self, count: int) -> None:
        for (topic, p), first in self.next.items():
            values = [f"{topic}-{p}-{i}".encode() for i in range(first, first + count)]
            self.store.log(topic, p).append(values)
            self.next[(topic, p)] = first + count

    def expected(self, tp) -> list[bytes]:
        topic, p = tp
        return [f"{topic}-{p}-{i}".encode() for i in range(self.next[tp])]


def start_mirror(data, bootstrap: str, options: dict, log) -> subprocess.Popen:
    opts = ",".join(f"{k}={v}" for k, v in options.items() if k != "mirror.to")
    return subprocess.Popen(
        [*LOGFS, "mirror", str(data), f"kafka://{bootstrap}", "-o", opts],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def caught_up(cluster, appender: Appender) -> None:
    for tp in appender.next:
        wait_for(
            lambda tp=tp: len(committed_values(cluster, *tp)) >= appender.next[tp],
            f"{tp} forwarded", timeout=120, poll=0.5,
        )  # fmt: skip
        assert committed_values(cluster, *tp) == appender.expected(tp)


def describe(data, *flags: str):
    done = subprocess.run(
        [*LOGFS, "describe", str(data), "--mirrors", *flags],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(done.stdout) if flags else done.stdout


def caught_up_status(data) -> dict | None:
    """The mirror's status once it says it has forwarded everything."""
    statuses = describe(data, "--json")
    if statuses and statuses[0]["lag_records"] == 0 and statuses[0]["error"] is None:
        return statuses[0]
    return None


def test_kill_9_of_the_mirror_and_cut_connections_lose_and_repeat_nothing(tmp_path, cluster):
    rng = random.Random(20261126)
    appender = Appender(tmp_path / "edge")
    log = open(tmp_path / "mirror.log", "ab")  # noqa: SIM115 - closed below
    with Proxy(cluster.served.address) as proxy:
        options = cluster.options
        mirror = start_mirror(tmp_path / "edge", proxy.bootstrap, options, log)
        try:
            connected = 0
            for step in range(12):
                appender.append(rng.randrange(50, 400))
                # the mirror is back (a new process, or a new connection) before the next fault
                wait_for(lambda n=connected: proxy.connections > n, "a connection", timeout=60)
                time.sleep(rng.uniform(0.05, 0.6))
                connected = proxy.connections
                fault = step % 3
                if fault == 0:
                    kill(mirror)
                    mirror = start_mirror(tmp_path / "edge", proxy.bootstrap, options, log)
                elif fault == 1:
                    proxy.cut()
                else:
                    proxy.stall()
                    time.sleep(rng.uniform(0.1, 1.0))
                    proxy.cut()
                    proxy.resume()
            appender.append(100)
            caught_up(cluster, appender)
            assert mirror.poll() is None, "the mirror stopped by itself"
            status = wait_for(
                lambda: caught_up_status(tmp_path / "edge"), "lag 0", timeout=30, poll=0.5
            )
            assert set(status["partitions"]) == {"a-0", "a-1", "b-0"} and not status["stale"]
            assert status["partitions"]["b-0"]["position"] == appender.next[("b", 0)]
            kill(mirror)
            [status] = describe(tmp_path / "edge", "--json")
            assert status["stale"] and status["id"] == "edge-1"
            assert "State: stale" in describe(tmp_path / "edge")
        finally:
            if mirror.poll() is None:
                mirror.send_signal(signal.SIGTERM)
                mirror.wait(timeout=30)
            log.close()
            appender.store.close()
    output = (tmp_path / "mirror.log").read_text()
    assert "Traceback" not in output
    assert proxy.connections >= 12  # each fault made the mirror connect again


def test_kill_9_of_the_cluster_mid_stream(tmp_path, cluster):
    """The cluster dies with a transaction open and comes back on another port (the
    proxy follows it): the open transaction is aborted there, the mirror resumes at the
    last committed position."""
    rng = random.Random(7)
    appender = Appender(tmp_path / "edge")
    log = open(tmp_path / "mirror.log", "ab")  # noqa: SIM115 - closed below
    with Proxy(cluster.served.address) as proxy:
        options = cluster.options
        mirror = start_mirror(tmp_path / "edge", proxy.bootstrap, options, log)
        try:
            for _ in range(3):
                appender.append(rng.randrange(200, 2000))
                time.sleep(rng.uniform(0.1, 0.8))
                cluster.served.kill()
                appender.append(100)
                restarted = Served(cluster.data, *cluster.served.options).start()
                cluster.served = restarted
                proxy.upstream = restarted.address
            caught_up(cluster, appender)
            output = (tmp_path / "mirror.log").read_text()
            assert "mirror to kafka://" in output  # the failures were reported
        finally:
            if mirror.poll() is None:
                mirror.send_signal(signal.SIGTERM)
                mirror.wait(timeout=30)
            log.close()
            appender.store.close()
