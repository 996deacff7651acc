"""Spark batch read of N records from logfs vs ``spark.read.text`` of the same values.

Both sources hold the same N values (one topic-partition in logfs, one line each in a text
file); each round times the same two queries back to back (interleaved, so machine load hits
both alike) and the medians are compared:

    count            df.count()             (Python sources get no column pruning)
    sum(length)      df.select(sum(length(value)))   (both read every value)

Usage: python benchmarks/bench_spark.py [--records 2000000] [--rounds 5] [--cores 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from pyspark.sql import functions as F  # noqa: E402
from spark_helpers import local_session  # noqa: E402

from logfs import Store  # noqa: E402

APPEND_CHUNK = 10_000


def fill(data: Path, text: Path, records: int) -> None:
    with Store(data) as store, text.open("wb") as out:
        store.create_topic("bench", partitions=1)
        log = store.log("bench", 0)
        for start in range(0, records, APPEND_CHUNK):
            values = [
                b"record %09d some payload text" % i
                for i in range(start, min(records, start + APPEND_CHUNK))
            ]
            log.append(values)
            out.write(b"\n".join(values) + b"\n")


def timed(query) -> float:
    start = time.perf_counter()
    query()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data, text = Path(tmp) / "data", Path(tmp) / "values.txt"
        t = time.perf_counter()
        fill(data, text, args.records)
        print(f"wrote {args.records:,} records in {time.perf_counter() - t:.1f} s", flush=True)
        spark = local_session(args.cores, "logfs-bench")
        logfs_df = (
            spark.read.format("logfs").option("path", str(data)).option("subscribe", "bench").load()
        )
        text_df = spark.read.text(str(text))
        queries = {
            "count": lambda df: df.count(),
            "sum(length)": lambda df: df.select(F.sum(F.length("value"))).collect(),
        }
        assert logfs_df.count() == text_df.count() == args.records  # also warms both up
        for name, query in queries.items():
            got = {"logfs": [], "text": []}
            for _ in range(args.rounds):
                got["logfs"].append(timed(lambda q=query: q(logfs_df)))
                got["text"].append(timed(lambda q=query: q(text_df)))
            logfs_s, text_s = statistics.median(got["logfs"]), statistics.median(got["text"])
            print(
                f"{name:12} logfs {args.records / logfs_s / 1e6:5.2f} M rows/s ({logfs_s:.2f} s)"
                f"  text {args.records / text_s / 1e6:5.2f} M rows/s ({text_s:.2f} s)"
                f"  logfs/text speed ratio {text_s / logfs_s:.2f}",
                flush=True,
            )
        spark.stop()


if __name__ == "__main__":
    main()
