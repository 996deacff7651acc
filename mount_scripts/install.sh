#!/usr/bin/env bash
# Install what logfs needs on Debian or Ubuntu, and nothing that is already there.
#
#   bash mount_scripts/install.sh        (as root; or: sudo bash mount_scripts/install.sh)
#
# 1. System packages, with apt-get, only those that are missing: FUSE 3 and its
#    headers (pyfuse3 compiles against them), pkg-config, a C compiler with the
#    C library's headers and Python's headers (pyfuse3 and logfs's compiled
#    codec), venv, systemd-analyze (the suite verifies the systemd unit), and a
#    Java runtime for Spark when there is no java; with LOGFS_TEST_TOOLS=1 (set
#    by test.sh) also what only the suite runs: libfiu's fiu-utils (fault
#    injection), nginx (a service logging through the mount), kcat (a Kafka
#    client), strace (the Kafka listener's sendfile), apache2-utils' ab (load
#    on nginx) and prometheus (a server that scrapes the daemon's metrics).
#    `apt-get update` runs only when something is missing.
# 2. A virtual environment in the checkout (.venv) holding logfs with its test and Spark
#    extras, installed by pip as users install it (`pip install -e '.[test,spark]'`),
#    editable so that the suite and .venv/bin/logfs run the checkout's code; pip compiles
#    the Cython modules (every logfs/**/*.pyx, with the .pxd files they cimport) and
#    logfs/mount/fuse/_fuse*.c in place. pip runs only
#    when pyproject.toml, setup.py or those sources have changed since the last install (a stamp
#    .venv/.installed-<hash of them>) or what it installs is missing. The install brings,
#    like a wheel's, logfs-pyspark-python.pth: it sets PYSPARK_PYTHON to the venv's Python
#    (unless already set) whenever it starts, so a job run as .venv/bin/python job.py, from
#    any directory, finds format("logfs") and its workers import logfs (docs/spark.md).
#
# mount_scripts/build_wheels.sh builds wheels instead, for machines without a compiler.
#
# Safe to run again and again; fast (well under a second) when all is in place.
# Runs unattended (CI=true, no stdin). Environment:
#   PYTHON   the interpreter that creates .venv (default: python3)
#   LOGFS_FORCE_PIP=1   run pip even when the stamp matches
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=$ROOT/.venv
PYTHON=${PYTHON:-python3}

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------ system packages

missing=()
need() { missing+=("$@"); }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    [[ $PYTHON == python3 ]] || die "PYTHON=$PYTHON not found"
    need python3 python3-venv python3-dev
else
    # venv needs ensurepip (Debian splits it into python3-venv), pyfuse3 needs Python.h.
    "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || need python3-venv
    "$PYTHON" - >/dev/null 2>&1 <<'EOF' || need python3-dev
import os, sysconfig
raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))
EOF
fi
command -v fusermount3 >/dev/null 2>&1 || need fuse3
command -v pkg-config >/dev/null 2>&1 || need pkg-config
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists fuse3; then
    need libfuse3-dev
fi
command -v gcc >/dev/null 2>&1 || need gcc
# gcc only recommends libc6-dev, and --no-install-recommends below skips it; a Python built
# from source (pyenv, the python:*-slim images) has Python.h without it.
[[ -e /usr/include/stdio.h ]] || need libc6-dev
command -v systemd-analyze >/dev/null 2>&1 || need systemd  # the suite verifies the unit file
if [[ ${LOGFS_TEST_TOOLS:-0} == 1 ]]; then  # set by test.sh: tools only the suite uses
    # libfiu: fiu-run/fiu-ctrl inject I/O errors into a running daemon (tests/system/test_faults.py)
    [[ -e /usr/lib/fiu/fiu_posix_preload.so ]] && command -v fiu-ctrl >/dev/null 2>&1 || need fiu-utils
    # a real service logging through the mount (tests/system/test_services.py)
    [[ -x /usr/sbin/nginx ]] || need nginx
    # Kafka clients and tracing for the Kafka listener's tests (tests/kafka/)
    command -v kcat >/dev/null 2>&1 || need kcat
    command -v strace >/dev/null 2>&1 || need strace
    command -v npm >/dev/null 2>&1 || need nodejs npm  # KafkaJS (installed below, into .venv)
    # ab drives nginx in tests/system/test_services.py and benchmarks/bench_legacy.py
    command -v ab >/dev/null 2>&1 || need apache2-utils
    # a real Prometheus server scrapes the daemon's -o metrics= (tests/metrics/)
    command -v prometheus >/dev/null 2>&1 || need prometheus
fi
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || need ca-certificates  # pip's HTTPS
java_missing=0
command -v java >/dev/null 2>&1 || java_missing=1

