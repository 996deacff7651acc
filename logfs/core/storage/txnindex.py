"""A segment's transaction index: the aborted transactions whose abort marker
is in the segment, as Kafka's ``TransactionIndex`` keeps them.

File ``<base offset, 20 digits>.txnindex`` beside the segment's ``.log``,
created with its first entry. Entries back to back, 34 bytes each, big-endian
(Kafka's ``AbortedTxn``, version 0)::

    version              int16   0
    producer id          int64
    first offset         int64   the transaction's first record (possibly in an earlier segment)
    last offset          int64   its abort marker's offset (in this segment)
    last stable offset   int64   the partition's LSO once the marker was written

Entries are in the order of their markers, so ``last offset`` increases. A
``read_committed`` reader (a Fetch with isolation level 1, the mount's readers, the
Spark source) asks for the entries overlapping the range it reads and leaves out
those producers' transactional records from each entry's first offset to its marker.

Crash rule: the index is derived data, like the offset index. Entries are written
when the marker is appended and fsynced with the segment; opening a partition trusts
the entries below the point it replays its producer state from, cuts the rest and
rebuilds them from the markers it replays (`truncate_to`, then `append`). A torn
entry (a size that is not a multiple of 34) is cut at open.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from typing import NamedTuple

from ..errors import CorruptIndexError

logger = logging.getLogger(__name__)

ENTRY = struct.Struct(
    ">"
    "h"  # version: 0
    "q"  # producer id
    "q"  # first offset
    "q"  # last offset: the abort marker's
    "q"  # last stable offset after the abort
)
VERSION = 0
SUFFIX = ".txnindex"


class AbortedTxn(NamedTuple):
    """One aborted transaction of a partition."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(VERSION, *txn)


def decode(data: bytes | memoryview, path: str = "") -> list[AbortedTxn]:
    """The entries of a whole index file's bytes.

    Raises:
        CorruptIndexError: a size that is not a multiple of the entry size, an
            unknown version, or last offsets that do not increase.
    """
    if len(data) % ENTRY.size:
        raise CorruptIndexError(f"{path}: {len(data)} bytes is not a multiple of {ENTRY.size}")
    out: list[AbortedTxn] = []
    for version, *fields in ENTRY.iter_unpack(data):
        txn = AbortedTxn(*fields)
        if version != VERSION:
            raise CorruptIndexError(f"{path}: entry {len(out)} has version {version}")
        if out and txn.last_offset <= out[-1].last_offset:
            raise CorruptIndexError(
                f"{path}: entry {len(out)} ends at {txn.last_offset}, "
                f"not after {out[-1].last_offset}"
            )
        if txn.first_offset > txn.last_offset:
            raise CorruptIndexError(f"{path}: entry {len(out)} starts after its marker")
        out.append(txn)
    return out


class TransactionIndex:
    """The aborted transactions of one segment, in memory and in its file.

    Small (one entry per aborted transaction), so the whole index is kept in memory;
    the file is opened for each write, so it holds no descriptor.
    """

    def __init__(self, path: str, *, writable: bool) -> None:
        self.path = path
        self.writable = writable
        self.entries: list[AbortedTxn] = []
        self.unsynced = False
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        try:
            self.entries = decode(data, path)
        except CorruptIndexError as e:
            whole = len(data) - len(data) % ENTRY.size
            logger.warning("%s; keeping the %d whole entries before it", e, whole // ENTRY.size)
            self.entries = _longest_valid(data[:whole])
            if writable:
                self._rewrite()

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (its marker follows every earlier entry's).

        Raises:
            ValueError: its marker does not follow the last entry's.
            OSError: writing the file failed.
        """
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: an aborted transaction ending at {txn.last_offset} "
                f"after one ending at {self.entries[-1].last_offset}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, encode(txn))
        finally:
            os.close(fd)
        self.entries.append(txn)
        self.unsynced = True

    def collect(self, start: int, end: int) -> list[AbortedTxn]:
        """The entries overlapping offsets [start, end) (Kafka's ``collectAbortedTxns``)."""
        return [t for t in self.entries if t.last_offset >= start and t.first_offset < end]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (rebuilt by a replay)."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            if self.writable:
                self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            return
        with open(self.path, "r+b") as f:
            f.truncate(len(self.entries) * ENTRY.size)
        self.unsynced = True

    def sync(self) -> None:
        """fsync the file if entries were written since the last sync."""
        if not self.unsynced:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        self.unsynced = False


def _longest_valid(data: bytes) -> list[AbortedTxn]:
    """The entries of ``data`` up to the first that does not fit the rules."""
    out: list[AbortedTxn] = []
    for version, *fields in ENTRY.iter_unpack(data):
        txn = AbortedTxn(*fields)
        bad_order = out and txn.last_offset <= out[-1].last_offset
        if version != VERSION or bad_order or txn.first_offset > txn.last_offset:
            break
        out.append(txn)
    return out
