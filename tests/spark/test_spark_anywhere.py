"""The installed data source as a new user meets it: a job run with the venv's Python from
another directory, with nothing set by hand, finds ``format("logfs")`` without ``register()``
and its Python workers import logfs (pyproject's package-dir, the .pth line that setup.py
installs with logfs); and `register` says what to set when the workers' Python cannot import
logfs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from spark_helpers import JOB

from logfs import Store
from logfs.spark.source import WorkerPythonError, check_worker_python, register

ROOT = Path(__file__).resolve().parents[2]


def new_user_env() -> dict[str, str]:
    """This environment without the venv on PATH and without the variables a user would set."""
    venv_bin = os.path.dirname(sys.executable)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    env["PATH"] = os.pathsep.join(
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and os.path.abspath(p) != venv_bin and ".venv" not in Path(p).parts
    )
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


@pytest.mark.spark
def test_a_job_elsewhere_finds_the_source_and_its_workers_import_logfs(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "job.py").write_text(JOB)
    data = tmp_path / "data"
    assert ROOT not in elsewhere.parents
    done = subprocess.run(
        [sys.executable, "job.py", str(data)],
        cwd=elsewhere,
        env=new_user_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert done.returncode == 0 and "ROWS" in out, done.stdout + done.stderr[-4000:]
    rows = json.loads(out["ROWS"])  # (key, value, offset) by value; two tasks wrote them
    assert [r[:2] for r in rows] == [["k1", "a"], ["k2", "b"], [None, "c"]]
    assert sorted(r[2] for r in rows) == [0, 1, 2]
    assert json.loads(out["NOT_IMPORTED"]) is True  # the driver never imported logfs
    with Store(data, read_only=True) as store:
        assert store.topics() == {"t": 1}
        assert sorted(r.value for r in store.log("t", 0).scan()) == [b"a", b"b", b"c"]


class FakeSession:
    """What `register` touches of a SparkSession."""

    def __init__(self, python: str, master: str = "local[2]"):
        self.sparkContext = SimpleNamespace(master=master, pythonExec=python)
        self.registered: list[type] = []
        self.dataSource = SimpleNamespace(register=self.registered.append)


def test_register_accepts_the_drivers_own_python():
    session = FakeSession(sys.executable)
    register(session)
    assert [cls.name() for cls in session.registered] == ["logfs"]


def test_register_says_what_to_set_when_the_workers_python_lacks_logfs(tmp_path):
    other = tmp_path / "python3"
    other.write_text("#!/bin/sh\nexit 1\n")
    other.chmod(0o755)
    session = FakeSession(str(other))
    with pytest.raises(WorkerPythonError) as e:
        register(session)
    assert f"PYSPARK_PYTHON={sys.executable}" in str(e.value)
    assert f"{other}, which cannot import logfs" in str(e.value)
    assert session.registered == []


def test_a_missing_worker_python_is_named():
    with pytest.raises(WorkerPythonError, match="'no-such-python-here' \\(not found\\)"):
        check_worker_python("no-such-python-here")


def test_register_does_not_probe_a_cluster():
    """Executors' interpreters are on other machines: nothing to check from the driver."""
    session = FakeSession("no-such-python-here", master="spark://head:7077")
    register(session)
    assert len(session.registered) == 1
