"""Sparse offset and time indexes of one segment, Kafka's file formats.

``<base>.index`` holds 8-byte entries, big-endian::

    relative offset  int32   offset - segment base offset
    position         int32   byte position of a batch in the .log file

An entry (o, p) says: the batch at position p ends at offset o (Kafka indexes
a batch by its last offset). One entry is added each time more than
``index.interval.bytes`` of log were written since the previous one.

``<base>.timeindex`` holds 12-byte entries, big-endian::

    timestamp        int64   largest timestamp in the segment up to ...
    relative offset  int32   ... this offset

Time entries are added at the same points, only when the largest timestamp
grew, so both columns are non-decreasing.

Both files are derived data. Their one query is "largest lower bound": the
last entry whose key is <= the target. A missing, truncated or inconsistent
index is rebuilt from the log; Kafka's preallocated files with zero-filled
tails are read by dropping the zero entries.

New entries are pending in memory until `write_pending` appends them to the
file, which the segment calls when it is flushed, rolled or closed (and after
recovery); an entry lost in a crash is rebuilt from the log, as the index is
trusted only up to the recovery point.

The entries held in memory, over every segment of the process, are bounded
(indexmemory.py), as Kafka bounds them by mapping the
files: past the bound, the index loaded longest ago whose every entry is in
its file (a writer's sealed index: its segment takes no more appends) drops its
arrays and reads its file again when next used. So memory does not grow with
the data a daemon holds. Only a sealed index is dropped: one still appended to
(perhaps in a worker thread, the cleaner's) never is; a read in another thread
takes whole arrays, dropped or not, and the file holds the same entries.
"""

from __future__ import annotations

import errno
import os
from typing import NamedTuple

import numpy as np

from ..errors import CorruptIndexError
from .indexmemory import INDEX_MEMORY

