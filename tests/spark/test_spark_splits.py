"""Offset ranges cut for Spark's tasks as Kafka's KafkaOffsetRangeCalculator cuts them, case by
case from Spark's own suite for it, and a batch query's rule for when to cut."""

from __future__ import annotations

import pytest
from test_spark_plan import TP0, TP1, FakeStore, opts

from logfs.spark.options import OffsetRange
from logfs.spark.plan import batch_ranges, split_ranges


def r(p, start, end):
    return OffsetRange("t", p, start, end)


def t(topic, start, end):
    """A range of partition 1 of ``topic``, as KafkaOffsetRangeCalculatorSuite's tp1..tp3."""
    return OffsetRange(topic, 1, start, end)


# Spark's KafkaOffsetRangeCalculatorSuite, case by case: (ranges, minPartitions,
# maxRecordsPerPartition, the ranges Spark plans). Preferred locations, which Python data
# sources cannot give, are left out.
CALCULATOR_SUITE = {
    "no minPartition: N TopicPartitions to N offset ranges": (
        [t("t1", 1, 2)],
        None,
        None,
        [t("t1", 1, 2)],
    ),
    "no minPartition: empty ranges ignored": (
        [t("t1", 1, 2), t("t2", 1, 1)],
        None,
        None,
        [t("t1", 1, 2)],
    ),
    "minPartition = 3: N TopicPartitions to N offset ranges": (
        [t("t1", 1, 2), t("t2", 1, 2), t("t3", 1, 2)],
        3,
        None,
        [t("t1", 1, 2), t("t2", 1, 2), t("t3", 1, 2)],
    ),
    "minPartition = 4: 1 TopicPartition to N offset ranges": (
        [t("t1", 1, 5)],
        4,
        None,
        [t("t1", 1, 2), t("t1", 2, 3), t("t1", 3, 4), t("t1", 4, 5)],
    ),
    "minPartition = 4: N skewed TopicPartitions to M offset ranges": (
        [t("t1", 1, 5), t("t2", 1, 21)],
        4,
        None,
        [t("t1", 1, 5), t("t2", 1, 7), t("t2", 7, 14), t("t2", 14, 21)],
    ),
    "minPartition = 4: SPARK-30656: ignore empty ranges and split the rest": (
        [t("t1", 1, 1), t("t2", 1, 21)],
        4,
        None,
        [t("t2", 1, 6), t("t2", 6, 11), t("t2", 11, 16), t("t2", 16, 21)],
    ),
    "minPartition = 4: SPARK-30656: N very skewed TopicPartitions to M offset ranges": (
        [t("t1", 1, 2), t("t2", 1, 1001)],
        4,
        None,
        [t("t1", 1, 2), t("t2", 1, 334), t("t2", 334, 667), t("t2", 667, 1001)],
    ),
    "minPartition = 1: SPARK-30656: minPartitions less than the length of topic partitions": (
        [t("t1", 1, 5), t("t2", 1, 21)],
        1,
        None,
        [t("t1", 1, 5), t("t2", 1, 21)],
    ),
    "minPartition = 3: range inexact multiple of minPartitions": (
        [t("t1", 1, 11)],
        3,
        None,
        [t("t1", 1, 4), t("t1", 4, 7), t("t1", 7, 11)],
    ),
    "minPartition = 4: empty ranges ignored": (
        [t("t1", 1, 5), t("t2", 1, 21), t("t3", 1, 1)],
        4,
        None,
        [t("t1", 1, 5), t("t2", 1, 7), t("t2", 7, 14), t("t2", 14, 21)],
    ),
    "minPartition = 6: SPARK-28489: never drop offsets": (
        [t("t1", 0, 10), t("t2", 0, 10), t("t3", 0, 1)],
        6,
        None,
        [
            t("t1", 0, 3),
            t("t1", 3, 6),
            t("t1", 6, 10),
            t("t2", 0, 3),
            t("t2", 3, 6),
            t("t2", 6, 10),
            t("t3", 0, 1),
        ],
    ),
    "minPartition = 9: SPARK-36576: 0 small unsplit ranges and 3 large split ranges": (
        [t("t1", 0, 10000), t("t2", 0, 15000), t("t3", 0, 20000)],
        9,
        None,
        [
            t("t1", 0, 5000),
            t("t1", 5000, 10000),
            t("t2", 0, 5000),
            t("t2", 5000, 10000),
            t("t2", 10000, 15000),
            t("t3", 0, 5000),
            t("t3", 5000, 10000),
            t("t3", 10000, 15000),
            t("t3", 15000, 20000),
        ],
    ),
    "minPartition = 6: SPARK-36576: 1 small unsplit range and 2 large split ranges": (
        [t("t1", 0, 500), t("t2", 0, 12000), t("t3", 0, 15001)],
        6,
        None,
        [
            t("t1", 0, 500),
            t("t2", 0, 6000),
            t("t2", 6000, 12000),
            t("t3", 0, 5000),
            t("t3", 5000, 10000),
            t("t3", 10000, 15001),
        ],
    ),
    "minPartition = 6: SPARK-36576: 2 small unsplit ranges and 1 large split range": (
        [t("t1", 0, 1), t("t2", 0, 1), t("t3", 0, 10000)],
        6,
        None,
        [
            t("t1", 0, 1),
            t("t2", 0, 1),
            t("t3", 0, 2500),
            t("t3", 2500, 5000),
            t("t3", 5000, 7500),
            t("t3", 7500, 10000),
        ],
    ),
    "minPartition = 3: SPARK-46798: ranges unsplit": (
        [t("t1", 0, 1), t("t2", 0, 1), t("t3", 0, 1)],
        3,
        None,
        [t("t1", 0, 1), t("t2", 0, 1), t("t3", 0, 1)],
    ),
    "minPartition = 4: SPARK-46798: ranges split": (
        [t("t1", 0, 1), t("t2", 0, 1), t("t3", 0, 2)],
        4,
        None,
        [t("t1", 0, 1), t("t2", 0, 1), t("t3", 0, 1), t("t3", 1, 2)],
    ),
    "maxRecordsPerPartition = 4: SPARK-49259: a range within the limit": (
        [t("t1", 1, 5)],
        None,
        4,
        [t("t1", 1, 5)],
    ),
    "maxRecordsPerPartition = 4: SPARK-49259: a one-record range": (
        [t("t1", 1, 2)],
        None,
        4,
        [t("t1", 1, 2)],
    ),
    "maxRecordsPerPartition = 4: SPARK-49259: 1 TopicPartition to N offset ranges": (
        [t("t1", 1, 6)],
        None,
        4,
        [t("t1", 1, 3), t("t1", 3, 6)],
    ),
}


