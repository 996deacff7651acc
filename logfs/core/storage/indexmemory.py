"""The memory the sparse indexes of a process hold (index.py), bounded.

Each `_Index` reports the bytes of its arrays whenever it allocates them; past
the capacity, the indexes that reported longest ago are asked to drop theirs
(`_Index.unload`: only a sealed index whose file holds every entry does), and
read their files again when next used.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Protocol


class Unloadable(Protocol):
    def unload(self) -> bool: ...


# Index entries held in memory by all segments of a process (two int64 columns
# each, with room to grow): about 8 MiB per GiB of log at index.interval.bytes=4096.
INDEX_MEMORY_BYTES = 32 << 20


class IndexMemory:
    """The bytes of index arrays held in memory: past ``capacity``, the indexes
    loaded longest ago that can (`_Index.unload`) drop theirs."""

    def __init__(self, capacity: int = INDEX_MEMORY_BYTES) -> None:
        self.capacity = capacity
        self.used = 0
        self._held: OrderedDict[int, tuple[weakref.ref, int]] = OrderedDict()
        self._lock = threading.RLock()  # the cleaner's thread reads indexes too

    def held(self, index: Unloadable, size: int) -> None:
        """``index`` now holds arrays of ``size`` bytes (0: none)."""
        key = id(index)
        with self._lock:
            self._gone(key)
            if size:
                self._held[key] = (weakref.ref(index, lambda _, key=key: self._gone(key)), size)
                self.used += size
            # Each index is looked at once at most: one that cannot drop its
            # arrays goes to the end, so a call costs what it drops.
            for _ in range(len(self._held)):
                if self.used <= self.capacity:
                    break
                other, (ref, _size) = next(iter(self._held.items()))
                found = ref()
                if other != key and (found is None or found.unload()):
                    self._gone(other)
                else:
                    self._held.move_to_end(other)

    def _gone(self, key: int) -> None:
        with self._lock:
            item = self._held.pop(key, None)
            if item is not None:
                self.used -= item[1]


INDEX_MEMORY = IndexMemory()
