"""Producer state snapshots: ``<offset, 20 digits>.snapshot`` files, Kafka's format.

A snapshot holds a partition's producer state as it was once every record below its
offset was appended (Kafka's ``ProducerStateManager.writeSnapshot``; the schema is
Kafka's ``ProducerSnapshot`` message, version 1). Big-endian::

    version          int16    1
    crc              uint32   CRC-32C of everything after this field
    entries          int32    count, then per producer id:
      producer id             int64
      epoch                   int16
      last sequence           int32   of its last batch
      last offset             int64   of its last batch (-1: no batch kept)
      offset delta            int32   last offset - first offset of its last batch
      timestamp               int64   its last batch's max timestamp
      coordinator epoch       int32   of the last transaction marker written for it
      current txn first offset int64  its open transaction's first offset, -1 for none

Only the last batch of each producer is stored, as Kafka stores it; the ones before
it come back by replaying the log from the snapshot's offset.

Crash protocol: a snapshot is written to ``<name>.tmp``, fsynced, renamed into place
and the directory fsynced, so a snapshot that exists is whole; a ``.tmp`` left by a
crash is removed at the next open. A snapshot whose CRC or layout is wrong is
deleted and an earlier one used (or none: the log is replayed from its start).
Snapshots are taken when a segment rolls (named by the new segment's base offset)
and at a clean close (named by the log end offset); when the log start moves past
them (retention, `logfs check --repair`) all but the latest below it go.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from ..errors import CorruptIndexError
from .logfile import base_offset_of, fsync_dir, segment_name

SUFFIX = ".snapshot"
VERSION = 1
PREFIX = struct.Struct(">hI")  # version, crc
COUNT = struct.Struct(">i")
ENTRY = struct.Struct(
    ">"
    "q"  # producer id
    "h"  # epoch
    "i"  # last sequence
    "q"  # last offset
    "i"  # offset delta
    "q"  # timestamp
    "i"  # coordinator epoch
    "q"  # current transaction's first offset
)
CRC_START = PREFIX.size  # the CRC covers what follows it


class SnapshotEntry(NamedTuple):
    """One producer id's state, as a snapshot stores it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    txn_first_offset: int


def encode(entries: list[SnapshotEntry]) -> bytes:
    body = COUNT.pack(len(entries)) + b"".join(ENTRY.pack(*e) for e in entries)
    return PREFIX.pack(VERSION, crc32c(body)) + body


def decode(data: bytes, path: str = "") -> list[SnapshotEntry]:
    """The entries of a snapshot file's bytes.

    Raises:
        CorruptIndexError: an unknown version, a wrong CRC or size.
    """
    if len(data) < PREFIX.size + COUNT.size:
        raise CorruptIndexError(f"{path}: {len(data)} bytes is too short for a snapshot")
    version, crc = PREFIX.unpack_from(data)
    if version != VERSION:
        raise CorruptIndexError(f"{path}: snapshot version {version}, expected {VERSION}")
    computed = crc32c(data[CRC_START:])
    if computed != crc:
        raise CorruptIndexError(f"{path}: stored crc 0x{crc:08x} != computed 0x{computed:08x}")
    (count,) = COUNT.unpack_from(data, PREFIX.size)
    body = data[PREFIX.size + COUNT.size :]
    if count < 0 or len(body) != count * ENTRY.size:
        raise CorruptIndexError(f"{path}: {count} entries in {len(body)} bytes")
    return [SnapshotEntry(*fields) for fields in ENTRY.iter_unpack(body)]


def snapshot_path(directory: str | os.PathLike, offset: int) -> Path:
    return Path(directory) / segment_name(offset, SUFFIX)


def snapshot_offsets(directory: str | os.PathLike) -> list[int]:
    """The offsets of the directory's snapshots, sorted; ``.tmp`` files a crash left
    are removed (when the directory is writable)."""
    offsets = []
    for name in os.listdir(directory):
        if name.endswith(SUFFIX + ".tmp"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))
            continue
        offset = base_offset_of(name, SUFFIX)
        if offset is not None:
            offsets.append(offset)
    return sorted(offsets)


def read_snapshot(directory: str | os.PathLike, offset: int) -> list[SnapshotEntry]:
    """Raises `CorruptIndexError` (a bad file) or OSError (an unreadable one)."""
    path = snapshot_path(directory, offset)
    return decode(path.read_bytes(), str(path))


def write_snapshot(
    directory: str | os.PathLike, offset: int, entries: list[SnapshotEntry], *, sync: bool = True
) -> None:
    """Write the snapshot at ``offset`` by the crash protocol above (replacing one
    of the same offset); without ``sync`` the fsyncs are left to a later flush."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(encode(entries))
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.rename(tmp, path)
    if sync:
        fsync_dir(directory)


def delete_snapshot(directory: str | os.PathLike, offset: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(snapshot_path(directory, offset))
