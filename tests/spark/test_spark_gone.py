"""Partitions that go away and come back, in streaming and batch reads, as Kafka's source
treats them: a partition missing from a trigger's end offset is gone (data loss), one that
appears is new and read from its log start (data loss unless it starts at 0), one whose offset
went back lost what it had. Driven like Spark's engine drives a stream reader, without a JVM,
for every strategy, both failOnDataLoss and a deletion at every step of a trigger; then a real
stream in a local session."""

from __future__ import annotations

import json
import logging

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from logfs import Store
from logfs.spark.options import DataLossError, OffsetRange, parse_options
from logfs.spark.plan import batch_ranges
from logfs.spark.read import LogfsBatchReader, LogfsStreamReader

STRATEGIES = {
    "subscribe": {"subscribe": "t"},
    "subscribePattern": {"subscribePattern": "^t$"},
    "assign": {"assign": '{"t": [0]}'},
}


def put(data, count, start_fresh=False):
    """``count`` more records in t-0 (created when missing); values say which life of the
    topic and which offset."""
    with Store(data) as store:
        if start_fresh and "t" in store.topics():
            store.delete_topic("t")
        if "t" not in store.topics():
            store.create_topic("t")
        log = store.log("t", 0)
        life = len(list(data.glob("life-*")))
        log.append([b"%d:%d" % (life, log.next_offset + i) for i in range(count)])


def delete(data):
    with Store(data) as store:
        store.delete_topic("t")
    (data / f"life-{len(list(data.glob('life-*')))}").touch()  # the next life's values differ


class Engine:
    """Spark's micro-batch loop over a `LogfsStreamReader`: latestOffset, then (when the end
    differs from the start) partitions and each partition's read, then the next start.
    ``hooks`` run between the steps of a trigger."""

    def __init__(self, data, fail: bool, strategy: str) -> None:
        options = {"path": str(data), "startingOffsets": "earliest", **STRATEGIES[strategy],
                   "failOnDataLoss": str(fail).lower()}  # fmt: skip
        self.reader = LogfsStreamReader(parse_options(options, streaming=True))
        self.start = self.reader.initialOffset()
        self.rows: list[bytes] = []

    def trigger(self, before_plan=None, before_read=None) -> None:
        end = self.reader.latestOffset(self.start, ReadAllAvailable())
        if end == self.start:
            return
        if before_plan:
            before_plan()
        parts = self.reader.partitions(self.start, end)
        if before_read:
            before_read()
        for part in parts:
            for batch in self.reader.read(part):
                self.rows += batch.column("value").to_pylist()
        self.start = end


def values(life, offsets):
    return [b"%d:%d" % (life, o) for o in offsets]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_gone_partition_leaves_the_offset_and_comes_back_as_new(tmp_path, strategy):
    """Deleted between triggers, re-created later with more records than were read: the
    trigger that finds it gone drops it (a warning), the one that finds it again reads the
    new topic from offset 0."""
    data = tmp_path / "data"
    put(data, 10)
    engine = Engine(data, False, strategy)
    engine.trigger()
    delete(data)
    engine.trigger()
    assert engine.start == {}
    put(data, 15)
    engine.trigger()
    assert engine.rows == values(0, range(10)) + values(1, range(15))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_gone_partition_fails_the_query_by_default(tmp_path, strategy):
    data = tmp_path / "data"
    put(data, 10)
    engine = Engine(data, True, strategy)
    engine.trigger()
    delete(data)
    with pytest.raises(DataLossError, match='t-0 are gone.*"failOnDataLoss" to "false"'):
        engine.trigger()
    assert engine.start == {"t": {"0": 10}}  # the failed batch moved nothing


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("fail", [True, False])
@pytest.mark.parametrize("step", ["before_plan", "before_read"])
def test_deleted_inside_a_trigger(tmp_path, strategy, fail, step, caplog):
    """Deleted after the trigger took its end offset (before the ranges are planned, or
    before the tasks read them), and re-created with 3 records before the next trigger."""
    data = tmp_path / "data"
    put(data, 10)
    engine = Engine(data, fail, strategy)
    engine.trigger()
    put(data, 5)
    recreate = lambda: (delete(data), put(data, 3))  # noqa: E731
    if fail:
        with pytest.raises(DataLossError, match="failOnDataLoss"):
            engine.trigger(**{step: recreate})
        return
    with caplog.at_level(logging.WARNING, "logfs.spark"):
        engine.trigger(**{step: recreate})  # 10..14 are not in the new log
        engine.trigger()  # the new log ends at 3 < 15: Kafka's "offset was changed"
        put(data, 4)
        engine.trigger()
    assert engine.rows == values(0, range(10)) + values(1, range(3, 7))
    assert "offset was changed from 15 to 3" in caplog.text


