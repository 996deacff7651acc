"""Spark batch reads of logfs against ``spark.read.text`` of the same lines, in one session.

N records of V-byte values in P partitions of one topic, and the same values as the lines of
P text files. Each round times every query back to back (so machine load hits them alike);
the figures are the medians of the rounds, and each ratio is the median of the rounds'
ratios ``text time / logfs time`` (1.0: as fast as Spark's own text reader).

    count                df.count()   (a Python data source gets no column pruning)
    sum(length(value))   both sources read every value

logfs is read through ``path`` and, with ``--network``, through ``kafka.bootstrap.servers``
(a ``logfs serve`` of the same data directory started here), with ``includeHeaders`` off and
on (the topic has no headers). A fourth source, ``logfs_replay`` (replay_source.py), yields
logfs's own Arrow batches from memory, decoded once per worker: what any Python data source
costs in Spark (planning, the Python workers, the Arrow batches' way into the JVM and each row's
conversion there), the bound of logfs's speed.

Usage: python benchmarks/bench_spark.py [--records 5200000] [--partitions 8]
       [--value-bytes 100] [--rounds 5] [--cores 2] [--network]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "helpers"), str(HERE)]

from pyspark.sql import functions as F  # noqa: E402
from spark_helpers import local_session  # noqa: E402

from logfs import Store  # noqa: E402

APPEND_CHUNK = 20_000
SERVING = re.compile(r"^serving .* on (\S+):(\d+)$", re.M)


def fill(data: Path, text: Path, records: int, partitions: int, value_bytes: int) -> None:
    """``records`` values spread evenly over the partitions, and the same values as lines."""
    text.mkdir()
    with Store(data) as store:
        store.create_topic("bench", partitions=partitions)
        for p in range(partitions):
            log = store.log("bench", p)
            count = records // partitions + (p < records % partitions)
            with (text / f"part-{p}.txt").open("wb") as out:
                for start in range(0, count, APPEND_CHUNK):
                    values = [
                        (b"%d-%09d " % (p, i)).ljust(value_bytes, b"x")
                        for i in range(start, min(count, start + APPEND_CHUNK))
                    ]
                    log.append(values)
                    out.write(b"\n".join(values) + b"\n")


def serve(data: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """``logfs serve DATA --listen 127.0.0.1:0``; returns the process and its address."""
    out = log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "logfs.cli", "serve", str(data), "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while (found := SERVING.search(log.read_text(errors="replace"))) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"logfs serve did not start: {log.read_text()}")
        time.sleep(0.05)
    return proc, f"{found.group(1)}:{found.group(2)}"


def timed(query) -> float:
    start = time.perf_counter()
    query()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--network", action="store_true", help="also kafka.bootstrap.servers")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data, text = Path(tmp) / "data", Path(tmp) / "text"
        t = time.perf_counter()
        fill(data, text, args.records, args.partitions, args.value_bytes)
        took = time.perf_counter() - t
        print(f"wrote {args.records:,} records of {args.value_bytes} bytes in "
              f"{args.partitions} partitions in {took:.1f} s", flush=True)  # fmt: skip
        server = None
        # The workers import replay_source from this directory.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(HERE), os.environ.get("PYTHONPATH")])
        )
        spark = local_session(args.cores, "logfs-bench")
        try:
            from replay_source import ReplaySource

            spark.dataSource.register(ReplaySource)
            sources = {"text": spark.read.text(str(text))}
            places = {"path": {"path": str(data)}}
            if args.network:
                server, bootstrap = serve(data, Path(tmp) / "serve.log")
                places["network"] = {"kafka.bootstrap.servers": bootstrap}
            for place, where in places.items():
                for headers in ("false", "true"):
                    name = place + (" +headers" if headers == "true" else "")
                    sources[name] = (
                        spark.read.format("logfs").options(**where)
                        .options(subscribe="bench", includeHeaders=headers).load()
                    )  # fmt: skip
            sources["replay (no decoding)"] = (
                spark.read.format("logfs_replay").options(path=str(data), subscribe="bench").load()
            )
            queries = {
                "count": lambda df: df.count(),
                "sum(length(value))": lambda df: df.select(F.sum(F.length("value"))).collect(),
            }
            for _ in range(2):  # warms all up; the second fills every worker's replay cache
                for df in sources.values():
                    assert df.count() == args.records
            for name, query in queries.items():
                times = {source: [] for source in sources}
                for _ in range(args.rounds):
                    for source, df in sources.items():
                        times[source].append(timed(lambda q=query, df=df: q(df)))
                text_s = statistics.median(times["text"])
                print(f"{name}: text {text_s:.2f} s ({args.records / text_s / 1e6:.2f} M rows/s)")
                for source in sources:
                    if source == "text":
                        continue
                    s = statistics.median(times[source])
                    ratio = statistics.median(
                        t / s for t, s in zip(times["text"], times[source], strict=True)
                    )
                    rate = args.records / s / 1e6
                    print(f"  logfs {source:22} {s:5.2f} s ({rate:.2f} M rows/s)"
                          f"  speed ratio to text {ratio:.2f}", flush=True)  # fmt: skip
        finally:
            spark.stop()
            if server is not None:
                server.terminate()
                server.wait(30)


if __name__ == "__main__":
    main()
