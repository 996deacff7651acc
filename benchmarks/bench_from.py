"""Time to the first byte of ``from/<n>`` near the end of a large partition,
against ``offset/<n>`` of the same record, and against the same read on a
small partition (flat in the log size?).

Builds partitions of 100 k and ``--records`` 100-byte records (1 GiB
segments, as Kafka's default), then per round mounts the data directory
afresh (its segments loaded from disk, nothing counted yet) and times, in
rotating order, open + first read of ``from/<end-100>`` and of
``offset/<end-100>`` on each.

    python benchmarks/bench_from.py [--records 10000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mounts import logfs_mount

from logfs import Store


def build(data: Path, sizes: dict[str, int]) -> None:
    chunk = [b"%099d" % i for i in range(10_000)]
    with Store(data) as store:
        for topic, count in sizes.items():
            store.create_topic(topic, 1)
            log = store.log(topic, 0)
            while log.next_offset < count:
                log.append(chunk[: count - log.next_offset])


def first_read(path: Path) -> float:
    t = time.perf_counter()
    with open(path, "rb") as f:
        f.read(4096)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = {"small": 100_000, "big": args.records}
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="logfs-bench-") as name:
        tmp = Path(name)
        data, mnt = tmp / "data", tmp / "mnt"
        mnt.mkdir()
        build(data, sizes)
        for r in range(args.rounds):
            with logfs_mount(data, mnt, tmp / "logfs.log"):
                reads = [(t, kind) for t in sizes for kind in ("from", "offset")]
                for topic, kind in reads[r % len(reads) :] + reads[: r % len(reads)]:
                    path = mnt / topic / "0" / kind / str(sizes[topic] - 100)
                    times.setdefault((topic, kind), []).append(first_read(path))
    for topic, count in sizes.items():
        f = statistics.median(times[(topic, "from")])
        o = statistics.median(times[(topic, "offset")])
        print(f"{count:>12,} records: from/<n> first byte {f * 1e3:.2f} ms, "
              f"offset/<n> {o * 1e3:.2f} ms (from/offset {f / o:.2f})")  # fmt: skip
    big = statistics.median(times[("big", "from")])
    small = statistics.median(times[("small", "from")])
    print(f"from/<n> at {args.records:,} vs 100,000 records: {big / small:.2f}x")


if __name__ == "__main__":
    main()
