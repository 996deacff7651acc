"""The ``keys/`` view of a compacted topic: reading a key's file against
reading the same record's ``offset/<n>`` through the same mount, and the
live-key index: memory per key and how fast it is built.

Writes one compacted partition of ``--keys`` keys (100-byte values, each key
written twice), then:

- in process: builds the live-key index (`Log.live_keys`) and measures the
  time and the process's RSS growth per key;
- mounted: ``--reads`` open+read+close of random ``keys/<k>`` and of the same
  records' ``offset/<n>``, interleaved over rounds (medians).

    python benchmarks/bench_keys.py [--keys 1000000] [--reads 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from pathlib import Path

from mounts import logfs_mount

from logfs import Store
from logfs.core.log.keys import key_name


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def build(data: Path, keys: int) -> None:
    with Store(data) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact"})
        log = store.log("c", 0)
        value = b"v" * 100
        for _ in range(2):
            for i in range(0, keys, 10_000):
                n = min(10_000, keys - i)
                log.append([value] * n, keys=[b"key-%09d" % k for k in range(i, i + n)])


def index_cost(data: Path) -> tuple[float, float, int]:
    """Seconds to build the index, RSS bytes per key, keys."""
    with Store(data, read_only=True) as store:
        log = store.log("c", 0)
        gc.collect()
        before = rss_bytes()
        t = time.perf_counter()
        index = log.live_keys()
        seconds = time.perf_counter() - t
        per_key = (rss_bytes() - before) / len(index)
        return seconds, per_key, len(index)


def reads(mnt: Path, keys: int, count: int, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds per ``count`` reads of keys/<k> and of offset/<n>, per round."""
    # never the same record twice: offset/<n> files are immutable, so the kernel
    # caches them for a minute, while keys/<k> (which change) are asked anew
    everything = random.Random(1).sample(range(keys), count * rounds)
    by_key, by_offset = [], []
    for r in range(rounds):
        picks = everything[r * count : (r + 1) * count]
        names = [mnt / "c" / "keys" / key_name(b"key-%09d" % k) for k in picks]
        offsets = [mnt / "c" / "0" / "offset" / str(keys + k) for k in picks]  # the latest
        for paths, out in ((names, by_key), (offsets, by_offset)):
            t = time.perf_counter()
            for path in paths:
                with open(path, "rb") as f:
                    f.read()
            out.append(time.perf_counter() - t)
    return by_key, by_offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="logfs-bench-") as name:
        tmp = Path(name)
        data, mnt = tmp / "data", tmp / "mnt"
        mnt.mkdir()
        build(data, args.keys)
        seconds, per_key, count = index_cost(data)
        rate = count / seconds / 1e6
        print(f"live-key index of {count:,} keys: built in {seconds:.2f} s "
              f"({rate:.2f} M keys/s), {per_key:.0f} bytes of RSS per key")  # fmt: skip
        with logfs_mount(data, mnt, tmp / "logfs.log"):
            (mnt / "c" / "keys" / key_name(b"key-000000000")).read_bytes()  # builds the index
            by_key, by_offset = reads(mnt, args.keys, args.reads, args.rounds)
        k, o = statistics.median(by_key), statistics.median(by_offset)
        print(f"cat keys/<k>: {args.reads / k:,.0f}/s, cat offset/<n>: {args.reads / o:,.0f}/s "
              f"(keys/offset {o / k:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
