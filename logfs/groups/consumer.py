"""What a consumer group's members carry in the bytes the coordinator keeps for
them without reading (their protocol metadata and assignments), read where the
coordinator needs it: Kafka's ConsumerProtocol, the "consumer" protocol type.

- subscription (a member's JoinGroup metadata): int16 version, int32 count of
  topics, each an int16-length UTF-8 name; user data (int32-length bytes,
  -1 for none); from v1 the partitions it owns (int32 count of topics, each a
  name and an int32 count of int32 partitions); later versions add fields
  after;
- assignment (what the leader's SyncGroup hands a member): int16 version,
  int32 count of topics, each an int16-length name and an int32 count of
  int32 partitions; user data (int32-length bytes, -1 for none).

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


def _topic_partitions(data: bytes, at: int) -> tuple[dict[str, frozenset[int]], int]:
    (count,) = _I32.unpack_from(data, at)
    at += _I32.size
    out: dict[str, frozenset[int]] = {}
    for _ in range(count):
        topic, at = _name(data, at)
        (n,) = _I32.unpack_from(data, at)
        if not 0 <= n <= (len(data) - at) // 4:
            raise ValueError("partitions run past the bytes")
        partitions = struct.unpack_from(f">{n}i", data, at + _I32.size)
        at += _I32.size * (1 + n)
        out[topic] = out.get(topic, frozenset()) | frozenset(partitions)
    return out, at


def owned_partitions(metadata: bytes) -> dict[str, frozenset[int]] | None:
    """The partitions a subscription (v1+) says its member owns; None when it does not
    say (v0, or bytes of another layout)."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        if version < 1:
            return None
        (count,) = _I32.unpack_from(metadata, _HEADER)
        at = _HEADER + _I32.size
        for _ in range(count):
            _, at = _name(metadata, at)
        (user_data,) = _I32.unpack_from(metadata, at)
        at += _I32.size + max(user_data, 0)
        return _topic_partitions(metadata, at)[0]
    except (struct.error, UnicodeDecodeError, ValueError):
        return None


def assignment_bytes(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    """A ConsumerProtocol assignment of ``partitions``, at ``version`` (the member's own
    subscription version, as Kafka answers a classic member of a consumer group)."""
    parts = [_I16.pack(max(version, 0)), _I32.pack(len(partitions))]
    for topic, ps in sorted(partitions.items()):
        name = topic.encode()
        parts += [_I16.pack(len(name)), name, _I32.pack(len(ps))]
        parts += [_I32.pack(p) for p in sorted(ps)]
    parts.append(_I32.pack(-1))  # no user data
    return b"".join(parts)


def version_of(metadata: bytes) -> int:
    """A subscription's version (0 for bytes too short to say)."""
    return _I16.unpack_from(metadata, 0)[0] if len(metadata) >= 2 else 0
