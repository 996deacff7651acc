"""Spark batch read of N records from logfs vs ``spark.read.text`` of the same values.

Both sources hold the same N values (one topic-partition in logfs, one line each in a text
file); each round times the same two queries back to back (interleaved, so machine load hits
both alike) and the medians are compared. A third source, ``logfs_replay``
(replay_source.py), yields logfs's own Arrow batches from memory without decoding: the
bound of any Python data source.

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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "helpers"), str(HERE)]

import os  # noqa: E402

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
        # The workers import replay_source from this directory.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(HERE), os.environ.get("PYTHONPATH")])
        )
        spark = local_session(args.cores, "logfs-bench")
        from replay_source import ReplaySource

        spark.dataSource.register(ReplaySource)
        frames = {
            source: spark.read.format(source).options(path=str(data), subscribe="bench").load()
            for source in ("logfs", "logfs_replay")
        }
        frames["text"] = spark.read.text(str(text))
        queries = {
            "count": lambda df: df.count(),
            "sum(length)": lambda df: df.select(F.sum(F.length("value"))).collect(),
        }
        for _ in range(2):  # warms all up; the second fills every worker's replay cache
            assert all(df.count() == args.records for df in frames.values())
        for name, query in queries.items():
            got = {source: [] for source in frames}
            for _ in range(args.rounds):
                for source, df in frames.items():
                    got[source].append(timed(lambda q=query, df=df: q(df)))
            s = {source: statistics.median(times) for source, times in got.items()}
            rate = {source: args.records / t / 1e6 for source, t in s.items()}
            print(
                f"{name:12} logfs {rate['logfs']:5.2f} M rows/s  text {rate['text']:5.2f}"
                f"  replay {rate['logfs_replay']:5.2f}  logfs/text speed ratio"
                f" {s['text'] / s['logfs']:.2f}  logfs/replay {s['logfs_replay'] / s['logfs']:.2f}",
                flush=True,
            )
        spark.stop()


if __name__ == "__main__":
    main()