java_package() {
    # PySpark 4 needs Java 17 or newer; Ubuntu 22.04's default-jre-headless is 11.
    local dep version
    dep=$(apt-cache depends default-jre-headless 2>/dev/null | sed -n 's/.*Depends: openjdk-\([0-9]*\)-jre-headless.*/\1/p' | head -n 1)
    version=${dep:-0}
    if ((version > 0 && version < 17)) && apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then
        echo openjdk-17-jre-headless
    else
        echo default-jre-headless
    fi
}

if ((${#missing[@]} > 0 || java_missing)); then
    what=("${missing[@]}")
    ((java_missing)) && what+=("a Java runtime")
    wanted=${what[*]}
    if ((EUID != 0)); then
        die "missing system packages ($wanted); run as root (or with sudo): bash mount_scripts/install.sh"
    fi
    command -v apt-get >/dev/null 2>&1 || die "missing $wanted and no apt-get: install them by hand"
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp -t logfs-apt.XXXXXX)
    apt() {
        # Wait for a first-boot unattended-upgrades to let go of the dpkg lock.
        if ! apt-get -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0 -y -q "$@" >>"$log" 2>&1; then
            tail -n 20 "$log" >&2
            die "apt-get $1 failed (full log: $log)"
        fi
    }
    say "apt-get update (missing: $wanted)"
    apt update
    ((java_missing)) && missing+=("$(java_package)")
    say "apt-get install ${missing[*]}"
    services=" ${missing[*]} "
    if [[ ($services == *" nginx "* || $services == *" prometheus "*) && ! -e /usr/sbin/policy-rc.d ]]; then
        # The suite runs its own nginx and Prometheus: the packages must not start theirs
        # on ports 80 and 9090 (policy-rc.d is Debian's switch for packages' services;
        # removed after).
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        apt install --no-install-recommends "${missing[@]}"
        rm -f /usr/sbin/policy-rc.d
    else
        apt install --no-install-recommends "${missing[@]}"
    fi
    rm -f "$log"
fi

# ------------------------------------------------------------ the virtual environment

if [[ ! -e $VENV ]] || ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
    "$PYTHON" -c 'import sys; raise SystemExit(sys.version_info < (3, 11))' \
        || die "logfs needs Python >= 3.11; $PYTHON is older (set PYTHON=...)"
    if [[ -e $VENV ]]; then
        say "$VENV is broken (its Python is gone); recreating it"
    else
        say "creating $VENV"
    fi
    "$PYTHON" -m venv --clear "$VENV"
fi

# pip builds the compiled parts in place (editable install): again when their sources change.
mapfile -t sources < <(find logfs -name '*.pyx' -o -name '*.pxd' | LC_ALL=C sort)
compiled=(logfs/mount/fuse/_fuseinit)
for source in "${sources[@]}"; do
    [[ $source == *.pyx ]] && compiled+=("${source%.pyx}")
done
hash=$(cat pyproject.toml setup.py "${sources[@]}" logfs/mount/fuse/_fuse*.[ch] | sha256sum | cut -c1-16)
stamp=$VENV/.installed-$hash
built=1
for module in "${compiled[@]}"; do
    compgen -G "$module*.so" >/dev/null || built=
done
pth=$(compgen -G "$VENV/lib/python3*/site-packages/logfs-pyspark-python.pth" || true)
if [[ -e $stamp && -x $VENV/bin/logfs && -n $built && -n $pth && ${LOGFS_FORCE_PIP:-0} != 1 ]]; then
    say "system packages and .venv are up to date"
else
    say "pip install -e '.[test,spark]' into .venv (the first time downloads PySpark: a few minutes)"
    log=$(mktemp -t logfs-pip.XXXXXX)
    if ! "$VENV/bin/python" -m pip install --progress-bar off --disable-pip-version-check \
        -e "${ROOT}[test,spark]" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "pip install failed (full log: $log)"
    fi
    rm -f "$log" "$VENV"/.installed-*
    touch "$stamp"
    # Under sudo, hand what pip wrote in the checkout back to the checkout's owner.
    owner=$(stat -c %u:%g "$ROOT")
    if ((EUID == 0)) && [[ $owner != 0:0 ]]; then
        chown -R "$owner" "$VENV" "$ROOT"/*.egg-info 2>/dev/null || true
    fi
    say "done"
fi

# ------------------------------------------------------------ KafkaJS, for the suite only

# A Kafka client in another language for tests/kafka/test_kafka_kafkajs.py, kept inside the venv
# (.venv/node/node_modules) so that nothing outside the checkout changes.
if [[ ${LOGFS_TEST_TOOLS:-0} == 1 && ! -e $VENV/node/node_modules/kafkajs/package.json ]]; then
    say "npm install kafkajs into $VENV/node"
    npm install --silent --no-audit --no-fund --prefix "$VENV/node" kafkajs@2 >/dev/null \
        || die "npm install kafkajs failed"
fi
