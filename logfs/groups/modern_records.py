"""A consumer group's records in ``__consumer_offsets``, in the formats of
Kafka's group coordinator (its ``ConsumerGroup*Key``/``Value`` schemas), so
that a restart finds every group, member, epoch and assignment as it was.

Keys are an int16 version (which names the record's kind) and int16-length
strings: v3 group epoch (group), v4 partition metadata (group), v5 member
metadata (group, member), v6 target assignment epoch (group), v7 target
assignment of a member (group, member), v8 current assignment of a member
(group, member). Values are an int16 version (0) and Kafka's "flexible"
encoding: varint-length compact strings and arrays (length + 1, 0 for null),
16-byte uuids, each struct ending in its tagged fields (a varint count; the
member metadata's tag 0 holds a classic member's session timeout and
protocols). A tombstone (no value) removes what its key names.

- group epoch: epoch (int32);
- partition metadata: topics [id, name, partitions (int32), partition racks []];
- member metadata: instance id?, rack id?, client id, client host, topic
  names [], regex?, rebalance timeout (int32), server assignor?;
- target assignment epoch: epoch (int32);
- target assignment, current assignment: topics [id, partitions [int32]];
  the current one after member epoch, previous epoch (int32) and state (int8),
  with the partitions pending revocation after the assigned ones.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

GROUP_EPOCH, PARTITION_METADATA, MEMBER, TARGET_EPOCH, TARGET, CURRENT = 3, 4, 5, 6, 7, 8
KINDS = (GROUP_EPOCH, PARTITION_METADATA, MEMBER, TARGET_EPOCH, TARGET, CURRENT)
WITH_MEMBER = (MEMBER, TARGET, CURRENT)

_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")


class MemberRecord(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]
    regex: str | None
    rebalance_ms: int
    assignor: str | None
    classic: tuple[int, tuple[tuple[str, bytes], ...]] | None = None  # tag 0


class CurrentRecord(NamedTuple):
    epoch: int
    previous_epoch: int
    state: int
    assigned: dict[uuid.UUID, list[int]]
    revoking: dict[uuid.UUID, list[int]]


# ---------------------------------------------------------------- keys


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def key(kind: int, group: str, member: str | None = None) -> bytes:
    """The key of a record of ``kind`` for ``group`` (and ``member``)."""
    out = _I16.pack(kind) + _string(group)
    return out + _string(member) if kind in WITH_MEMBER else out


def read_key(data: bytes) -> tuple[int, str, str | None] | None:
    """(kind, group, member or None); None for a key of another kind."""
    (kind,) = _I16.unpack_from(data, 0)
    if kind not in KINDS:
        return None
    at, names = 2, []
    for _ in range(2 if kind in WITH_MEMBER else 1):
        (size,) = _I16.unpack_from(data, at)
        names.append(data[at + 2 : at + 2 + size].decode())
        at += 2 + size
    return kind, names[0], names[1] if len(names) > 1 else None


# ---------------------------------------------------------------- flexible values


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Writer:
    def __init__(self) -> None:
        self.parts = [_I16.pack(0)]  # every value here is version 0

    def int(self, s: struct.Struct, value: int) -> None:
        self.parts.append(s.pack(value))

    def string(self, text: str | None) -> None:
        if text is None:
            self.parts.append(b"\0")
        else:
            data = text.encode()
            self.parts += [_uvarint(len(data) + 1), data]

    def length(self, n: int) -> None:
        self.parts.append(_uvarint(n + 1))

    def end(self) -> None:  # a struct's tagged fields: none
        self.parts.append(b"\0")

    def topics(self, partitions: dict[uuid.UUID, list[int]]) -> None:
        self.length(len(partitions))
        for topic_id, ps in partitions.items():
            self.parts.append(topic_id.bytes)
            self.length(len(ps))
            self.parts += [_I32.pack(p) for p in sorted(ps)]
            self.end()

    def bytes(self, data: bytes) -> None:
        self.parts += [_uvarint(len(data) + 1), data]

    def done(self, tags: dict[int, bytes] | None = None) -> bytes:
        if tags:
            self.parts.append(_uvarint(len(tags)))
            for tag, data in sorted(tags.items()):
                self.parts += [_uvarint(tag), _uvarint(len(data)), data]
        else:
            self.end()
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 2  # after the version

    def int(self, s: struct.Struct) -> int:
        (value,) = s.unpack_from(self.data, self.at)
        self.at += s.size
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        text = self.data[self.at : self.at + n].decode()
        self.at += n
        return text

    def bytes(self) -> bytes:
        n = self.uvarint() - 1
        data = bytes(self.data[self.at : self.at + n])
        self.at += n
        return data

    def skip_tags(self) -> dict[int, bytes]:
        """The struct's tagged fields, by tag (the caller reads those it knows)."""
        tags = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            tags[tag] = bytes(self.data[self.at : self.at + size])
            self.at += size
        return tags

    def topics(self) -> dict[uuid.UUID, list[int]]:
        out = {}
        for _ in range(self.uvarint() - 1):
            topic_id = uuid.UUID(bytes=bytes(self.data[self.at : self.at + 16]))
            self.at += 16
            out[topic_id] = [self.int(_I32) for _ in range(self.uvarint() - 1)]
            self.skip_tags()
        return out


