"""Spark's Kafka source and sink semantics, case by case, in a real local[2] session:
empty selections, streams starting at latest, deleted topics under AvailableNow,
minOffsetsPerTrigger and maxTriggerDelay, the sink's save modes and column names.
(Damaged data: test_corruption_readers.py; permission errors: test_spark_permissions.py.)"""

from __future__ import annotations

import time

import pytest
from pyspark.sql import functions as F

from logfs import Store

pytestmark = pytest.mark.spark


def fill(path, topic="t", count=10, partitions=1):
    with Store(path) as store:
        if topic not in store.topics():
            store.create_topic(topic, partitions)
        for p in range(partitions):
            log = store.log(topic, p)
            log.append([b"%s-%d" % (topic.encode(), log.next_offset + i) for i in range(count)])


def read(spark, path, **options):
    return spark.read.format("logfs").option("path", str(path)).options(**options).load()


@pytest.mark.parametrize(
    "options",
    [
        {"subscribe": "empty"},  # a topic without records
        {"subscribe": "nosuch"},  # a topic that does not exist
        {"subscribePattern": "zz.*"},  # a pattern that matches nothing
        {  # start = end
            "assign": '{"t": [0]}',
            "startingOffsets": '{"t": {"0": 7}}',
            "endingOffsets": '{"t": {"0": 7}}',
        },
    ],
    ids=["empty topic", "missing topic", "pattern matching nothing", "start equals end"],
)
def test_an_empty_selection_reads_no_rows(spark, tmp_path, options):
    fill(tmp_path)
    fill(tmp_path, "empty", count=0)
    df = read(spark, tmp_path, **options)
    assert df.collect() == []
    assert df.count() == 0


