"""Suite-wide hooks and fixtures."""

import pytest
import stress


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for every Spark test (tests/spark_helpers.py)."""
    from spark_helpers import local_session

    session = local_session()
    yield session
    session.stop()


def pytest_sessionfinish(session, exitstatus):
    """The reliability suites' tallies, once every test that counts has run."""
    stress.report_tallies()