@pytest.mark.parametrize("fail", [True, False])
def test_recreated_smaller_between_triggers(tmp_path, fail, caplog):
    """Deleted and re-created between two triggers with fewer records than were read: the
    offset went back, which Kafka's source reports."""
    data = tmp_path / "data"
    put(data, 10)
    engine = Engine(data, fail, "subscribe")
    engine.trigger()
    delete(data)
    put(data, 5)
    if fail:
        with pytest.raises(DataLossError, match="changed from 10 to 5"):
            engine.trigger()
        return
    with caplog.at_level(logging.WARNING, "logfs.spark"):
        engine.trigger()
    assert "changed from 10 to 5" in caplog.text
    assert engine.start == {"t": {"0": 5}}


@pytest.mark.parametrize("fail", [True, False])
def test_a_new_partition_that_does_not_start_at_zero(tmp_path, fail, caplog):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("other")
        store.log("other", 0).append([b"x"])
    engine = Engine(data, fail, "subscribePattern")
    with Store(data) as store:  # a topic whose first records retention took already
        store.create_topic("t", config={"retention.ms": 1000})
        log = store.log("t", 0)
        log.append([b"a"] * 3, timestamp=1_000)
        log.roll()
        log.append([b"b"] * 2)
        assert log.enforce_retention() == 1 and log.log_start_offset == 3
    if fail:
        with pytest.raises(DataLossError, match="starts from 3 instead of 0"):
            engine.trigger()
    else:
        with caplog.at_level(logging.WARNING, "logfs.spark"):
            engine.trigger()
        assert "starts from 3 instead of 0" in caplog.text


def test_a_batch_reads_the_assigned_partitions_that_exist(tmp_path):
    data = tmp_path / "data"
    put(data, 4)
    options = parse_options({"path": str(data), "assign": '{"t": [0, 1], "gone": [0]}'},
                            streaming=False)  # fmt: skip
    with Store(data, read_only=True) as store:
        assert batch_ranges(store, options) == [OffsetRange("t", 0, 0, 4)]
    reader = LogfsBatchReader(options)
    [part] = reader.partitions()
    delete(data)  # gone between planning and reading
    with pytest.raises(DataLossError, match="t-0 is gone"):
        list(reader.read(part))


class Collect:
    """A foreachBatch sink keeping every row's value."""

    def __init__(self) -> None:
        self.values: list[bytes] = []

    def __call__(self, df, batch_id) -> None:
        self.values += [bytes(r.value) for r in df.select("value").collect()]


