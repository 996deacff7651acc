"""Kafka's default partitioner for keyed records.

A keyed record goes to ``toPositive(murmur2(key)) % partitions``, exactly as
a Kafka producer would send it, so keys land on the same partition whether
written by Kafka clients, a mount's topic-level ``append`` or Spark.
"""

from __future__ import annotations


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``Utils.murmur2``), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: toPositive(murmur2) % n."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
