"""``-o mirror.to=`` on a daemon (``logfs serve``, and ``logfs mount``): what its local
clients commit is forwarded, what they abort is not, through kill -9 of the daemon;
bad mirror options fail the command with one line."""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from kafka_helpers import Served, stored
from mirror_helpers import committed_values
from mount_helpers import LOGFS, Daemon
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for


def mirror_options(cluster) -> list[str]:
    return [f"{k}={v}" for k, v in cluster.options.items()]


def forwarded(cluster, topic: str, partition: int, count: int) -> list[bytes]:
    wait_for(
        lambda: len(committed_values(cluster, topic, partition)) >= count,
        f"{count} records of {topic}-{partition} forwarded", timeout=60, poll=0.3,
    )  # fmt: skip
    return committed_values(cluster, topic, partition)


def test_a_serving_daemon_forwards_committed_transactions_only_through_kill_9(tmp_path, cluster):
    edge = tmp_path / "edge"
    served = Served(edge, "partitions=2", *mirror_options(cluster))
    with served:
        producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "app"})
        producer.init_transactions(30)
        expected = {0: [], 1: []}
        for i in range(6):
            producer.begin_transaction()
            for p in (0, 1):
                for j in range(50):
                    producer.produce("events", f"{i}-{p}-{j}".encode(), partition=p)
            producer.flush(30)
            if i % 3 == 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
                for p in (0, 1):
                    expected[p] += [f"{i}-{p}-{j}".encode() for j in range(50)]
        assert forwarded(cluster, "events", 0, 200) == expected[0]
        served.kill()  # kill -9 of the daemon, the mirror with it
    metrics = "metrics=127.0.0.1:0"  # the mirror's lag shows there too
    with Served(edge, "partitions=2", *mirror_options(cluster), metrics) as again:
        producer = Producer({"bootstrap.servers": again.bootstrap, "enable.idempotence": True})
        for p in (0, 1):
            for j in range(30):
                producer.produce("events", f"after-{p}-{j}".encode(), partition=p)
            expected[p] += [f"after-{p}-{j}".encode() for j in range(30)]
        producer.flush(30)
        for p in (0, 1):
            assert forwarded(cluster, "events", p, len(expected[p])) == expected[p]
        target = cluster.options["mirror.to"].replace("+", ",")
        for p in (0, 1):
            lag = lambda p=p: mirror_lag(again, target, "events", p) == 0  # noqa: E731
            wait_for(lag, f"no lag of events-{p} in the metrics", timeout=30)
    assert "Traceback" not in again.output()


@pytest.mark.mount
def test_a_mount_forwards_its_appends(tmp_path, cluster):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(tmp_path / "edge", mnt, *mirror_options(cluster)) as daemon:
        (mnt / "lines").mkdir()
        with open(mnt / "lines" / "0" / "append", "w") as f:
            for i in range(100):
                f.write(f"line {i}\n")
                f.flush()
        assert forwarded(cluster, "lines", 0, 100) == [f"line {i}".encode() for i in range(100)]
    assert "Traceback" not in daemon.output()


def test_bad_mirror_options_fail_with_one_line(tmp_path):
    for option, said in [
        ("mirror.to=nowhere", "mirror.to=nowhere: expected kafka://HOST:PORT"),
        ("mirror.to=kafka://h:1,mirror.topics=(", "mirror.topics=("),
        ("mirror.to=kafka://h:1,mirror.bogus=1", "unknown option mirror.bogus"),
        ("mirror.to=kafka://h:1,mirror.sasl.password.file=/nonexistent", "/nonexistent"),
        ("mirror.to=kafka://h:1,mirror.security.protocol=SASL_SSL", "SASL"),
        ("mirror.to=kafka://h:1,mirror.timeout.ms=0", "mirror.timeout.ms=0"),
    ]:
        done = subprocess.run(
            [*LOGFS, "serve", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "-o", option],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1, (option, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, (option, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = subprocess.run(
        [*LOGFS, "mirror", str(tmp_path / "none"), "kafka://127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "no such data directory" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def mirror_lag(served, target: str, topic: str, partition: int) -> float | None:
    """``logfs_mirror_lag_messages`` of one partition as the daemon's metrics serve it."""
    found = re.search(r"serving metrics on http://([\d.]+:\d+)/", served.output())
    if found is None:
        return None
    with urllib.request.urlopen(f"http://{found[1]}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    wanted = {"target": target, "topic": topic, "partition": str(partition)}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "logfs_mirror_lag_messages" and sample.labels == wanted:
                return sample.value
    return None


def log_start(data) -> int:
    """The log start of t-0 as the files say (the checkpoint is written later)."""
    logs = sorted(p.name for p in (data / "t-0").glob("*.log"))
    return int(logs[0][:20])


def produce_300(served) -> None:
    """300 records into t-0 in small batches: many 1 KiB segments for retention."""
    producer = Producer({"bootstrap.servers": served.bootstrap, "batch.size": 500})
    for i in range(300):
        producer.produce("t", b"%040d" % i)
    producer.flush(30)


def test_retention_waits_for_the_mirror_unless_told_not_to(tmp_path):
    with socket.socket() as s:  # a port nothing listens on: the cluster is down
        s.bind(("127.0.0.1", 0))
        down = f"kafka://127.0.0.1:{s.getsockname()[1]}"
    settings = ["log.retention.check.interval.ms=100", "segment.bytes=1024", "retention.ms=1"]
    for wait in ("true", "false"):
        edge = tmp_path / f"edge-{wait}"
        options = [*settings, f"mirror.to={down}", f"mirror.retention.wait={wait}"]
        with Served(edge, *options) as served:
            produce_300(served)
            if wait == "true":
                time.sleep(2)  # twenty retention checks
                assert log_start(edge) == 0 and len(stored(edge, "t")) == 300
            else:
                wait_for(lambda e=edge: log_start(e) > 0, "retention", timeout=30)
        assert "Traceback" not in served.output()


def test_retention_waits_for_a_mirror_run_as_a_process_of_its_own(tmp_path):
    """``logfs mirror DATA ...`` beside a serving daemon: its status file in DATA holds
    the daemon's retention at its position, also once its process is killed (it resumes
    from there); with ``mirror.retention.wait=false``, or its status file removed,
    retention goes on."""
    with socket.socket() as s:  # a port nothing listens on: the cluster is down
        s.bind(("127.0.0.1", 0))
        down = f"kafka://127.0.0.1:{s.getsockname()[1]}"
    settings = ["log.retention.check.interval.ms=100", "segment.bytes=1024", "retention.ms=1"]
    for wait in ("true", "false"):
        edge = tmp_path / f"edge-{wait}"
        with Served(edge, *settings) as served, open(tmp_path / f"mirror-{wait}.log", "ab") as log:
            mirror = subprocess.Popen(
                [*LOGFS, "mirror", str(edge), down, "-o", f"mirror.retention.wait={wait}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
            try:
                wait_for(lambda e=edge: any(e.glob("logfs-mirror.*.json")), "status", timeout=60)
                produce_300(served)
                if wait == "true":
                    time.sleep(2)  # twenty retention checks
                    assert log_start(edge) == 0 and len(stored(edge, "t")) == 300
                    mirror.kill()  # a mirror gone still holds: it resumes from its position
                    mirror.wait(30)
                    time.sleep(2)
                    assert log_start(edge) == 0
                    for status in edge.glob("logfs-mirror.*.json"):
                        status.unlink()  # the operator lets it go
                wait_for(lambda e=edge: log_start(e) > 0, "retention", timeout=30)
            finally:
                mirror.kill()
                mirror.wait(30)
        assert "Traceback" not in served.output()
