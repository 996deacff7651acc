"""Kafka's default partitioner, checked against kafka-python's."""

from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from logfs.core.partitioner import murmur2, partition_for_key


@given(st.binary(max_size=64))
def test_murmur2_is_kafkas(data):
    # Java's int is signed, kafka-python's result is not: compare the bits.
    assert murmur2(data) & 0xFFFFFFFF == kafka_murmur2(data) & 0xFFFFFFFF
    assert -(1 << 31) <= murmur2(data) < 1 << 31


def test_partition_for_key():
    # Kafka: Utils.toPositive(Utils.murmur2(key)) % numPartitions
    assert all(0 <= partition_for_key(bytes([i]), 7) < 7 for i in range(256))
    assert partition_for_key(b"foo", 3) == (kafka_murmur2(b"foo") & 0x7FFFFFFF) % 3
