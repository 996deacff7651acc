"""Recovery validation speed after an unclean shutdown, against reading the
same bytes (the physical limit), interleaved over several rounds.

Writes one partition with a large active segment, then for each round drops
the recovery-point checkpoint (as after a crash before any flush) and reopens
the store, which validates every batch (headers, sizes, CRC-32C) and rebuilds
the indexes; the baseline reads the same segment file with plain file I/O,
from the disk as recovery does (recovery drops the cached pages of the part
it validates first, see docs/reliability.md).

    python benchmarks/bench_recovery.py [--mib 512] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from logfs import Store
from logfs.core.log.store import RECOVERY_POINT_FILE


def measure(mib: int, rounds: int) -> tuple[float, list[float], list[float]]:
    """MB of segment; seconds per recovery and per plain read, per round."""
    with tempfile.TemporaryDirectory(prefix="logfs-bench-") as tmp:
        with Store(tmp) as store:
            store.create_topic("t", 1)
            log = store.log("t", 0)
            chunk = [b"%099d" % i for i in range(10_000)]
            while log.size_bytes < mib << 20:
                log.append(chunk)
        segment = next(Path(tmp, "t-0").glob("*.log"))
        size = segment.stat().st_size
        recover, read = [], []
        for _ in range(rounds):
            Path(tmp, RECOVERY_POINT_FILE).unlink()
            t = time.perf_counter()
            Store(tmp).close()
            recover.append(time.perf_counter() - t)
            with open(segment, "rb") as f:
                # Recovery reads the tail from the disk, not the page cache (after a
                # failed fsync the cache may hold pages the disk never got): so does
                # the baseline. The pages are clean here, so the advice drops them.
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                t = time.perf_counter()
                while f.read(1 << 20):
                    pass
            read.append(time.perf_counter() - t)
    return size / 1e6, recover, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    mb, recover, read = measure(args.mib, args.rounds)
    r, b = statistics.median(recover), statistics.median(read)
    print(f"segment: {mb:.0f} MB, {args.rounds} rounds, medians")
    print(f"{'recovery (validate + rebuild indexes)':<40} {mb / r:8.0f} MB/s")
    print(f"{'plain read of the same file':<40} {mb / b:8.0f} MB/s")
    print(f"{'ratio recovery / read':<40} {b / r:8.2f}")


if __name__ == "__main__":
    main()
