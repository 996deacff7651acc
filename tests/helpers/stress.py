"""Scale and figures for the reliability suites (see docs/reliability.md).

``LOGFS_STRESS=long`` scales cycles, durations and examples up from the
reduced form CI runs; ``LOGFS_STRESS_REPORT=FILE`` makes each suite append
one JSON line of figures (cycles run, faults injected, records checked, ...)
to FILE, which `python -m tests.stress FILE` sums up. Suites that count
across many tests keep a `tally`; conftest.py reports every tally once, when
the session finishes.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter, defaultdict

LONG = os.environ.get("LOGFS_STRESS", "") == "long"


def scale(ci, long):
    """``ci`` in the reduced (CI) form, ``long`` with LOGFS_STRESS=long."""
    return long if LONG else ci


def report(suite: str, **figures) -> None:
    """Append the figures of one run of ``suite`` to $LOGFS_STRESS_REPORT."""
    path = os.environ.get("LOGFS_STRESS_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"suite": suite, **figures}) + "\n")


_TALLIES: dict[str, Counter] = {}


def tally(suite: str) -> Counter:
    """Figures of ``suite`` counted across its tests, reported at session end."""
    return _TALLIES.setdefault(suite, Counter())


def report_tallies() -> None:
    """`report` every tally that counted something (called once, by conftest.py)."""
    for suite, figures in _TALLIES.items():
        if figures:
            report(suite, **figures)


def summarize(path: str) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            suite = entry.pop("suite")
            totals[suite]["runs"] += 1
            for key, value in entry.items():
                if isinstance(value, (int, float)) and key.startswith("max_"):
                    totals[suite][key] = max(totals[suite][key], value)
                elif isinstance(value, (int, float)):
                    totals[suite][key] += value
    return {suite: dict(figures) for suite, figures in totals.items()}


if __name__ == "__main__":
    for suite, figures in sorted(summarize(sys.argv[1]).items()):
        print(suite + ": " + ", ".join(f"{k}={v}" for k, v in sorted(figures.items())))