class Collect:
    """A foreachBatch sink that keeps each micro-batch's offsets (the memory sink
    cannot resume from a checkpoint)."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __call__(self, df, batch_id) -> None:
        self.batches.append(sorted(r.offset for r in df.select("offset").collect()))

    @property
    def offsets(self) -> list[int]:
        return sorted(o for batch in self.batches for o in batch)


def stream(spark, path, sink, checkpoint, trigger=None, **options):
    return (
        spark.readStream.format("logfs")
        .options(path=str(path), **options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**(trigger or {"processingTime": "100 milliseconds"}))
        .start()
    )


@pytest.mark.parametrize("starting", [None, "latest", '{"t": {"0": -1}}'])
def test_a_stream_starts_at_latest(spark, tmp_path, starting):
    fill(tmp_path / "data")
    options = {"subscribe": "t"} if starting is None else {
        "subscribe": "t", "startingOffsets": starting}  # fmt: skip
    sink = Collect()
    query = stream(spark, tmp_path / "data", sink, tmp_path / "cp", **options)
    try:
        query.processAllAvailable()  # the start offset is resolved: 10
        fill(tmp_path / "data", count=5)
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.offsets == list(range(10, 15))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_a_deleted_topic_under_available_now(spark, tmp_path, fail):
    data, checkpoint = tmp_path / "data", tmp_path / "cp"
    fill(data, count=20)
    sink = Collect()
    first = stream(spark, data, sink, checkpoint, {"availableNow": True}, subscribe="t",
                   startingOffsets="earliest", failOnDataLoss=fail)  # fmt: skip
    assert first.awaitTermination(120) and first.exception() is None
    assert sink.offsets == list(range(20))
    with Store(data) as store:
        store.delete_topic("t")
    again = stream(spark, data, sink, checkpoint, {"availableNow": True}, subscribe="t",
                   startingOffsets="earliest", failOnDataLoss=fail)  # fmt: skip
    if fail == "true":
        with pytest.raises(Exception, match="t-0 are gone"):
            again.awaitTermination(120)
    else:
        assert again.awaitTermination(120) and again.exception() is None
    assert sink.offsets == list(range(20))


def test_min_offsets_per_trigger_waits_for_enough_offsets(spark, tmp_path):
    data = tmp_path / "data"
    fill(data)
    sink = Collect()
    query = stream(spark, data, sink, tmp_path / "cp", subscribe="t", startingOffsets="earliest",
                   minOffsetsPerTrigger="50", maxTriggerDelay="1h")  # fmt: skip
    try:
        query.processAllAvailable()  # the first batch is never held back (Kafka's too)
        assert sink.batches == [list(range(10))]
        fill(data, count=20)
        query.processAllAvailable()  # 20 < 50 and the delay has not passed: no batch
        assert sink.batches == [list(range(10))]
        fill(data, count=40)
        query.processAllAvailable()
        assert sink.batches == [list(range(10)), list(range(10, 70))]
    finally:
        query.stop()


def test_max_trigger_delay_lets_a_small_batch_through(spark, tmp_path):
    data = tmp_path / "data"
    fill(data)
    sink = Collect()
    query = stream(spark, data, sink, tmp_path / "cp", subscribe="t", startingOffsets="earliest",
                   minOffsetsPerTrigger="1000", maxTriggerDelay="1s")  # fmt: skip
    try:
        query.processAllAvailable()
        fill(data, count=5)
        deadline = time.monotonic() + 60
        while sink.offsets != list(range(15)) and time.monotonic() < deadline:
            query.awaitTermination(0.2)  # waits on the query, not a fixed sleep
        assert sink.batches == [list(range(10)), list(range(10, 15))]
    finally:
        query.stop()


def test_min_offsets_above_max_offsets_is_refused(spark, tmp_path):
    fill(tmp_path / "data")
    with pytest.raises(Exception, match=r"minOffsetPerTrigger\(50\) is higher than"):
        query = stream(spark, tmp_path / "data", Collect(), tmp_path / "cp", subscribe="t",
                       minOffsetsPerTrigger="50", maxOffsetsPerTrigger="10")  # fmt: skip
        query.processAllAvailable()


def test_sink_columns_are_matched_by_exact_name(spark, tmp_path):
    df = spark.createDataFrame([("a", "k")], "Value string, key string")
    with pytest.raises(Exception, match="required attribute 'value' not found"):
        df.write.format("logfs").options(path=str(tmp_path), topic="t").mode("append").save()
    df = spark.createDataFrame([("a", "k")], "value string, KEY string")  # KEY: not the key
    df.write.format("logfs").options(path=str(tmp_path), topic="t").mode("append").save()
    with Store(tmp_path, read_only=True) as store:
        assert [(r.key, r.value) for r in store.log("t", 0).scan()] == [(None, b"a")]


def test_the_default_save_mode_is_refused_by_spark_itself(spark, tmp_path):
    """Kafka's sink accepts ErrorIfExists (the default); Spark refuses every mode but
    append and overwrite for a Python data source before it reaches logfs."""
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("logfs").options(path=str(tmp_path), topic="t").save()


def test_sink_headers_compare_without_nullability(spark, tmp_path):
    """Kafka's sink ignores nullability: struct fields and array elements that cannot be
    null make a valid headers column."""
    df = spark.sql(
        "SELECT 'v' AS value, array(named_struct('key', 'h', 'value', cast('x' AS binary))) "
        "AS headers"
    )
    assert not df.schema["headers"].dataType.containsNull
    df.write.format("logfs").options(path=str(tmp_path), topic="t").mode("append").save()
    with Store(tmp_path, read_only=True) as store:
        [record] = store.log("t", 0).scan()
    assert (record.value, list(record.headers)) == (b"v", [("h", b"x")])


def test_streaming_output_modes(spark, tmp_path):
    """complete appends each micro-batch's whole result, as Kafka's sink; update is refused
    by Spark itself for a Python data source."""
    data = tmp_path / "data"
    fill(data, count=6)
    source = {"path": str(data), "subscribe": "t", "startingOffsets": "earliest"}
    counts = (
        spark.readStream.format("logfs")
        .options(**source)
        .load()
        .groupBy((F.col("offset") % 2).cast("string").alias("key"))
        .count()
        .selectExpr("key", "CAST(count AS STRING) AS value")
    )
    query = (
        counts.writeStream.outputMode("complete").format("logfs")
        .options(path=str(data), topic="counts", checkpointLocation=str(tmp_path / "cp"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(120) and query.exception() is None
    with Store(data, read_only=True) as store:
        rows = sorted((r.key, r.value) for r in store.log("counts", 0).scan())
    assert rows == [(b"0", b"3"), (b"1", b"3")]
    with pytest.raises(Exception, match="logfs does not support Update mode") as refused:
        query = (
            counts.writeStream.outputMode("update").format("logfs")
            .options(path=str(data), topic="counts", checkpointLocation=str(tmp_path / "cp2"))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination(120)
    print(str(refused.value).splitlines()[0])
