"""Suite-wide hooks."""

import stress


def pytest_sessionfinish(session, exitstatus):
    """The reliability suites' tallies, once every test that counts has run."""
    stress.report_tallies()
