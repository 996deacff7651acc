"""Kafka's default partitioner.

A keyed record goes to ``toPositive(murmur2(key)) % partitions``, exactly as
a Kafka producer would send it, so keys land on the same partition whether
written by Kafka clients, a mount's topic-level ``append`` or Spark. The
unkeyed records of one append stay together on one partition, and the next
append takes the next partition (Kafka's sticky partitioner, round robin).
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Sequence


class Partitioner:
    """Chooses partitions for the records of successive appends to a topic.

    Args:
        start: where the round robin of unkeyed appends begins (taken modulo
            the partition count). A store has one partitioner and starts at 0.
            Each `Producer` (a Spark write task runs one) has its own and
            passes a random ``start``, so that producers do not all put their
            first unkeyed records on partition 0: a Kafka producer's sticky
            partitioner starts on a random partition too.
    """

    def __init__(self, start: int = 0) -> None:
        self._rotation = itertools.count(start)

    def sticky(self, partitions: int, offline: Container[int] = ()) -> int:
        """The partition for the unkeyed records of the next append: the next in
        turn that is not ``offline`` (Kafka's producer also spreads unkeyed
        records over available partitions only); when all are, the next."""
        first = next(self._rotation) % partitions
        for step in range(partitions):
            if (first + step) % partitions not in offline:
                return (first + step) % partitions
        return first

    def split(
        self, keys: Sequence[bytes | None], partitions: int, offline: Container[int] = ()
    ) -> dict[int, list[int]]:
        """Record indexes by partition, for one append: each keyed record by its
        key, all the unkeyed ones on one `sticky` partition (taken only if there
        are any). Indexes keep their order within a partition."""
        out: dict[int, list[int]] = {}
        sticky = None
        for i, key in enumerate(keys):
            if key is not None:
                p = partition_for_key(key, partitions)
            else:
                if sticky is None:
                    sticky = self.sticky(partitions, offline)
                p = sticky
            out.setdefault(p, []).append(i)
        return out


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
