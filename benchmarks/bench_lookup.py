"""In-process lookup latency of ``log.read(n)`` at growing log sizes.

Builds one log per size (100 thousand, 1 million, 10 million records by
default) with the default segment and index settings, then reads random
offsets from each, interleaving the logs round by round so machine noise
hits them alike. Prints p50/p99 per size and the ratio of each p50 to the
smallest log's: flat means only the logarithmic searches grow.

    python benchmarks/bench_lookup.py [--sizes 100000,1000000,10000000] [--reads 20000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

from logfs import Store


def build(store: Store, name: str, count: int) -> None:
    store.create_topic(name, 1)
    log = store.log(name, 0)
    chunk = [b"record-%012d" % i for i in range(10_000)]
    for _ in range(count // len(chunk)):
        log.append(chunk)
    log.flush()


def percentile(samples: list[float], q: float) -> float:
    return sorted(samples)[int(q * (len(samples) - 1))]


def measure(sizes: list[int], reads: int, rounds: int, progress=print) -> dict[int, list[float]]:
    """Microseconds per ``log.read`` of random offsets, per log size."""
    with tempfile.TemporaryDirectory(prefix="logfs-bench-") as tmp:
        store = Store(tmp)
        for size in sizes:
            t = time.perf_counter()
            build(store, f"n{size}", size)
            progress(f"built {size:>10,} records in {time.perf_counter() - t:5.1f} s")
        store.close()
        # Reopen: lookups go through the indexes loaded from disk, as after a restart.
        store = Store(tmp, read_only=True)
        samples: dict[int, list[float]] = {size: [] for size in sizes}
        rng = random.Random(42)
        per_round = reads // rounds
        for _ in range(rounds):
            for size in sizes:
                log = store.log(f"n{size}", 0)
                offsets = [rng.randrange(size) for _ in range(per_round)]
                out = samples[size]
                for offset in offsets:
                    t = time.perf_counter_ns()
                    log.read(offset)
                    out.append((time.perf_counter_ns() - t) / 1000)
        store.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    samples = measure(sizes, args.reads, args.rounds, lambda m: print(m, flush=True))
    base = statistics.median(samples[sizes[0]])
    print(f"\n{'records':>12} {'p50 us':>8} {'p99 us':>8} {'p50 ratio':>10}")
    for size in sizes:
        p50 = statistics.median(samples[size])
        print(f"{size:>12,} {p50:8.1f} {percentile(samples[size], 0.99):8.1f} {p50 / base:10.2f}")


if __name__ == "__main__":
    main()
