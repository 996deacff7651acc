"""The driver of tests/spark/test_spark_cluster.py, run as its own process (one SparkContext per
process): the ``logfs`` source and sink on a standalone cluster, through ``path`` and through
``kafka.bootstrap.servers``, batch and streaming. Prints one JSON line: per way in, the
values each step read back."""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

# Short-lived JVMs: the quick compiler alone, one GC thread (they start faster on few cores).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def main(master: str, data: str, bootstrap: str, checkpoints: str, count: int) -> None:
    spark = (
        SparkSession.builder.master(master)
        .appName("logfs-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.extraJavaOptions", QUICK_JVM)
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.task.maxFailures", "1")
        .getOrCreate()
    )
    out = {}
    ways = {"path": {"path": data}, "network": {"kafka.bootstrap.servers": bootstrap}}
    for way, where in ways.items():
        source, copy = f"in-{way}", f"copy-{way}"
        rows = spark.range(count, numPartitions=4).select(
            F.format_string("%s-%d", F.lit(way), "id").alias("value"),
            F.col("id").cast("string").alias("key"),
        )
        rows.write.format("logfs").options(**where, topic=source).mode("append").save()
        read = spark.read.format("logfs").options(**where, subscribe=source).load()
        query = (
            spark.readStream.format("logfs")
            .options(**where, subscribe=source, startingOffsets="earliest")
            .load()
            .select("key", "value")
            .writeStream.format("logfs")
            .options(**where, topic=copy, checkpointLocation=f"{checkpoints}/{way}")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        if query.exception() is not None:
            raise query.exception()
        copied = spark.read.format("logfs").options(**where, subscribe=copy).load()
        out[way] = {
            "read": sorted(r.value.decode() for r in read.select("value").collect()),
            "copied": sorted(r.value.decode() for r in copied.select("value").collect()),
        }
    # the block managers the driver knows: its own and one per executor
    out["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:5], int(sys.argv[5]))