@pytest.mark.spark
@pytest.mark.parametrize("strategy", ["subscribe", "subscribePattern"])
def test_a_real_stream_reads_a_recreated_topic_from_its_start(spark, tmp_path, strategy):
    """In a local session: a stream whose only topic is deleted (a trigger sees it gone) and
    re-created with more records than it had read delivers every record of both lives."""
    data = tmp_path / "data"
    put(data, 10)
    sink = Collect()
    query = (
        spark.readStream.format("logfs")
        .options(
            path=str(data),
            startingOffsets="earliest",
            failOnDataLoss="false",
            **STRATEGIES[strategy],
        )  # fmt: skip
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        delete(data)
        query.processAllAvailable()
        assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {}
        put(data, 15)
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(sink.values) == sorted(values(0, range(10)) + values(1, range(15)))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("fail", [True, False])
@pytest.mark.parametrize("again", [0, 3, 20], ids=["deleted", "recreated smaller", "recreated"])
def test_a_batch_whose_topic_goes_between_planning_and_reading(tmp_path, strategy, fail, again):
    """A batch query plans t-0 from earliest to latest, then the topic is deleted (and
    perhaps re-created) before its task reads. Kafka's source binds earliest and latest when
    the task reads: a re-created topic is read whole; a deleted one is data loss."""
    data = tmp_path / "data"
    put(data, 10)
    options = parse_options({"path": str(data), "failOnDataLoss": str(fail).lower(),
                             **STRATEGIES[strategy]}, streaming=False)  # fmt: skip
    [part] = LogfsBatchReader(options).partitions()
    assert (part.range, part.late_start, part.late_end) == (OffsetRange("t", 0, 0, 10), True, True)
    delete(data)
    if again:
        put(data, again)

    def read():
        return [v.as_py() for b in LogfsBatchReader(options).read(part) for v in b["value"]]

    if fail and not again:
        with pytest.raises(DataLossError, match="t-0 is gone"):
            read()
    else:
        assert read() == values(1, range(again))


@pytest.mark.parametrize("fail", [True, False])
def test_specific_offsets_are_read_where_the_plan_says(tmp_path, fail):
    """Offsets the options give are not bound again: a re-created topic is read at them,
    and what is not there is data loss."""
    data = tmp_path / "data"
    put(data, 10)
    options = parse_options({"path": str(data), "failOnDataLoss": str(fail).lower(),
                             "subscribe": "t", "startingOffsets": '{"t": {"0": 2}}',
                             "endingOffsets": '{"t": {"0": 8}}'}, streaming=False)  # fmt: skip
    [part] = LogfsBatchReader(options).partitions()
    assert (part.late_start, part.late_end) == (False, False)
    delete(data)
    put(data, 5)
    reader = LogfsBatchReader(options)
    if fail:
        with pytest.raises(DataLossError, match=r"offsets 5\.\.7 of t-0 are past the end"):
            list(reader.read(part))
    else:
        assert [v.as_py() for b in reader.read(part) for v in b["value"]] == values(1, range(2, 5))


def test_earliest_and_latest_are_bound_when_the_task_reads(tmp_path):
    """Records appended between planning and reading are read, as Kafka's source binds
    latest in the task; split ranges keep their inner bounds."""
    data = tmp_path / "data"
    put(data, 9)
    options = parse_options({"path": str(data), "subscribe": "t", "minPartitions": "3"},
                            streaming=False)  # fmt: skip
    parts = LogfsBatchReader(options).partitions()
    assert [(p.range.start, p.range.end, p.late_start, p.late_end) for p in parts] == [
        (0, 3, True, False), (3, 6, False, False), (6, 9, False, True)]  # fmt: skip
    put(data, 2)
    got = [v.as_py() for p in parts for b in LogfsBatchReader(options).read(p) for v in b["value"]]
    assert got == values(0, range(11))


def test_option_names_are_spelled_as_kafka_s_docs():
    for options, name in [
        ({"maxoffsetspertrigger": "many"}, '"maxOffsetsPerTrigger"'),
        ({"STARTINGOFFSETS": "{"}, '"startingOffsets"'),
        ({"minpartitions": "0"}, '"minPartitions"'),
    ]:
        with pytest.raises(ValueError) as refused:
            parse_options({"path": "/d", "subscribe": "t", **options}, streaming=True)
        assert name in str(refused.value)
    with pytest.raises(ValueError, match='"endingOffsets" is not valid in streaming'):
        parse_options({"path": "/d", "subscribe": "t", "endingoffsets": "latest"}, streaming=True)


def test_ending_offsets_past_the_end_are_named_so(tmp_path):
    data = tmp_path / "data"
    put(data, 5)
    options = parse_options({"path": str(data), "subscribe": "t",
                             "endingOffsets": '{"t": {"0": 8}}'}, streaming=False)  # fmt: skip
    [part] = LogfsBatchReader(options).partitions()
    with pytest.raises(DataLossError, match=r"offsets 5\.\.7 of t-0 are past the end of its "
                                            r"log, which ends at offset 5"):  # fmt: skip
        list(LogfsBatchReader(options).read(part))
