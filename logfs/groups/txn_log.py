"""``__transaction_state``: the compacted internal topic where the transaction
coordinator keeps each transactional id's state, in Kafka's own record formats
(its ``TransactionLogKey`` and ``TransactionLogValue`` schemas, value version 0),
so Kafka's tools read it as theirs. Big-endian; a string is an int16 length and
UTF-8 bytes:

- key, version 0: version int16 (0), transactional id (string);
- value, version 0: version int16 (0), producer id int64, producer epoch int16,
  transaction timeout ms int32, status int8 (0 Empty, 1 Ongoing, 2 PrepareCommit,
  3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence),
  partitions (int32 count, -1 for null as Kafka writes for Empty; each: topic
  string, int32 count of int32 partition ids), last update timestamp ms int64,
  transaction start timestamp ms int64.

Values of version 1 (flexible, Kafka 4's transaction version 2, which this
coordinator does not serve) are skipped when read. A transactional id that
expired gets a tombstone. One partition holds every transactional id (one node; Kafka's default
is 50).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..core.config import TRANSACTION_STATE as TOPIC
from ..core.errors import ReadOnlyError
from ..core.log import Store

PARTITIONS = 1
CONFIG = {"cleanup.policy": "compact"}
KEY_VERSION, VALUE_VERSION = 0, 0

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = 0, 1, 2, 3
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = 4, 5, 6, 7
STATUS_NAMES = {
    EMPTY: "Empty",
    ONGOING: "Ongoing",
    PREPARE_COMMIT: "PrepareCommit",
    PREPARE_ABORT: "PrepareAbort",
    COMPLETE_COMMIT: "CompleteCommit",
    COMPLETE_ABORT: "CompleteAbort",
    DEAD: "Dead",
    PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_I8, _I16, _I32, _I64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q"))


class StoredTxn(NamedTuple):
    """A transactional id's state as the topic keeps it."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def value(t: StoredTxn) -> bytes:
    parts = [
        _I16.pack(VALUE_VERSION),
        _I64.pack(t.producer_id),
        _I16.pack(t.producer_epoch),
        _I32.pack(t.timeout_ms),
        _I8.pack(t.status),
    ]
    if t.status == EMPTY:
        parts.append(_I32.pack(-1))  # Kafka writes no partitions for an Empty transaction
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(p)
        parts.append(_I32.pack(len(by_topic)))
        for topic, ids in by_topic.items():
            parts += [_string(topic), _I32.pack(len(ids)), *(_I32.pack(i) for i in ids)]
    parts += [_I64.pack(t.last_update_ms), _I64.pack(t.start_ms)]
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.at)
        self.at += s.size
        return v

    def string(self) -> str:
        size = self.take(_I16)
        if not 0 <= size <= len(self.data) - self.at:
            raise ValueError("a string runs past the record")
        text = self.data[self.at : self.at + size].decode()
        self.at += size
        return text


def read_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a key of an unknown version."""
    r = _Reader(data)
    if r.take(_I16) != KEY_VERSION:
        return None
    return r.string()


def read_value(data: bytes) -> StoredTxn:
    """A value of version 0.

    Raises:
        ValueError, struct.error: not a value Kafka writes.
    """
    r = _Reader(data)
    version = r.take(_I16)
    if version != VALUE_VERSION:
        raise ValueError(f"transaction log value version {version}")
    producer_id, epoch, timeout, status = r.take(_I64), r.take(_I16), r.take(_I32), r.take(_I8)
    partitions = []
    count = r.take(_I32)
    for _ in range(max(count, 0)):
        topic = r.string()
        for _ in range(r.take(_I32)):
            partitions.append((topic, r.take(_I32)))
    last_update, start = r.take(_I64), r.take(_I64)
    return StoredTxn(producer_id, epoch, timeout, status, tuple(partitions), last_update, start)


def ensure_topic(store: Store) -> None:
    if TOPIC not in store.topics() and not store.read_only:
        store.create_topic(TOPIC, partitions=PARTITIONS, config=CONFIG)


def load(store: Store) -> dict[str, StoredTxn]:
    """Every transactional id's latest state in the topic (tombstones remove)."""
    out: dict[str, StoredTxn] = {}
    for p in range(store.topics().get(TOPIC, 0)):
        for record in store.log(TOPIC, p).scan():
            try:
                txn_id = read_key(record.key or b"")
                if txn_id is None:
                    continue
                if record.value is None:
                    out.pop(txn_id, None)
                else:
                    out[txn_id] = read_value(record.value)
            except (ValueError, struct.error, UnicodeDecodeError):
                continue  # a record of a layout this version does not read
    return out


def append(store: Store, records: list[tuple[str, StoredTxn | None]]) -> None:
    """Append states (None: a tombstone) as one batch.

    Raises:
        LogfsError, OSError: the store refused the append.
    """
    if not records:
        return
    ensure_topic(store)
    if TOPIC not in store.topics():
        raise ReadOnlyError(f"{TOPIC} cannot be created in a read-only store")
    keys = [key(t) for t, _ in records]
    values = [None if s is None else value(s) for _, s in records]
    store.log(TOPIC, 0).append(values, keys=keys)
