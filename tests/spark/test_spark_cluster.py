"""Spark on a real cluster: a standalone master and two workers, each its own process started
with the scripts PySpark ships (``bin/spark-class ...Master`` / ``...Worker``, on 127.0.0.1 and
ephemeral ports), a driver process, and a ``logfs serve``. The ``logfs`` source and sink run on
the workers' executors through ``path`` and through ``kafka.bootstrap.servers``, batch and
streaming (availableNow), and every record arrives exactly once. Every process started here is
stopped by its pid, and none is left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from kafka_helpers import Served

from logfs import Store

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "helpers" / "spark_cluster_job.py"
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
COUNT = 2000


def environment(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_WORKER_DIR=str(work / "worker"),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
    )
    return env


class Daemon:
    """One ``spark-class`` process, its output in a file, waited for until a line says so."""

    def __init__(self, name: str, work: Path, *args: str) -> None:
        self.log = work / f"{name}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(SPARK_CLASS), *args], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                env=environment(work), start_new_session=True,
            )  # fmt: skip

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.log.read_text(errors="replace"))) is None:
            assert self.proc.poll() is None, self.log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"no {pattern!r} in {self.log}"
            time.sleep(0.1)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # a worker's shutdown hook ends its executors
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def ours(work: Path) -> list[int]:
    """Pids of live processes whose command line names ``work`` (ours alone use it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if str(work).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_source_and_sink_on_a_standalone_cluster(tmp_path):
    work = tmp_path / "cluster"
    (work / "worker").mkdir(parents=True)
    data, served_data = tmp_path / "data", tmp_path / "served"  # logfs serve holds its DATA
    Store(data).close()
    Store(served_data).close()
    daemons: list[Daemon] = []
    began = time.monotonic()
    try:
        master = Daemon("master", work, "org.apache.spark.deploy.master.Master",
                        "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")  # fmt: skip
        daemons.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)").group(1)
        for n in (1, 2):
            worker = Daemon(f"worker{n}", work, "org.apache.spark.deploy.worker.Worker",
                            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                            "--cores", "1", "--memory", "1g", "--work-dir",
                            str(work / "worker"), url)  # fmt: skip
            daemons.append(worker)
        # The driver starts while the workers register: it waits for their executors.
        driver = work / "driver.log"
        with Served(served_data) as served, driver.open("wb") as log:
            done = subprocess.run(
                [sys.executable, str(JOB), url, str(data),
                 served.bootstrap, str(work / "checkpoints"), str(COUNT)],
                stdout=subprocess.PIPE, stderr=log, env=environment(work), timeout=300,
                cwd=str(work),
            )  # fmt: skip
        assert done.returncode == 0, driver.read_text(errors="replace")[-5000:]
        result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    finally:
        for daemon in reversed(daemons):
            daemon.stop()
    assert result["executors"] == 2  # one per worker: the tasks ran on the cluster
    for way in ("path", "network"):
        expected = sorted(f"{way}-{i}" for i in range(COUNT))
        assert result[way]["read"] == expected  # each record exactly once
        assert result[way]["copied"] == expected
    with Store(data, read_only=True) as store:
        assert store.log("copy-path", 0).next_offset == COUNT
    deadline = time.monotonic() + 30
    while (left := ours(work)) and time.monotonic() < deadline:
        time.sleep(0.2)  # executors leave once their worker has stopped them
    assert left == [], f"processes left behind: {left}"
    print(f"cluster test took {time.monotonic() - began:.0f} s")
