"""The logfs data source in a real local[2] SparkSession: reads, writes, streams."""

from __future__ import annotations

import collections

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from logfs import Store
from logfs.spark import register

pytestmark = pytest.mark.spark

SCHEMA = [
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
]
COLUMNS = "key, value, topic, partition, offset, unix_millis(timestamp) AS ts, timestampType"


def fill(path, topic="orders", partitions=2, per_partition=50, headers=False):
    """Records with keys, explicit timestamps and (optionally) headers, through the store."""
    with Store(path) as store:
        store.create_topic(topic, partitions=partitions)
        for p in range(partitions):
            log = store.log(topic, p)
            for chunk in range(0, per_partition, 20):
                n = min(20, per_partition - chunk)
                log.append(
                    [f"v{p}-{chunk + i}".encode() for i in range(n)],
                    keys=[None if i % 7 == 0 else f"k{i % 3}".encode() for i in range(n)],
                    headers=[[("h", b"%d" % i), ("n", None)] if headers else () for i in range(n)],
                    timestamp=[1_700_000_000_000 + chunk + i for i in range(n)],
                )


def store_rows(path, topic, include_headers=False):
    with Store(path, read_only=True) as store:
        rows = []
        for p in range(store.topics()[topic]):
            for rec in store.log(topic, p).scan():
                row = (rec.key, rec.value, topic, p, rec.offset, rec.timestamp, 0)
                if include_headers:
                    row += ([(k, v) for k, v in rec.headers] or None,)
                rows.append(row)
        return sorted(rows, key=lambda r: (r[3], r[4]))


def spark_rows(df, include_headers=False):
    cols = COLUMNS + (", headers" if include_headers else "")
    rows = [tuple(r) for r in df.selectExpr(*cols.split(", ")).collect()]
    if include_headers:
        rows = [r[:-1] + ([tuple(h) for h in r[-1]] if r[-1] is not None else None,) for r in rows]
    return sorted(rows, key=lambda r: (r[3], r[4]))


def read(spark, path, **options):
    return spark.read.format("logfs").option("path", str(path)).options(**options).load()


