"""What a consumer group's members carry in the bytes the coordinator keeps for
them without reading (their protocol metadata and assignments), read where the
coordinator needs it: Kafka's ConsumerProtocol, the "consumer" protocol type.

- subscription (a member's JoinGroup metadata): int16 version, int32 count of
  topics, each an int16-length UTF-8 name (newer versions add fields after);
- assignment (what the leader's SyncGroup hands a member): int16 version,
  int32 count of topics, each an int16-length name and an int32 count of
  int32 partitions.

Bytes of another layout (another protocol type, a client of its own) read as
nothing: they are the members', not the coordinator's.
"""

from __future__ import annotations

import struct

PROTOCOL_TYPE = "consumer"

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_HEADER = 2  # the int16 version before the topics


def _name(data: bytes, at: int) -> tuple[str, int]:
    (size,) = _I16.unpack_from(data, at)
    if not 0 <= size <= len(data) - at - _I16.size:
        raise ValueError("a topic name runs past the bytes")
    return data[at + 2 : at + 2 + size].decode(), at + 2 + size


def subscribed_topics(metadata: bytes) -> set[str]:
    """The topics of a consumer's subscription; empty for bytes of another layout."""
    topics: set[str] = set()
    try:
        (count,) = _I32.unpack_from(metadata, _HEADER)
        at = _HEADER + _I32.size
        for _ in range(count):
            topic, at = _name(metadata, at)
            topics.add(topic)
    except (struct.error, UnicodeDecodeError, ValueError):
        return topics  # what was read so far, as Kafka's coordinator skips the rest
    return topics


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer's assignment, in order; empty for bytes of
    another layout."""
    out = []
    try:
        (count,) = _I32.unpack_from(assignment, _HEADER)
        at = _HEADER + _I32.size
        for _ in range(count):
            topic, at = _name(assignment, at)
            (n,) = _I32.unpack_from(assignment, at)
            partitions = struct.unpack_from(f">{n}i", assignment, at + _I32.size)
            at += _I32.size * (1 + n)
            out += [(topic, p) for p in partitions]
    except (struct.error, UnicodeDecodeError, ValueError):
        return []
    return out
