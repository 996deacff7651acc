"""Opening a partition log: its segments loaded and recovered (storage/recovery.py),
its offsets and recovery point set, its leader epochs read (epochs.py), what
recovery validated made durable, the files of segments deleted before a restart
removed when due (delayed.py), and a writer's producer state read back
(transactions.py).

Offsets are never handed out twice: the recovery point and the log start
offset (the checkpoints) say how far offsets were handed out. If the segment
files end below that (a segment removed or replaced from outside the daemon),
the partition opens offline with that reason (failure.py): nothing is
appended, its recovery point stays as checkpointed so the next open sees the
same, and `logfs check` reports it. Only putting the files back, or deleting
the topic, brings it back."""

from __future__ import annotations

import contextlib
import errno

from ..storage.recovery import load_segments
from .flushing import LogFlushing
from .state import PartitionState
from .transactions import LogTransactions


def load_log(
    state: PartitionState,
    recovery_point: int,
    log_start_offset: int,
    flushing: LogFlushing,
    txn: LogTransactions,
) -> None:
    """Fill ``state`` from its directory (a new, empty segment for a writer that
    finds none)."""
    loaded = load_segments(
        state.dir, state.config, recovery_point, writable=state.writable,
        created_ms=state.clock(),
    )  # fmt: skip
    for segment in loaded.segments:
        state.add_segment(segment)
    for segment in loaded.segments[:-1]:  # only the last is appended to
        segment.seal()
    state.truncated_bytes = loaded.truncated_bytes
    if loaded.deleted_files:
        state.unflushed.directory_changed()
    if not state.segments and state.writable:
        state.add_segment(state.new_segment(log_start_offset))
        state.unflushed.directory_changed()
    # Retention moves the log start; cleaning does not, though it may leave
    # nothing of the first segments (Kafka's compacted logs start at 0).
    first_base = state.bases[0] if state.bases and not state.config.compact else 0
    state.log_start_offset = max(log_start_offset, first_base)
    state.log_start_offset = min(state.log_start_offset, state.next_offset)
    state.recovery_point = min(recovery_point, state.next_offset)
    handed_out = max(recovery_point, log_start_offset)
    if state.next_offset < handed_out:
        state.recovery_point = recovery_point  # kept: the evidence, checkpointed again
        state.fail("opening the partition", missing_segments(state, handed_out))
    state.epochs.load(state.log_start_offset, state.writable)
    if state.writable:
        state.removal.found(state.clock())
        # What recovery validated past the recovery point may still be only in
        # the page cache (a process crash): make it durable before trusting it.
        for segment in state.segments[loaded.first_recovered :]:
            if segment.next_offset > recovery_point or state.truncated_bytes:
                state.unflushed.appended(segment)
        if state.failure.reason is not None:
            return  # offline from the start: nothing to make durable or read back
        with contextlib.suppress(OSError):  # if so, it opens offline (`fail` logged why)
            flushing.flush()  # advances the recovery point to next_offset
        if state.segments:  # a writer knows its producers and LSO from the start
            txn.load()


def missing_segments(state: PartitionState, handed_out: int) -> FileNotFoundError:
    """Why a partition whose files end below ``handed_out`` cannot be trusted."""
    return FileNotFoundError(
        errno.ENOENT,
        f"offsets up to {handed_out} were handed out (the checkpoints say), but the "
        f"segment files end at offset {state.next_offset}: segments were removed from outside",
        str(state.dir),
    )
