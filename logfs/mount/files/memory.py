"""The memory the mount shares between its nodes and open files, each part
bounded per mount (docs/mount.md, "Limits").

`RecordCache` holds the records ``offset/<n>`` and ``keys/<name>`` show,
least recently used dropped past a number of bytes: a node keeps only its
size and timestamp, so nodes the kernel holds on to cost little however
large their values. `Pool` is the read-ahead that ``stream`` readers share:
what one reader holds beyond its request is taken from it and given back
once read; and, as a second pool, the bytes of partial lines that open append
files hold (`PARTIAL_LINES_BYTES`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from ...core.format import Record

# Cached record values, keys and headers per mount.
RECORD_CACHE_BYTES = 64 << 20
# Read-ahead of all stream readers of a mount, beyond what each one asked for.
READ_AHEAD_SHARED_BYTES = 64 << 20
# Partial lines (and binary frames, batches) held by all open append files of a
# mount until the rest is written: each one's own cap is the topic's
# max.message.bytes, so without this many writers could hold that many each.
PARTIAL_LINES_BYTES = 64 << 20

RECORD_OVERHEAD = 200  # a Record and its bytes objects, roughly


def record_cost(record: Record) -> int:
    """The bytes ``record`` keeps in memory, roughly."""
    headers = sum(len(k) + len(v or b"") for k, v in record.headers)
    return RECORD_OVERHEAD + len(record.value or b"") + len(record.key or b"") + headers


class RecordCache:
    """Records by key, at most ``capacity`` bytes of them (`record_cost`);
    the least recently used go first, a record larger than all of it is not
    kept."""

    def __init__(self, capacity: int = RECORD_CACHE_BYTES) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[Hashable, tuple[Record, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable) -> Record | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: Hashable, record: Record) -> None:
        cost = record_cost(record)
        old = self._items.pop(key, None)
        if old is not None:
            self.size -= old[1]
        if cost > self.capacity:
            return
        self._items[key] = record, cost
        self.size += cost
        while self.size > self.capacity:
            _, (_, dropped) = self._items.popitem(last=False)
            self.size -= dropped


class Pool:
    """``capacity`` bytes shared by takers: `take` grants what is left, up to
    what was asked; `give` returns it."""

    def __init__(self, capacity: int = READ_AHEAD_SHARED_BYTES) -> None:
        self.capacity = capacity
        self.used = 0

    def take(self, size: int) -> int:
        granted = max(0, min(size, self.capacity - self.used))
        self.used += granted
        return granted

    def give(self, size: int) -> None:
        self.used -= size
