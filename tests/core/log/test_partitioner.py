"""Kafka's default partitioner, checked against kafka-python's."""

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from logfs.core.log.partitioner import Partitioner, murmur2, partition_for_key


@given(st.binary(max_size=64))
def test_murmur2_is_kafkas(data):
    # Java's int is signed, kafka-python's result is not: compare the bits.
    assert murmur2(data) & 0xFFFFFFFF == kafka_murmur2(data) & 0xFFFFFFFF
    assert -(1 << 31) <= murmur2(data) < 1 << 31


def test_partition_for_key():
    # Kafka: Utils.toPositive(Utils.murmur2(key)) % numPartitions
    assert all(0 <= partition_for_key(bytes([i]), 7) < 7 for i in range(256))
    assert partition_for_key(b"foo", 3) == (kafka_murmur2(b"foo") & 0x7FFFFFFF) % 3


def test_unkeyed_appends_go_round_robin_from_start():
    # A store starts at partition 0; a Spark task passes a random start.
    assert [Partitioner().sticky(3) for _ in range(2)] == [0, 0]
    rotation = Partitioner()
    assert [rotation.sticky(3) for _ in range(4)] == [0, 1, 2, 0]
    rotation = Partitioner(start=7)
    assert [rotation.sticky(3) for _ in range(4)] == [1, 2, 0, 1]


@given(
    start=st.integers(0, (1 << 31) - 1),
    partitions=st.integers(1, 8),
    appends=st.lists(st.lists(st.none() | st.binary(max_size=8), max_size=20), max_size=5),
)
def test_split_is_kafkas_default_partitioner(start, partitions, appends):
    """Keyed records by murmur2, the unkeyed ones of one append together on one partition,
    the next append's on the next one; every index once, in order."""
    partitioner = Partitioner(start=start)
    sticky = start
    for keys in appends:
        split = partitioner.split(keys, partitions)
        assert sorted(i for rows in split.values() for i in rows) == list(range(len(keys)))
        assert all(rows == sorted(rows) for rows in split.values())
        for p, rows in split.items():
            for i in rows:
                if keys[i] is None:
                    expected = sticky % partitions
                else:
                    expected = (kafka_murmur2(keys[i]) & 0x7FFFFFFF) % partitions
                assert p == expected
        # Only an append with unkeyed records moves the sticky partition on.
        sticky += any(k is None for k in keys)