def drain(spark, data, checkpoint, topic, sink, **options):
    """A streaming query from the earliest offsets (or its checkpoint) through
    everything there is now (availableNow), each micro-batch to ``sink``."""
    query = (
        spark.readStream.format("logfs")
        .options(path=str(data), subscribe=topic, startingOffsets="earliest", **options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(60)
    assert query.exception() is None


def test_batch_read_matches_the_store(spark, tmp_path):
    fill(tmp_path)
    df = read(spark, tmp_path, subscribe="orders")  # found by auto-registration: no register()
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == SCHEMA
    expected = store_rows(tmp_path, "orders")
    assert spark_rows(df) == expected
    counts = {r["key"]: r["count"] for r in df.groupBy("key").count().collect()}
    assert counts == collections.Counter(row[0] for row in expected)


def test_read_with_headers(spark, tmp_path):
    fill(tmp_path, headers=True, per_partition=10)
    df = read(spark, tmp_path, subscribePattern="ord.*", includeHeaders="true")
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    assert spark_rows(df, True) == store_rows(tmp_path, "orders", True)


def test_starting_and_ending_offsets_json(spark, tmp_path):
    fill(tmp_path, per_partition=30)
    df = read(
        spark,
        tmp_path,
        assign='{"orders": [0, 1]}',
        startingOffsets='{"orders": {"0": 5, "1": -2}}',
        endingOffsets='{"orders": {"0": 8, "1": -1}}',
        minPartitions="4",
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, 5), (0, 6), (0, 7)] + [(1, o) for o in range(30)]
    with pytest.raises(PySparkException, match="can't be latest for batch"):
        read(spark, tmp_path, subscribe="orders", startingOffsets="latest").collect()


def test_write_then_read_back_identical_to_store_writes(spark, tmp_path):
    rows = [(b"k%d" % (i % 4) if i % 5 else None, b"value %d" % i, i % 2) for i in range(40)]
    with Store(tmp_path) as store:
        store.create_topic("direct", partitions=2)
        store.create_topic("viaspark", partitions=2)
        for p in (0, 1):
            mine = [r for r in rows if r[2] == p]
            store.log("direct", p).append([r[1] for r in mine], keys=[r[0] for r in mine])
    df = spark.createDataFrame(rows, "key binary, value binary, partition int").coalesce(1)
    df.write.format("logfs").option("path", str(tmp_path)).option("topic", "viaspark").mode(
        "append"
    ).save()

    def payload(topic):
        got = read(spark, tmp_path, subscribe=topic).select("partition", "offset", "key", "value")
        return sorted(tuple(r) for r in got.collect())  # (partition, offset) are unique

    assert payload("viaspark") == payload("direct")
    assert len(payload("viaspark")) == 40


def test_write_string_columns_topic_column_and_headers(spark, tmp_path):
    df = spark.createDataFrame(
        [("a", "x", "t1", [("h", b"1")]), (None, "y", "t2", [])],
        "key string, value string, topic string, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("logfs").mode("append").save(str(tmp_path))  # topics created on demand
    with Store(tmp_path, read_only=True) as store:
        assert store.topics() == {"t1": 1, "t2": 1}
        assert store.log("t1", 0).read(0)[2:] == (b"a", b"x", (("h", b"1"),))
        assert store.log("t2", 0).read(0)[2:] == (None, b"y", ())


def test_overwrite_and_missing_value_are_clear_errors(spark, tmp_path):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(PySparkException, match="overwrite is not supported"):
        df.write.format("logfs").option("topic", "t").mode("overwrite").save(str(tmp_path))
    with pytest.raises(PySparkException, match="'value' not found"):
        df.selectExpr("value AS v").write.format("logfs").option("topic", "t").mode("append").save(
            str(tmp_path)
        )


def test_write_is_refused_while_another_writer_holds_the_dir(spark, tmp_path):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with Store(tmp_path), pytest.raises(PySparkException, match="one writer process per data"):
        df.write.format("logfs").options(topic="t", lockTimeout="0.2").mode("append").save(
            str(tmp_path)
        )


def test_stream_restarts_from_checkpoint_exactly_once(spark, tmp_path):
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    fill(data, partitions=2, per_partition=45)
    seen: list[tuple[int, int]] = []
    batch_sizes: list[int] = []

    def collect(batch_df, batch_id):
        got = [(r.partition, r.offset) for r in batch_df.select("partition", "offset").collect()]
        seen.extend(got)
        batch_sizes.append(len(got))

    def run():
        drain(spark, data, checkpoint, "orders", collect, maxOffsetsPerTrigger="40")

    run()
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(45)]
    assert max(batch_sizes) <= 40 and len([b for b in batch_sizes if b]) >= 3
    with Store(data) as store:  # more records, and a new partition, while the query is down
        store.log("orders", 0).append([b"late"] * 5)
        store.add_partitions("orders", 3)
        store.log("orders", 2).append([b"new"] * 3)
    run()
    expected = [(p, o) for p, n in ((0, 50), (1, 45), (2, 3)) for o in range(n)]
    assert sorted(seen) == expected  # each record exactly once across both runs


def test_stream_topic_to_topic(spark, tmp_path):
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    fill(data, partitions=2, per_partition=20)

    def run():
        query = (
            spark.readStream.format("logfs")
            .options(path=str(data), subscribe="orders", startingOffsets="earliest")
            .load()
            .select("key", F.upper(F.col("value").cast("string")).alias("value"))
            .writeStream.format("logfs")
            .options(path=str(data), topic="shouted", checkpointLocation=str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(60)
        assert query.exception() is None

    with Store(data) as store:
        store.create_topic("shouted", partitions=1)
    run()
    with Store(data) as store:
        store.log("orders", 1).append([b"v1-late"])
    run()
    with Store(data, read_only=True) as store:
        values = sorted(r.value for r in store.log("shouted", 0).scan())
    expected = [f"V{p}-{i}".encode() for p in (0, 1) for i in range(20)] + [b"V1-LATE"]
    assert values == sorted(expected)


def test_register_by_hand(spark, tmp_path):
    register(spark)
    fill(tmp_path, partitions=1, per_partition=3)
    assert read(spark, tmp_path, subscribe="orders").count() == 3


def test_compacted_topics_read_across_the_gaps_without_data_loss_errors(spark, tmp_path):
    """A streaming query that read a compacted topic up to some offset, and
    resumes after cleaning removed records around and before it, gets every
    record that is left after that offset and no false data-loss error (the
    log start offset does not move when whole segments are cleaned away)."""
    from logfs.core.log.cleaner import clean_store

    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    with Store(data) as store:
        store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1024"})
        log = store.log("c", 0)
        for i in range(300):
            log.append([b"v%d" % i], keys=[b"k%d" % (i % 4)])
    seen: list[int] = []

    def run():
        def collect(df, _):
            seen.extend(r.offset for r in df.select("offset").collect())

        drain(spark, data, checkpoint, "c", collect, maxOffsetsPerTrigger="100")

    run()
    assert sorted(seen) == list(range(300))
    with Store(data) as store:
        log = store.log("c", 0)
        for i in range(300, 400):
            log.append([b"v%d" % i], keys=[b"k%d" % (i % 4)])
        clean_store(store, force=True)
        survivors = [r.offset for r in log.scan()]
        assert len(survivors) < 100 and survivors[0] > 0  # the first segments are gone
    run()
    assert sorted(seen) == list(range(300)) + [o for o in survivors if o >= 300]
    batch = read(spark, data, subscribe="c")  # a batch read of everything left
    assert sorted(r.offset for r in batch.select("offset").collect()) == survivors
