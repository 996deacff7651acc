"""Permission errors through a real local[2] SparkSession fail the query, whatever
failOnDataLoss says, as Kafka's source fails on an error that is not data loss:
never rows silently missing, never offsets read twice.

Root ignores file permissions, so the test creates an unprivileged user
(``useradd``) and runs the Spark job as that user (tests/helpers/spark_unprivileged.py),
with its own copy of logfs in a directory it owns.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

USER = "logfs-reader"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reader_user():
    """An unprivileged user to read as (root reads through any permission bits): made
    here when missing, and removed again afterwards if it was made here."""
    try:
        existing = pwd.getpwnam(USER)
    except KeyError:
        existing = None
    if existing is not None:
        yield existing
        return
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
        check=True,
    )
    try:
        yield pwd.getpwnam(USER)
    finally:
        subprocess.run(["userdel", USER], check=False, capture_output=True)


@pytest.fixture
def workdir(reader_user):
    """A directory the reader owns, outside tmp_path (whose parents are root's, 0700),
    with logfs and the job copied in."""
    user = reader_user
    path = Path(tempfile.mkdtemp(prefix="logfs-spark-perm-"))
    shutil.copytree(ROOT / "logfs", path / "logfs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyspark_logfs.py", path)  # Spark registers the format from it
    shutil.copy(ROOT / "tests" / "helpers" / "spark_unprivileged.py", path)
    for directory, _, files in os.walk(path):
        os.chown(directory, user.pw_uid, user.pw_gid)
        for name in files:
            os.chown(os.path.join(directory, name), user.pw_uid, user.pw_gid)
    path.chmod(0o755)
    yield path, user
    shutil.rmtree(path, ignore_errors=True)


def as_user(user: pwd.struct_passwd, *command: str, **kwargs) -> subprocess.CompletedProcess:
    setpriv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return subprocess.run([*setpriv, *command], capture_output=True, text=True, **kwargs)


def interpreter(user: pwd.struct_passwd, env: dict[str, str]) -> str:
    """A Python of this version that ``user`` may run, with this environment's
    packages (a pyenv interpreter under root's home is not one: /root is 0700)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable), f"/usr/bin/{version}"]
    for python in candidates:
        probe = "import numpy, pyarrow, pyspark"
        # through env: exec'd the way Spark starts its workers
        if as_user(user, "env", python, "-c", probe, env=env, timeout=60).returncode == 0:
            return python
    raise AssertionError(f"no Python the user {USER} can run among {candidates}")


def test_permission_errors_fail_spark_reads_for_any_fail_on_data_loss(workdir):
    path, user = workdir
    packages = [p for p in sys.path if p.endswith("-packages")]
    env = {
        "HOME": str(path),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TMPDIR": str(path),
        "PYTHONPATH": os.pathsep.join([str(path), *packages]),
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    env["PYSPARK_PYTHON"] = python = interpreter(user, env)
    done = as_user(
        user, python, str(path / "spark_unprivileged.py"), str(path), env=env, cwd=path, timeout=540
    )
    said = [line for line in done.stderr.splitlines() if not line.startswith(("\tat ", "\t..."))]
    assert done.returncode == 0, "\n".join(said[-60:])
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for fail in ("true", "false"):
        assert results[f"partition directory unreadable, failOnDataLoss={fail}"] == (
            "error: Permission denied"
        )
        assert results[f"segment unreadable, failOnDataLoss={fail}"] == "error: Permission denied"
        assert results[f"segment unreadable after planning, failOnDataLoss={fail}"] == (
            "error: Permission denied"
        )
        assert results[f"stream, directory unreadable, failOnDataLoss={fail}"] == (
            "error: Permission denied; first 100; then exactly 0..104"
        )
