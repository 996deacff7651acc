"""A local SparkSession for tests and benchmarks, set up so Python workers find logfs."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def local_session(cores: int = 2, name: str = "logfs-tests"):
    """A ``local[cores]`` session: UI off, UTC, workers on this interpreter with the checkout on
    their path (so Spark also auto-registers ``pyspark_logfs``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )


# A user's job, run from another directory (spark/test_spark_anywhere.py, system/test_wheel.py).
# No logfs import and no register(): Spark must find the source and the workers logfs alone.
JOB = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    data = sys.argv[1]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    rows = [("k1", "a"), ("k2", "b"), (None, "c")]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.format("logfs").option("path", data).option("topic", "t").mode("append").save()
    df = spark.read.format("logfs").option("path", data).option("subscribe", "t").load()
    got = sorted(
        ((r.key.decode() if r.key is not None else None, r.value.decode(), r.offset)
         for r in df.collect()),
        key=lambda r: r[1],
    )
    print("ROWS " + json.dumps(got))
    print("NOT_IMPORTED " + json.dumps("logfs" not in sys.modules))
    spark.stop()
    """
)
