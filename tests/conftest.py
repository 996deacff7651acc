"""Suite-wide hooks and fixtures: those tests of more than one room use. The
helper modules (tests/helpers, on the path by pyproject's ``pythonpath``) are
imported by name."""

import shutil
import tempfile
from pathlib import Path

import pytest
import stress


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for every Spark test (tests/helpers/spark_helpers.py)."""
    from spark_helpers import local_session

    session = local_session()
    yield session
    session.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A certificate authority and the certificates it signed, for TLS (kafka_helpers.make_pki)."""
    from kafka_helpers import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def shared():
    """A directory every user can traverse, with a ``mnt`` in it: tmp_path's parents are
    root's, 0700, and other users (nginx's workers, a test's unprivileged user) must reach it."""
    path = Path(tempfile.mkdtemp(prefix="logfs-shared-"))
    path.chmod(0o755)
    (path / "mnt").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """The reliability suites' tallies, once every test that counts has run."""
    stress.report_tallies()
