#!/usr/bin/env bash
# Install what logfs needs, then lint and run the whole test suite.
#
#   bash mount_scripts/test.sh [pytest args...]     (as root, or with sudo)
#
# Runs `ruff check` over the code, `cython-lint` over the Cython sources (.pyx, .pxd)
# and `python -m pytest -q` over tests/ with any arguments passed through (e.g. -x,
# -k spark, -m "not mount"). Then a short
# second pass of the suites that build paths, with pytest's temp dir at a fresh
# `<mktemp -d>/pytest-0/t-0`: what a machine where pytest never ran gives, so no
# test may depend on its temp dir's name or on what ran before (the directory
# is removed afterwards). Exits with pytest's code (the first pass's, else the
# second's), or 1 if both passed but a lint did not. "No tests ran" (pytest's
# exit 5) is a failure in either pass. .ci/run runs exactly this.
set -uo pipefail

# The suites that build paths under tmp_path (data directories, mount points,
# segment files) and finish in well under a minute together.
FRESH_SUITES=(
    tests/core/log/test_failure.py tests/test_cli.py tests/core/storage/test_corruption.py
    tests/core/log/test_store.py tests/core/log/test_log.py tests/core/log/test_lines.py
    tests/core/storage/test_index.py tests/daemon/test_flusher.py tests/mount/test_operations.py
    tests/mount/test_from.py tests/core/client/test_mount_record.py
)

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

LOGFS_TEST_TOOLS=1 bash mount_scripts/install.sh || exit 1

echo "test: ruff check logfs tests benchmarks"
.venv/bin/ruff check --no-cache logfs tests benchmarks
lint=$?

mapfile -t cython_sources < <(find logfs -name '*.pyx' -o -name '*.pxd' | sort)
echo "test: cython-lint ${cython_sources[*]}"
# cython-lint runs pycodestyle by name: the venv's, on PATH
PATH="$PWD/.venv/bin:$PATH" .venv/bin/cython-lint "${cython_sources[@]}" || lint=1

echo "test: python -m pytest -q $*"
.venv/bin/python -m pytest -q "$@"
rc=$?

fresh=$(mktemp -d) || exit 1
trap 'rm -rf --one-file-system "$fresh"' EXIT
mkdir "$fresh/pytest-0" || exit 1
echo "test: python -m pytest -q --basetemp=$fresh/pytest-0/t-0 (the suites that build paths)"
.venv/bin/python -m pytest -q -p no:cacheprovider --basetemp="$fresh/pytest-0/t-0" "${FRESH_SUITES[@]}"
fresh_rc=$?

if ((rc == 5)); then
    echo "test: FAILED: pytest collected no tests"
elif ((rc != 0)); then
    echo "test: FAILED: pytest exited $rc"
elif ((fresh_rc == 5)); then
    echo "test: FAILED: the fresh temp dir pass collected no tests"
    rc=5
elif ((fresh_rc != 0)); then
    echo "test: FAILED: the fresh temp dir pass exited $fresh_rc"
    rc=$fresh_rc
elif ((lint != 0)); then
    echo "test: FAILED: ruff or cython-lint found problems (above)"
    rc=1
fi
exit "$rc"
