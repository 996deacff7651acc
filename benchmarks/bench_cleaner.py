"""Cleaning speed of a compacted topic against a plain copy of the same
segment files (the bytes the cleaner must at least read and write),
interleaved over several rounds.

Writes one compacted partition of ``--records`` 100-byte values over
``--keys`` keys (uniformly drawn: most records are superseded), then each
round restores the uncleaned data directory (not timed), cleans it with
`cleaner.clean_store` (what ``logfs compact`` runs) and copies the segments'
``.log`` files with `shutil.copyfile`.

    python benchmarks/bench_cleaner.py [--records 1000000] [--keys 50000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from logfs import Store
from logfs.core.log import cleaner


def measure(records: int, keys: int, rounds: int) -> tuple[float, list[float], list[float]]:
    """MB of cleanable segments; seconds per cleaning and per copy, per round."""
    with tempfile.TemporaryDirectory(prefix="logfs-bench-") as name:
        tmp = Path(name)
        pristine = tmp / "pristine"
        with Store(pristine) as store:
            store.create_topic(
                "c", 1, {"cleanup.policy": "compact", "segment.bytes": str(64 << 20)}
            )
            log = store.log("c", 0)
            drawn = np.random.default_rng(1).integers(0, keys, records)
            value = b"v" * 100
            for i in range(0, records, 1000):
                chunk = drawn[i : i + 1000]
                log.append([value] * len(chunk), keys=[b"key-%09d" % k for k in chunk])
            log.roll()  # everything cleanable
            files = [Path(s.log_path).name for s in log.segments[:-1]]
            size = sum(s.size for s in log.segments[:-1])
        clean, copy = [], []
        for _ in range(rounds):
            work = tmp / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(pristine, work)
            with Store(work) as store:
                t = time.perf_counter()
                cleaner.clean_store(store, force=True, now_ms=int(time.time() * 1000) + 1000)
                clean.append(time.perf_counter() - t)
            t = time.perf_counter()
            for file in files:
                shutil.copyfile(pristine / "c-0" / file, tmp / "copy.log")
            copy.append(time.perf_counter() - t)
        return size / 1e6, clean, copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mb, clean, copy = measure(args.records, args.keys, args.rounds)
    c, p = statistics.median(clean), statistics.median(copy)
    print(f"cleaning {args.records:,} records over {args.keys:,} keys ({mb:.0f} MB)")
    print(f"  clean {mb / c:.0f} MB/s, plain copy {mb / p:.0f} MB/s: {p / c:.3f} of a copy")


if __name__ == "__main__":
    main()
