#!/usr/bin/env bash
# Install what logfs needs, then lint and run the whole test suite.
#
#   bash mount_scripts/test.sh [pytest args...]     (as root, or with sudo)
#
# Runs `ruff check` over the code and `python -m pytest -q` over tests/ with
# any arguments passed through (e.g. -x, -k spark, -m "not mount"). Exits with
# pytest's code, or 1 if pytest passed but the lint did not. "No tests ran"
# (pytest's exit 5) is a failure. .ci/run runs exactly this.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

LOGFS_TEST_TOOLS=1 bash mount_scripts/install.sh || exit 1

echo "test: ruff check logfs tests benchmarks"
.venv/bin/ruff check --no-cache logfs tests benchmarks
lint=$?

echo "test: python -m pytest -q $*"
.venv/bin/python -m pytest -q "$@"
rc=$?

if ((rc == 5)); then
    echo "test: FAILED: pytest collected no tests"
elif ((rc != 0)); then
    echo "test: FAILED: pytest exited $rc"
elif ((lint != 0)); then
    echo "test: FAILED: ruff found problems (above)"
    rc=1
fi
exit "$rc"
