"""Opening a partition log: its segments loaded and recovered (storage/recovery.py),
its offsets and recovery point set, its leader epochs read (epochs.py), what
recovery validated made durable, the files of segments deleted before a restart
removed when due (delayed.py), and a writer's producer state read back
(transactions.py).

Offsets are never handed out twice. How far they were handed out is known
from what outlives a segment's files: the recovery point and the log start
offset (the checkpoints). If the segment files end below that (segments
removed or replaced from outside the daemon), the missing range is logged and
a writer starts a new, empty segment at that floor: the log goes on past a
gap, as Kafka's logs may, and `logfs check` reports the range. The segment
before the gap is marked as ending at the floor (`mark_missing`, as recovery
marks it at the next open), so reads of the gap fail like damage even while
nothing follows it: an offset handed out is never read as the log's end. A
last segment whose end only such a mark or damage gives is sealed the same
way, the writer's new segment starting at that end. A
live daemon that finds its active segment's file lost leaves an empty
``.log`` at its next offset (flushing.py, `mark_end`), which recovery keeps
(storage/recovery.py). Producer state snapshots are no
evidence: one past the log end is what a crash leaves when the appends before
it were never fsynced, and those offsets go again, as in Kafka."""

from __future__ import annotations

import contextlib
import logging

from ..storage.recovery import load_segments
from .flushing import LogFlushing
from .state import PartitionState
from .transactions import LogTransactions

logger = logging.getLogger(__name__)


def load_log(
    state: PartitionState,
    recovery_point: int,
    log_start_offset: int,
    handed_out_below: int,
    flushing: LogFlushing,
    txn: LogTransactions,
) -> None:
    """Fill ``state`` from its directory (a new, empty segment for a writer that
    finds none); ``handed_out_below``: an offset known handed out besides the
    recovery point (the checkpointed one, when validating from 0): a gap below
    it is kept, not taken for a torn write."""
    handed = max(recovery_point, handed_out_below)
    loaded = load_segments(
        state.dir, state.config, recovery_point, writable=state.writable,
        created_ms=state.clock(), gaps_below=handed,
    )  # fmt: skip
    for segment in loaded.segments:
        state.add_segment(segment)
    for segment in loaded.segments[:-1]:  # only the last is appended to
        segment.seal()
    state.truncated_bytes = loaded.truncated_bytes
    if loaded.deleted_files:
        state.unflushed.directory_changed()
    floor = max(handed, log_start_offset)
    last = state.segments[-1] if state.segments else None
    end = last.next_offset if last is not None else floor
    if end < floor:
        logger.error(
            "%s: offsets %d..%d were handed out but their segment files are gone "
            "(removed from outside); %s",
            state.name, end, floor - 1,
            f"the log goes on at {floor}" if state.writable else "read-only: not repaired",
        )  # fmt: skip
    # A last segment whose end only its damage or a kept gap gives (`end_unknown`:
    # its file ends below it) is not appended to either: the next record must not
    # follow what cannot be read, and its offset stays on the disk as a segment's base.
    start = max(end, floor)
    marked = last is not None and last.end_unknown and start > last.base_offset
    if state.writable and (last is None or end < floor or marked):
        if last is not None:
            if end < floor and not state.config.compact:  # reads of the gap fail, as after a reopen
                last.mark_missing(floor)
            last.seal()
        state.add_segment(state.new_segment(start))
        state.unflushed.directory_changed()
    # Retention moves the log start; cleaning does not, though it may leave
    # nothing of the first segments (Kafka's compacted logs start at 0).
    first_base = state.bases[0] if state.bases and not state.config.compact else 0
    state.log_start_offset = max(log_start_offset, first_base)
    state.log_start_offset = min(state.log_start_offset, state.next_offset)
    state.recovery_point = min(recovery_point, state.next_offset)
    state.epochs.load(state.log_start_offset, state.writable)
    if state.writable:
        state.removal.found(state.clock())
        # What recovery validated past the recovery point may still be only in
        # the page cache (a process crash): make it durable before trusting it.
        for segment in state.segments[loaded.first_recovered :]:
            if segment.next_offset > recovery_point or state.truncated_bytes:
                state.unflushed.appended(segment)
        with contextlib.suppress(OSError):  # if so, it opens offline (`fail` logged why)
            flushing.flush()  # advances the recovery point to next_offset
        if state.segments:  # a writer knows its producers and LSO from the start
            txn.load()