OFFSET_ENTRY = np.dtype([("offset", ">i4"), ("position", ">i4")])
TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("offset", ">i4")])


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _Index:
    """Entries of one index file: two growable int64 columns mirrored on disk.

    Entries added are pending in memory; `write_pending` appends them to the
    file in one write, `close` too. fsync is the caller's, on `fileno`.
    """

    dtype: np.dtype

    def __init__(self, path: str, base_offset: int, max_bytes: int, *, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.dtype.itemsize)
        self.writable = writable
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # None: in the file only
        self.sealed = False  # no entry is added any more (`seal`): the arrays may be dropped
        self._reset(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        self._written = 0  # entries [_written, _count) are not in the file yet
        self._fd = -1

    # ------------------------------------------------------------ state

    @property
    def _keys(self) -> np.ndarray:
        return (self._arrays or self._reload())[0]

    @property
    def _values(self) -> np.ndarray:
        return (self._arrays or self._reload())[1]

    def seal(self) -> None:
        """No entry will be added: once every entry is in the file, the arrays
        may be dropped (`unload`)."""
        self.sealed = True

    def unload(self) -> bool:
        """Drop the arrays if the index is sealed and the file holds every entry
        (a writer's, nothing pending); True if dropped. Read again when next used."""
        if not (self.sealed and self.writable and self._written == self._count):
            return False
        self._arrays = None
        return True

    def _reload(self) -> tuple[np.ndarray, np.ndarray]:
        count, written = self._count, self._written
        self.load()
        if self._count < count:  # (more is a truncation about to rewrite the file)
            raise CorruptIndexError(
                f"{self.path}: {self._count} entries read back, {count} were written"
            )
        self._set_count(count)
        self._written = min(written, count)
        assert self._arrays is not None
        return self._arrays

    def __len__(self) -> int:
        return self._count

    def _set_count(self, count: int) -> None:
        self._count = count
        # Kept as the count changes: the roll rule reads it before every append.
        self.is_full = count >= self.max_entries

    def entry(self, i: int) -> tuple[int, int]:
        return int(self._keys[i]), int(self._values[i])

    def _lower_bound(self, key: int) -> int:
        """Index of the last entry whose key is <= ``key``, or -1."""
        return int(np.searchsorted(self._keys[: self._count], key, side="right")) - 1

    # ------------------------------------------------------------ file I/O

    def load(self) -> None:
        """Read the file; raises `CorruptIndexError` when it is inconsistent."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % self.dtype.itemsize:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {self.dtype.itemsize}"
            )
        entries = np.frombuffer(data, dtype=self.dtype)
        nonzero = np.flatnonzero(
            (entries[self.dtype.names[0]] != 0) | (entries[self.dtype.names[1]] != 0)
        )
        entries = entries[: nonzero[-1] + 1 if len(nonzero) else 0]  # Kafka's preallocated tail
        keys, values = self._columns(entries)
        if len(keys) > 1 and (np.any(np.diff(keys) < 0) or np.any(np.diff(values) < 0)):
            raise CorruptIndexError(f"{self.path}: entries are not in order")
        self._reset(keys, values)
        self._written = self._count
        if self.writable and len(entries) * self.dtype.itemsize != len(data):
            self._rewrite()

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def write_pending(self) -> None:
        """Append the entries added since the last call to the file."""
        if self._written < self._count and self.writable:
            fd, data = self._open(), self._entries_bytes(self._written, self._count)
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, "short write of index entries")
            except OSError:
                os.ftruncate(fd, self._written * self.dtype.itemsize)  # whole entries only
                raise
        self._written = self._count

    def fileno(self) -> int:
        """The file's descriptor, to fsync; pending entries are not written
        (call `write_pending` first)."""
        return self._open()

    def _rewrite(self) -> None:
        """Replace the file with exactly the entries in memory."""
        self._written = self._count
        self.close()
        data = self._entries_bytes(0, self._count)
        with open(self.path, "wb") as f:
            f.write(data)

    def close(self) -> None:
        self.write_pending()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def release(self) -> None:
        """Close the file without writing: pending entries stay pending."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # ------------------------------------------------------------ mutation

    def _reset(self, keys: np.ndarray, values: np.ndarray, room: int = 0) -> None:
        """Hold ``keys`` and ``values``, with room for as many more and ``room``."""
        capacity = max(16, (len(keys) + room) * 2) if len(keys) + room else 0
        new_keys = np.empty(capacity, dtype=np.int64)
        new_values = np.empty(capacity, dtype=np.int64)
        new_keys[: len(keys)] = keys
        new_values[: len(values)] = values
        self._arrays = (new_keys, new_values)
        self._set_count(len(keys))
        INDEX_MEMORY.held(self, 16 * capacity)

    def _add(self, key: int, value: int) -> None:
        if self._count == len(self._keys):
            self._reset(self._keys[: self._count], self._values[: self._count], 1)
        self._keys[self._count] = key
        self._values[self._count] = value
        self._set_count(self._count + 1)

    def _extend(self, keys: np.ndarray, values: np.ndarray) -> None:
        n, end = self._count, self._count + len(keys)
        if end > len(self._keys):
            self._reset(self._keys[:n], self._values[:n], len(keys))
        self._keys[n:end] = keys
        self._values[n:end] = values
        self._set_count(end)

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and on disk."""
        if count < self._count:
            self._set_count(count)
            if self.writable:
                self._rewrite()

    def clear(self) -> None:
        self._set_count(0)
        if self.writable:
            self._rewrite()

    def _entries_bytes(self, start: int, end: int) -> bytes:
        return self._entries_array(start, end).tobytes()

    def _columns(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _entries_array(self, start: int, end: int) -> np.ndarray:
        raise NotImplementedError


class OffsetIndex(_Index):
    """Maps offsets to byte positions in the segment's log."""

    dtype = OFFSET_ENTRY

    def _columns(self, entries):
        return entries["offset"].astype(np.int64) + self.base_offset, entries["position"].astype(
            np.int64
        )

    def _entries_array(self, start, end):
        out = np.empty(end - start, dtype=OFFSET_ENTRY)
        out["offset"] = self._keys[start:end] - self.base_offset
        out["position"] = self._values[start:end]
        return out

    @property
    def last(self) -> OffsetPosition:
        if not self._count:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(*self.entry(self._count - 1))

    def lookup(self, offset: int) -> OffsetPosition:
        """The last entry with offset <= ``offset``; (base offset, 0) if none."""
        i = self._lower_bound(offset)
        return OffsetPosition(*self.entry(i)) if i >= 0 else OffsetPosition(self.base_offset, 0)

    def first_at_least(self, offset: int) -> OffsetPosition | None:
        """The first entry with offset >= ``offset`` (the batch it points at ends
        there, so holds ``offset`` if it starts at or before it); None if none."""
        i = int(self._keys[: self._count].searchsorted(offset))  # (numpy's wrapper costs)
        return OffsetPosition(*self.entry(i)) if i < self._count else None

    def position_at_most(self, position: int) -> int:
        """The largest position an entry points at (a batch's start) that is
        <= ``position``; 0 if none."""
        i = int(np.searchsorted(self._values[: self._count], position, side="right")) - 1
        return int(self._values[i]) if i >= 0 else 0

    def append(self, offset: int, position: int) -> None:
        if self._count and offset <= self._keys[self._count - 1]:
            raise CorruptIndexError(
                f"{self.path}: offset {offset} does not follow {self.last.offset}"
            )
        self._add(offset, position)

    def extend(self, offsets: np.ndarray, positions: np.ndarray) -> None:
        """`append` of many entries, in order."""
        if len(offsets) and (
            (self._count and offsets[0] <= self._keys[self._count - 1])
            or np.any(offsets[1:] <= offsets[:-1])
        ):
            raise CorruptIndexError(f"{self.path}: offsets {offsets.tolist()} out of order")
        self._extend(offsets, positions)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries that point at or past ``position``."""
        self.truncate(int(np.searchsorted(self._values[: self._count], position, side="left")))

    def check(self, log_size: int) -> None:
        """Raise `CorruptIndexError` if an entry points outside the log."""
        if self._count and self._values[self._count - 1] >= max(log_size, 1):
            raise CorruptIndexError(
                f"{self.path}: entry points at position {self.last.position}, "
                f"log is {log_size} bytes"
            )
        if self._count and self._values[0] < 0:  # positions are in order: the first is least
            raise CorruptIndexError(f"{self.path}: entry points at position {int(self._values[0])}")


class TimeIndex(_Index):
    """Maps timestamps to the offsets by which they were reached."""

    dtype = TIME_ENTRY

    def _columns(self, entries):
        return entries["timestamp"].astype(np.int64), entries["offset"].astype(
            np.int64
        ) + self.base_offset

    def _entries_array(self, start, end):
        out = np.empty(end - start, dtype=TIME_ENTRY)
        out["timestamp"] = self._keys[start:end]
        out["offset"] = self._values[start:end] - self.base_offset
        return out

    @property
    def last(self) -> TimestampOffset | None:
        return TimestampOffset(*self.entry(self._count - 1)) if self._count else None

    def lookup_before(self, timestamp: int) -> TimestampOffset | None:
        """The last entry whose timestamp is < ``timestamp``: every record up to
        its offset is older than ``timestamp``."""
        i = int(np.searchsorted(self._keys[: self._count], timestamp, side="left")) - 1
        return TimestampOffset(*self.entry(i)) if i >= 0 else None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is larger than the last one."""
        n = self._count
        if not n or (timestamp > self._keys[n - 1] and offset > self._values[n - 1]):
            self._add(timestamp, offset)

    def extend_maybe(self, timestamps: np.ndarray, offsets: np.ndarray) -> None:
        """`maybe_append` of each pair in turn, for nondecreasing timestamps and
        offsets (a running maximum and the offset that reached it): the pairs
        whose timestamp and offset both exceed the previous pair's and the
        last entry's."""
        if not len(timestamps):
            return
        n = self._count
        last_ts = self._keys[n - 1] if n else np.iinfo(np.int64).min
        last_offset = self._values[n - 1] if n else np.iinfo(np.int64).min
        previous_ts = np.concatenate(([last_ts], np.maximum(timestamps[:-1], last_ts)))
        previous_offset = np.concatenate(([last_offset], np.maximum(offsets[:-1], last_offset)))
        keep = (timestamps > previous_ts) & (offsets > previous_offset)
        self._extend(timestamps[keep], offsets[keep])

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        self.truncate(int(np.searchsorted(self._values[: self._count], offset, side="left")))

    def check(self, next_offset: int) -> None:
        last = self.last
        if last is not None and last.offset >= next_offset:
            raise CorruptIndexError(
                f"{self.path}: entry for offset {last.offset} past log end {next_offset}"
            )