def epoch_value(epoch: int) -> bytes:
    """A group epoch's or a target assignment epoch's value."""
    w = _Writer()
    w.int(_I32, epoch)
    return w.done()


def read_epoch(data: bytes) -> int:
    return _Reader(data).int(_I32)


def metadata_value(topics: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    """The subscribed topics' ids and sizes the target assignment was computed for."""
    w = _Writer()
    w.length(len(topics))
    for name, (topic_id, count) in sorted(topics.items()):
        w.parts.append(topic_id.bytes)
        w.string(name)
        w.int(_I32, count)
        w.length(0)  # no racks
        w.end()
    return w.done()


def read_metadata(data: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = _Reader(data)
    out = {}
    for _ in range(r.uvarint() - 1):
        topic_id = uuid.UUID(bytes=bytes(r.data[r.at : r.at + 16]))
        r.at += 16
        name, count = r.string(), r.int(_I32)
        for _ in range(r.uvarint() - 1):  # partitions' racks
            r.int(_I32)
            for _ in range(r.uvarint() - 1):
                r.string()
            r.skip_tags()
        r.skip_tags()
        out[name] = (topic_id, count)
    return out


def member_value(m: MemberRecord) -> bytes:
    w = _Writer()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.length(len(m.topics))
    for topic in m.topics:
        w.string(topic)
    w.string(m.regex)
    w.int(_I32, m.rebalance_ms)
    w.string(m.assignor)
    if m.classic is None:
        return w.done()
    classic = _Writer()
    classic.parts = []  # a struct inside the tag: no version of its own
    session_ms, protocols = m.classic
    classic.int(_I32, session_ms)
    classic.length(len(protocols))
    for name, metadata in protocols:
        classic.string(name)
        classic.bytes(metadata)
        classic.end()
    classic.end()
    return w.done({0: b"".join(classic.parts)})


def read_member(data: bytes) -> MemberRecord:
    r = _Reader(data)
    instance_id, rack_id, client_id, client_host = (r.string() for _ in range(4))
    topics = tuple(r.string() for _ in range(r.uvarint() - 1))
    regex, rebalance_ms, assignor = r.string(), r.int(_I32), r.string()
    classic = None
    tagged = r.skip_tags().get(0)
    if tagged is not None:
        t = _Reader(b"\0\0" + tagged)
        session_ms = t.int(_I32)
        protocols = []
        for _ in range(t.uvarint() - 1):
            protocols.append((t.string() or "", t.bytes()))
            t.skip_tags()
        classic = (session_ms, tuple(protocols))
    return MemberRecord(
        instance_id,
        rack_id,
        client_id or "",
        client_host or "",
        topics,
        regex,
        rebalance_ms,
        assignor,
        classic,
    )


def target_value(partitions: dict[uuid.UUID, list[int]]) -> bytes:
    w = _Writer()
    w.topics(partitions)
    return w.done()


def read_target(data: bytes) -> dict[uuid.UUID, list[int]]:
    return _Reader(data).topics()


def current_value(c: CurrentRecord) -> bytes:
    w = _Writer()
    w.int(_I32, c.epoch)
    w.int(_I32, c.previous_epoch)
    w.int(_I8, c.state)
    w.topics(c.assigned)
    w.topics(c.revoking)
    return w.done()


def read_current(data: bytes) -> CurrentRecord:
    r = _Reader(data)
    epoch, previous, state = r.int(_I32), r.int(_I32), r.int(_I8)
    return CurrentRecord(epoch, previous, state, r.topics(), r.topics())
