"""A real Prometheus server (Debian's ``prometheus``, installed by
mount_scripts/install.sh) scrapes a daemon's ``-o metrics=`` every second while shell
writers append through the mount, a Kafka producer produces and a consumer group
reads and commits; queries through Prometheus's HTTP API then give the counts that
were written and read, the end offsets, and the lag the group's commits make."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from kafka_helpers import mounted
from mount_helpers import sh

from logfs.core.log import Store

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
pytestmark = pytest.mark.mount


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_address(daemon) -> str:
    """The endpoint's address, as the daemon logs it once bound (``metrics=127.0.0.1:0``)."""
    deadline = time.monotonic() + 30
    while not (found := re.search(r"serving metrics on http://([\d.]+:\d+)/", daemon.output())):
        assert time.monotonic() < deadline, daemon.output()
        time.sleep(0.05)
    return found[1]


@contextlib.contextmanager
def prometheus(tmp: Path, target: str):
    """Prometheus on a free loopback port, scraping ``target`` every second."""
    assert Path(PROMETHEUS).exists(), "prometheus is not installed (mount_scripts/install.sh)"
    config = tmp / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: logfs\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = free_port()
    with open(tmp / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{url}/-/ready", timeout=5) as answer,
            ):
                if answer.status == 200:
                    break
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()
            assert time.monotonic() < deadline, (tmp / "prometheus.log").read_text()
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def query(url: str, promql: str) -> dict[tuple, float]:
    """An instant query through Prometheus's HTTP API: labels -> value."""
    address = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(address, timeout=10) as answer:
        reply = json.load(answer)
    assert reply["status"] == "success", reply
    return {
        tuple(
            sorted(
                (k, v) for k, v in r["metric"].items() if k not in ("job", "instance", "__name__")
            )
        ): (float(r["value"][1]))
        for r in reply["data"]["result"]
    }


def eventually(url: str, promql: str, expected, timeout: float = 60) -> dict:
    """The query's answer once it equals ``expected`` (Prometheus scrapes every second)."""
    deadline = time.monotonic() + timeout
    while (found := query(url, promql)) != expected:
        assert time.monotonic() < deadline, f"{promql}: {found} != {expected}"
        time.sleep(0.5)
    return found


def test_prometheus_sees_what_was_written_read_and_committed(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt, "metrics=127.0.0.1:0") as (daemon, bootstrap):
        target = metrics_address(daemon)
        with prometheus(tmp_path, target) as url:
            eventually(url, 'up{job="logfs"}', {(): 1.0})
            # Shell writers: 400 one-line write()s (echo) and one write() of 3 lines (cat).
            (mnt / "shell").mkdir()
            # Scraped before the writes: the topic's counters start at 0, so that the
            # writes show as an increase (rate) however fast they go.
            zero = {(("topic", "shell"),): 0.0}
            eventually(url, 'kafka_server_brokertopicmetrics_messagesin_total{topic="shell"}', zero)
            sh(f"for i in $(seq 1 200); do echo line-$i >> {mnt}/shell/0/append; done & "
               f"for i in $(seq 1 200); do echo LINE-$i >> {mnt}/shell/0/append; done; wait; "
               f"printf 'a\\nbb\\nccc\\n' > {tmp_path}/three; cat {tmp_path}/three >> "
               f"{mnt}/shell/0/append", timeout=120)  # fmt: skip
            shell_bytes = sum(len(f"line-{i}\n") + len(f"LINE-{i}\n") for i in range(1, 201))
            shell_bytes += len("a\nbb\nccc\n")
            # A Kafka producer: 300 records over two partitions.
            sh(f"mkdir {mnt}/kt && mkdir {mnt}/kt/1")
            zero = {(("topic", "kt"),): 0.0}
            eventually(url, 'kafka_server_brokertopicmetrics_messagesin_total{topic="kt"}', zero)
            producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
            for i in range(300):
                producer.send("kt", value=b"record-%03d" % i, partition=i % 2)
            producer.flush()
            producer.close()
            # A consumer group reads everything, then commits 100 and 40.
            consumer = KafkaConsumer(
                "kt", bootstrap_servers=bootstrap, group_id="readers",
                auto_offset_reset="earliest", enable_auto_commit=False,
                consumer_timeout_ms=3000,
            )  # fmt: skip
            got, deadline = 0, time.monotonic() + 60
            while got < 300 and time.monotonic() < deadline:
                got += sum(1 for _ in consumer)
            assert got == 300
            committed = {0: 100, 1: 40}
            consumer.commit(
                {
                    TopicPartition("kt", p): OffsetAndMetadata(o, "", -1)
                    for p, o in committed.items()
                }
            )
            consumer.close()

            shell = {(("topic", "shell"),): 403.0}
            eventually(
                url, 'kafka_server_brokertopicmetrics_messagesin_total{topic="shell"}', shell
            )
            eventually(
                url,
                'kafka_server_brokertopicmetrics_bytesin_total{topic="shell"}',
                {(("topic", "shell"),): float(shell_bytes)},
            )
            eventually(
                url,
                'kafka_server_brokertopicmetrics_messagesin_total{topic="kt"}',
                {(("topic", "kt"),): 300.0},
            )
            eventually(
                url,
                'kafka_log_log_logendoffset{topic="kt"}',
                {(("partition", "0"), ("topic", "kt")): 150.0,
                 (("partition", "1"), ("topic", "kt")): 150.0},
            )  # fmt: skip
            eventually(
                url,
                'kafka_consumergroup_lag{consumergroup="readers"}',
                {(("consumergroup", "readers"), ("partition", str(p)), ("topic", "kt")): 150.0 - o
                 for p, o in committed.items()},
            )  # fmt: skip
            writes = query(url, "logfs_mount_writes_total")
            assert writes[(("path", "line"),)] == 400  # each echo: the one-line path
            assert writes[(("path", "general"),)] >= 1
            fuse_writes = query(
                url, 'logfs_fuse_request_seconds_count{operation="write",file="AppendFile"}'
            )
            assert list(fuse_writes.values()) == [401.0]
            # Every record the consumer read went out, at least once.
            with Store(data, read_only=True) as store:
                size = sum(store.log("kt", p).size_bytes for p in (0, 1))
            out = query(url, 'kafka_server_brokertopicmetrics_bytesout_total{topic="kt"}')
            assert out[(("topic", "kt"),)] >= size
            requests = query(url, "kafka_network_requestmetrics_requests_total")
            for name in ("Produce", "Fetch", "OffsetCommit", "JoinGroup", "Metadata"):
                assert requests[(("request", name),)] >= 1, requests
            count = query(url, 'kafka_network_requestmetrics_totaltimems_count{request="Produce"}')
            assert list(count.values()) == [requests[(("request", "Produce"),)]]
            # Rates as a dashboard draws them, and the process's own figures.
            # (over the whole test: on a loaded machine the writes may be a minute old by now)
            rate = query(url, "sum(rate(kafka_server_brokertopicmetrics_messagesin_total[10m]))")
            assert rate[()] > 0
            assert query(url, "process_open_fds")[()] > 0
            assert query(url, "process_resident_memory_bytes")[()] > 10e6
            assert query(url, "kafka_controller_kafkacontroller_offlinepartitionscount") == {
                (): 0.0
            }
