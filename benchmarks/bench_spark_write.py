"""Spark writing N rows into a data directory with a live mount vs into an unmounted one.

Both writes are the same `df.write.format("logfs")` of N rows to a topic of two partitions;
each round does the two back to back (interleaved, so machine load hits both alike) and the
medians are compared. Mounted, every task encodes its rows on the executor and writes whole
batches to the mount's ``append.batches`` (the daemon validates and appends); unmounted,
every task takes the data directory's lock for its flush and appends itself.

Usage: python benchmarks/bench_spark_write.py [--records 2000000] [--rounds 3] [--cores 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "helpers")]

from mount_helpers import wait_live  # noqa: E402
from mounts import logfs_mount  # noqa: E402
from spark_helpers import local_session  # noqa: E402

from logfs import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="logfs-spark-write-") as name:
        tmp = Path(name)
        mounted, unmounted, mnt = tmp / "mounted", tmp / "unmounted", tmp / "mnt"
        mnt.mkdir()
        for data in (mounted, unmounted):
            with Store(data) as store:
                store.create_topic("w", partitions=2)
        spark = local_session(args.cores, "logfs-bench-write")
        df = spark.range(args.records, numPartitions=args.cores).selectExpr(
            "concat('record ', lpad(cast(id as string), 9, '0'), ' some payload text') as value"
        )

        def write(data: Path) -> float:
            start = time.perf_counter()
            df.write.format("logfs").options(path=str(data), topic="w").mode("append").save()
            return time.perf_counter() - start

        times = {"mounted": [], "unmounted": []}
        with logfs_mount(mounted, mnt, tmp / "logfs.log"):
            wait_live(mounted)
            write(unmounted)  # warm-up: the JVM, the Python workers
            for _ in range(args.rounds):
                times["mounted"].append(write(mounted))
                times["unmounted"].append(write(unmounted))
        spark.stop()
        for data in (mounted, unmounted):
            with Store(data, read_only=True) as store:
                written = sum(store.log("w", p).next_offset for p in (0, 1))
            expected = args.records * (args.rounds + (data == unmounted))
            assert written == expected, f"{data.name}: {written} records, expected {expected}"

    m, u = statistics.median(times["mounted"]), statistics.median(times["unmounted"])
    print(
        f"spark write {args.records:,} rows: mounted {args.records / m / 1e6:5.2f} M rows/s "
        f"({m:.2f} s)  unmounted {args.records / u / 1e6:5.2f} M rows/s ({u:.2f} s)  "
        f"mounted/unmounted speed ratio {u / m:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
