#!/bin/bash
# Requests against a DATA of a large shape, through a real mount: a topic of
# 5,000 partitions, a small topic and 3,000 more topics. Prints the time of
# `ls` of the wide topic and of the root, another `cat state`, 20 `mkdir`s,
# and 20 `cat state` while `ls` of the wide topic runs.
#
#   bash benchmarks/bench_shape.sh WORKDIR      (PYTHONPATH: the logfs to measure)
set -e
w=$1
rm -rf "$w" && mkdir -p "$w/mnt"
py=${PYTHON:-python3}
$py - "$w/data" <<'PY'
import sys
from logfs.core.log import Store
with Store(sys.argv[1]) as store:
    store.create_topic("wide", 5000)
    store.create_topic("small")
    for i in range(3000):
        store.create_topic(f"t{i}")
PY
$py -m logfs.cli mount "$w/data" "$w/mnt"
trap '$py -m logfs.cli umount "$w/mnt"' EXIT
seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null; echo "$(date +%s.%N) - $s" | bc; }
ls "$w/mnt/wide" >/dev/null
echo "ls wide: $(seconds ls "$w/mnt/wide") s"
echo "ls MNT: $(seconds ls "$w/mnt") s"
echo "cat small/0/state: $(seconds cat "$w/mnt/small/0/state") s"
s=$(date +%s.%N); for i in $(seq 20); do mkdir "$w/mnt/new$i"; done
echo "mkdir x20: $(echo "$(date +%s.%N) - $s" | bc) s"
(for i in 1 2 3; do ls "$w/mnt/wide" >/dev/null; done) & lister=$!
s=$(date +%s.%N); for i in $(seq 20); do cat "$w/mnt/small/0/state" >/dev/null; done
echo "cat state x20 during ls wide: $(echo "$(date +%s.%N) - $s" | bc) s"
wait $lister
