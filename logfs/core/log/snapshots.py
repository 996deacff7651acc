"""When a partition's producer state is snapshotted, and which snapshots it keeps.

The file format and its crash protocol are storage/snapshot.py's. A snapshot is
taken when a segment rolls (at the new segment's base offset: what the state was
once every record before it was appended) and at a clean close (at the log end),
as Kafka takes them — but only for a partition that has had producers (a
partition only ever appended to through the mount or `Log.append` has no state to
keep, and gets no files). A roll's snapshot is not fsynced on the appending
path: the directory is synced with the next flush, and a snapshot a power
failure garbled is found by its CRC at the next open, deleted, and the state
replayed from an earlier one. The close's snapshot is fsynced.

Kept: the snapshots at or above the log start offset that are at a segment's
base offset, and the latest one (Kafka's ``removeStraySnapshots`` and
``deleteSnapshotsBefore``).
"""

from __future__ import annotations

import logging

from ..errors import CorruptIndexError
from ..storage.snapshot import (
    SnapshotEntry,
    delete_snapshot,
    read_snapshot,
    snapshot_offsets,
    write_snapshot,
)
from .state import PartitionState

logger = logging.getLogger(__name__)


def take_snapshot(state: PartitionState, offset: int, *, sync: bool = False) -> None:
    """Snapshot the producer state at ``offset`` (the log end at the time), if it
    is loaded and there is something to keep; expired producers are forgotten
    first. A failure is logged, never raised: snapshots only save replaying."""
    producers = state.producers
    if producers is None or not state.writable or state.failure.reason is not None:
        return
    try:
        producers.expire(state.clock(), state.producer_id_expiration_ms)
        if not producers.producers and not snapshot_offsets(state.dir):
            return
        write_snapshot(state.dir, offset, producers.snapshot(), sync=sync)
        if not sync:
            state.unflushed.directory_changed()
    except OSError as e:
        logger.warning("%s: producer state snapshot at %d not written: %s", state.name, offset, e)


def latest_snapshot(state: PartitionState) -> tuple[int, list[SnapshotEntry]] | None:
    """The latest readable snapshot at or below the log end: (offset, entries).
    Snapshots past the log end (the log was cut by recovery) and unreadable ones
    are deleted in a writable log."""
    try:
        offsets = snapshot_offsets(state.dir)
    except FileNotFoundError:
        return None
    end = state.next_offset
    for offset in reversed(offsets):
        if offset > end:
            if state.writable:
                delete_snapshot(state.dir, offset)
            continue
        try:
            return offset, read_snapshot(state.dir, offset)
        except (CorruptIndexError, OSError) as e:
            logger.warning("%s: producer state snapshot %d unusable: %s", state.name, offset, e)
            if state.writable:
                delete_snapshot(state.dir, offset)
    return None


def remove_stray(state: PartitionState) -> None:
    """Delete the snapshots neither at a segment's base offset nor the latest one,
    and those below the log start offset."""
    if not state.writable:
        return
    try:
        offsets = snapshot_offsets(state.dir)
    except FileNotFoundError:
        return
    bases = set(state.bases)
    for offset in offsets[:-1]:
        if offset not in bases or offset < state.log_start_offset:
            delete_snapshot(state.dir, offset)
