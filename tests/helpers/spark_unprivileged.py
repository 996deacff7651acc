"""Spark reads by a user that file permissions apply to (root ignores them).

Run by test_spark_permissions.py as an unprivileged user, in a directory that
user owns: ``python spark_unprivileged.py DIR``. It makes parts of its own data
directory unreadable (chmod 000: an owner who is not root is then refused) and
reads it with a local[2] SparkSession, and prints one JSON object: each case's
outcome, ``"rows N"`` or ``"error: <what the error said>"``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from logfs import Store  # noqa: E402

DENIED = "Permission denied"


def session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("logfs-unprivileged")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    from logfs.spark import LogfsDataSource

    spark.dataSource.register(LogfsDataSource)
    return spark


def fill(data: Path, topic: str, partitions: int, count: int, config=None) -> None:
    with Store(data) as store:
        if topic not in store.topics():
            store.create_topic(topic, partitions, config or {})
        for p in range(partitions):
            store.log(topic, p).append([b"%s-%d-%d" % (topic.encode(), p, i) for i in range(count)])


def outcome(run) -> str:
    try:
        return f"rows {run()}"
    except Exception as e:  # what the query said, for the test to judge
        return described(e)


def described(error: Exception) -> str:
    text = str(error)
    return f"error: {DENIED}" if DENIED in text else f"error: {text[:300]}"


def batch_cases(spark, data: Path) -> dict[str, str]:
    out = {}
    fill(data, "dir", 2, 100)
    for _ in range(10):  # a batch each: several segments
        fill(data, "seg", 1, 30, {"segment.bytes": "2000"})
    read = spark.read.format("logfs").option("path", str(data))
    segments = sorted((data / "seg-0").glob("*.log"))
    for fail in ("true", "false"):
        os.chmod(data / "dir-1", 0)
        df = read.options(subscribe="dir", failOnDataLoss=fail)
        out[f"partition directory unreadable, failOnDataLoss={fail}"] = outcome(
            lambda df=df: df.load().count()
        )
        os.chmod(data / "dir-1", 0o755)
        os.chmod(segments[1], 0)
        df = read.options(subscribe="seg", failOnDataLoss=fail)
        out[f"segment unreadable, failOnDataLoss={fail}"] = outcome(lambda df=df: df.load().count())
        os.chmod(segments[1], 0o644)
        out[f"segment unreadable after planning, failOnDataLoss={fail}"] = after_planning(
            data, fail, segments[1]
        )
    return out


def after_planning(data: Path, fail: str, segment: Path) -> str:
    """The reader's own calls, as Spark makes them: plan, then the file goes, then read."""
    from logfs.spark.options import parse_options
    from logfs.spark.read import LogfsBatchReader

    options = {"path": str(data), "subscribe": "seg", "failOnDataLoss": fail}
    reader = LogfsBatchReader(parse_options(options, streaming=False))
    partitions = reader.partitions()
    os.chmod(segment, 0)
    try:
        return outcome(lambda: sum(b.num_rows for p in partitions for b in reader.read(p)))
    finally:
        os.chmod(segment, 0o644)


def stream_case(spark, data: Path, fail: str) -> str:
    """A processingTime stream whose partition directory is unreadable for a while:
    the query fails with the error; restarted from its checkpoint it reads on exactly
    where it was (no offset read twice, none skipped)."""
    topic = f"stream-{fail}"
    fill(data, topic, 1, 100)
    seen: list[int] = []

    def start():
        return (
            spark.readStream.format("logfs")
            .options(path=str(data), subscribe=topic, startingOffsets="earliest")
            .option("failOnDataLoss", fail)
            .load()
            .writeStream.foreachBatch(lambda df, _: seen.extend(r.offset for r in df.collect()))
            .option("checkpointLocation", str(data.parent / f"checkpoint-{fail}"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    query = start()
    query.processAllAvailable()
    first = len(seen)
    fill(data, topic, 1, 5)
    os.chmod(data / f"{topic}-0", 0)
    try:
        try:
            ended = query.awaitTermination(120)
            said = "no error" if ended else "still running after 120 s"
        except Exception as e:  # the query failed: with what
            said = described(e)
    finally:
        query.stop()
        os.chmod(data / f"{topic}-0", 0o755)
    query = start()
    query.processAllAvailable()
    query.stop()
    exact = sorted(seen) == list(range(105))
    return f"{said}; first {first}; then {'exactly 0..104' if exact else sorted(seen)}"


def main() -> None:
    data = Path(sys.argv[1]) / "data"
    spark = session()
    started = time.monotonic()
    try:
        results = batch_cases(spark, data)
        for fail in ("true", "false"):
            results[f"stream, directory unreadable, failOnDataLoss={fail}"] = stream_case(
                spark, data, fail
            )
    finally:
        spark.stop()
    results["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