@pytest.mark.parametrize(
    ("ranges", "min_partitions", "max_records", "expected"),
    CALCULATOR_SUITE.values(),
    ids=CALCULATOR_SUITE.keys(),
)
def test_split_ranges_as_spark_s_calculator_suite(ranges, min_partitions, max_records, expected):
    assert split_ranges(ranges, min_partitions, max_records) == expected


@pytest.mark.parametrize(
    ("sizes", "min_partitions", "max_records", "pieces"),
    [
        ((1000, 100, 3), 7, None, (5, 1, 1)),  # the small ranges leave the sums
        ((100, 1, 1), 4, None, (2, 1, 1)),
        ((10,), None, 3, (4,)),  # ceil(10 / 3) pieces: 2, 2, 3, 3
        ((4, 2), 3, 2, (2, 1)),  # cut by maxRecordsPerPartition first: 3 >= minPartitions
        ((40,), 4, 20, (4,)),  # two pieces of 20, then each in two
        ((40, 1), 3, 20, (2, 1)),  # three ranges after the first cut: enough
        ((21, 20), 4, 20, (2, 2)),  # 11 + 10, 20: then round(10 / 41 * 4) = 1 keeps p0 whole
    ],
)
def test_split_ranges_counts(sizes, min_partitions, max_records, pieces):
    ranges = [r(p, 0, size) for p, size in enumerate(sizes)]
    got = split_ranges(ranges, min_partitions, max_records)
    assert tuple(sum(1 for g in got if g.partition == p) for p in range(len(sizes))) == pieces
    for p, size in enumerate(sizes):  # never a gap or an overlap
        mine = [g for g in got if g.partition == p]
        assert [g.start for g in mine] == [0] + [g.end for g in mine[:-1]]
        assert mine[-1].end == size


def test_batch_ranges_are_cut_as_the_options_give_them():
    """Kafka's batch planning tests maxRecordsPerPartition against the offsets as given:
    earliest..latest (-2..-1) is never cut by it alone; specific offsets are."""
    store = FakeStore({TP0: (0, 100), TP1: (0, 0)})
    whole = opts(subscribe="t", maxRecordsPerPartition="10")
    assert batch_ranges(store, whole) == [r(0, 0, 100), r(1, 0, 0)]  # an empty task too
    given = opts(subscribe="t", maxRecordsPerPartition="40",  # fmt: skip
                 startingOffsets='{"t": {"0": 0, "1": -2}}',
                 endingOffsets='{"t": {"0": 100, "1": -1}}')  # fmt: skip
    assert batch_ranges(store, given) == [r(0, 0, 33), r(0, 33, 66), r(0, 66, 100)]
    spread = opts(subscribe="t", minPartitions="3")
    assert batch_ranges(store, spread) == [r(0, 0, 33), r(0, 33, 66), r(0, 66, 100)]
