"""``__consumer_offsets``: the compacted internal topic where the group
coordinator keeps committed offsets and group metadata, in Kafka's own
record formats (its group coordinator's ``OffsetCommitKey``/``Value`` and
``GroupMetadataKey``/``Value`` schemas), so Kafka's tools read it as theirs.

Keys and values start with a big-endian int16 schema version:

- offset commit key v1: group, topic (strings), partition (int32);
- offset commit value v3: offset (int64), leader epoch (int32), metadata
  (string), commit timestamp (int64);
- group metadata key v2: group (string);
- group metadata value v3: protocol type (string), generation (int32),
  protocol and leader (nullable strings), state timestamp (int64), members
  (int32 count; each: member id, group instance id (nullable), client id,
  client host, rebalance and session timeouts in ms (int32), subscription
  and assignment (int32-length bytes)).

A string is an int16 length (-1 for null) and UTF-8 bytes. A deleted
group's or offset's key gets a tombstone (no value), which compaction keeps
only until ``delete.retention.ms``. Consumer groups of KIP-848 keep their
records here too, under key versions 3 to 8 (modern_records.py).

Offsets committed inside a transaction (TxnOffsetCommit, txn_offsets.py) are
transactional batches of the producer's id and epoch, as Kafka's coordinator
writes them: they take effect at the producer's COMMIT marker in this topic and
never after an ABORT; read back, those whose transaction is still open are
pending (`load`'s ``pending``).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..core.config import CONSUMER_OFFSETS as TOPIC
from ..core.errors import ReadOnlyError
from ..core.format import control, decode_records
from ..core.log import Store
from . import modern_records

PARTITIONS = 1  # one node: one partition holds every group (Kafka's default is 50)
CONFIG = {"cleanup.policy": "compact"}

OFFSET_KEY_VERSION, OFFSET_VALUE_VERSION = 1, 3
GROUP_KEY_VERSION, GROUP_VALUE_VERSION = 2, 3

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class Committed(NamedTuple):
    """A committed offset as OffsetFetch returns it."""

    offset: int
    leader_epoch: int
    metadata: str
    timestamp: int


class StoredMember(NamedTuple):
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class StoredGroup(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    timestamp: int
    members: tuple[StoredMember, ...]


# ---------------------------------------------------------------- encoding


def _string(text: str | None) -> bytes:
    if text is None:
        return _I16.pack(-1)
    data = text.encode()
    return _I16.pack(len(data)) + data


def _bytes(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_KEY_VERSION) + _string(group) + _string(topic) + _I32.pack(partition)


def offset_value(c: Committed) -> bytes:
    return (
        _I16.pack(OFFSET_VALUE_VERSION)
        + _I64.pack(c.offset)
        + _I32.pack(c.leader_epoch)
        + _string(c.metadata)
        + _I64.pack(c.timestamp)
    )


def group_key(group: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _string(group)


def group_value(g: StoredGroup) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        _string(g.protocol_type),
        _I32.pack(g.generation),
        _string(g.protocol),
        _string(g.leader),
        _I64.pack(g.timestamp),
        _I32.pack(len(g.members)),
    ]
    for m in g.members:
        parts += [
            _string(m.member_id),
            _string(m.instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(parts)


# ---------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def _take(self, s: struct.Struct) -> int:
        (value,) = s.unpack_from(self.data, self.at)
        self.at += s.size
        return value

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        size = self.i16()
        if size < 0:
            return None
        if self.at + size > len(self.data):
            raise ValueError("a string runs past the record")
        text = self.data[self.at : self.at + size].decode()
        self.at += size
        return text

    def bytes(self) -> bytes:
        size = self.i32()
        if not 0 <= size <= len(self.data) - self.at:
            raise ValueError("bytes run past the record")
        out = bytes(self.data[self.at : self.at + size])
        self.at += size
        return out


def read_key(key: bytes) -> tuple[str, ...] | None:
    """``("offset", group, topic, partition)`` or ``("group", group)``; None for
    a key of another kind (Kafka's newer group types), which is skipped."""
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        return ("offset", r.string(), r.string(), r.i32())
    if version == GROUP_KEY_VERSION:
        return ("group", r.string())
    return None


def read_offset_value(value: bytes) -> Committed:
    r = _Reader(value)
    version = r.i16()
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    timestamp = r.i64()
    return Committed(offset, epoch, metadata, timestamp)


def read_group_value(value: bytes) -> StoredGroup:
    r = _Reader(value)
    version = r.i16()
    protocol_type, generation = r.string() or "", r.i32()
    protocol, leader = r.string(), r.string()
    timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string()
        instance_id = r.string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        rebalance = session if rebalance < 0 else rebalance  # v0 had none
        subscription, assignment = r.bytes(), r.bytes()
        members.append(
            StoredMember(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance,
                session,
                subscription,
                assignment,
            )
        )
    return StoredGroup(protocol_type, generation, protocol, leader, timestamp, tuple(members))


# ---------------------------------------------------------------- the topic


def ensure_topic(store: Store) -> None:
    """Create the topic if the store lacks it (not in a read-only store)."""
    if TOPIC not in store.topics() and not store.read_only:
        store.create_topic(TOPIC, partitions=PARTITIONS, config=CONFIG)


class Loaded(NamedTuple):
    """What the topic holds, the latest record of each key: classic groups' metadata,
    committed offsets, and consumer groups' records (modern_records.py) by key, as
    ``(kind, group, member)`` -> value."""

    groups: dict[str, StoredGroup]
    offsets: dict[tuple[str, str, int], Committed]
    modern: dict[tuple[int, str, str | None], bytes]


def load(store: Store, pending: dict | None = None) -> Loaded:
    """Every key's latest record in the topic (a tombstone removes its key), a
    transaction's records from its COMMIT marker on; ``pending`` gets the offsets
    of transactions still open, by producer id."""
    loaded = Loaded({}, {}, {})
    open_txns: dict[int, list] = {}
    for p in range(store.topics().get(TOPIC, 0)):
        for records in _decided(store.log(TOPIC, p), open_txns):
            _read_records(records, loaded)
    if pending is not None:
        for producer_id, records in open_txns.items():
            found = Loaded({}, {}, {})
            _read_records(records, found)
            pending[producer_id] = found.offsets
    return loaded


def _replay(loaded: Loaded, key: bytes, value: bytes | None) -> None:
    modern = modern_records.read_key(key)
    if modern is not None:
        if value is None:
            loaded.modern.pop(modern, None)
        else:
            loaded.modern[modern] = value
        return
    kind = read_key(key)
    if kind is None:
        return
    if kind[0] == "offset":
        if value is None:
            loaded.offsets.pop(kind[1:], None)
        else:
            loaded.offsets[kind[1:]] = read_offset_value(value)
    elif value is None:
        loaded.groups.pop(kind[1], None)
    else:
        loaded.groups[kind[1]] = read_group_value(value)


def _decided(log, open_txns: dict[int, list]):
    """The records of ``log`` in the order they take effect: plain ones as they
    come, a transaction's at its COMMIT marker; ``open_txns`` keeps the rest."""
    for header, batch in log.raw_batches():
        if header.is_control:
            records = open_txns.pop(header.producer_id, [])
            if records and control.marker_type(batch, header) == control.COMMIT:
                yield records
        elif header.is_transactional:
            open_txns.setdefault(header.producer_id, []).extend(decode_records(batch, header))
        else:
            yield decode_records(batch, header)


def _read_records(records, loaded: Loaded) -> None:
    for record in records:
        try:
            _replay(loaded, record.key or b"", record.value)
        except (ValueError, struct.error, UnicodeDecodeError, IndexError):
            continue  # a record of a newer or foreign layout: not ours to read


def append(store: Store, records: list[tuple[bytes, bytes | None]]) -> None:
    """Append (key, value-or-tombstone) records as one batch: a commit of many
    partitions is all in the topic or none of it is.

    Raises:
        LogfsError: the store refused the append (`ReadOnlyError`, a failed disk, ...).
    """
    if not records:
        return
    ensure_topic(store)
    if TOPIC not in store.topics():
        raise ReadOnlyError(f"{TOPIC} cannot be created in a read-only store")
    keys = [k for k, _ in records]
    store.log(TOPIC, 0).append([v for _, v in records], keys=keys)


def append_transactional(
    store: Store, records: list[tuple[bytes, bytes]], producer_id: int, epoch: int, now: int
) -> None:
    """Append offset commits of a producer's transaction as one transactional
    batch of its id and epoch (they take effect at its COMMIT marker).

    Raises:
        LogfsError, OSError: the store or the producer state refused it (an
            epoch that is fenced: `InvalidProducerEpochError`).
    """
    ensure_topic(store)
    if TOPIC not in store.topics():
        raise ReadOnlyError(f"{TOPIC} cannot be created in a read-only store")
    batch = control.transactional_batch(
        [v for _, v in records], [k for k, _ in records], producer_id, epoch, now
    )
    store.log(TOPIC, 0).append_batches([batch], transactional=True)
