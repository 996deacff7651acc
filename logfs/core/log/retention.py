"""Moving a partition log's start: retention, which deletes whole non-active
segments past retention.ms or beyond retention.bytes, oldest first
(`segments_to_delete`, in config.py, decides), and Kafka's DeleteRecords. The
segments taken out have their files removed after file.delete.delay.ms
(delayed.py); the leader-epoch-checkpoint follows the new start (epochs.py)."""

from __future__ import annotations

from ..config import segments_to_delete
from ..errors import OffsetOutOfRangeError, PolicyViolationError
from .state import PartitionState


def enforce_retention(
    state: PartitionState, now_ms: int | None = None, keep_from: int | None = None
) -> int:
    """Delete the segments retention says go; returns how many were deleted. Files
    deleted earlier whose file.delete.delay.ms has passed go from the disk now.

    ``keep_from``: no segment holding this offset or a later one goes (the next offset a
    mirror forwards: retention waits for it), whatever retention says.

    Raises:
        OSError: a segment's files could not be removed (the partition goes offline).
    """
    now = state.clock() if now_ms is None else now_ms
    if state.writable:
        state.removal.remove_due(now)
    if not state.writable or state.failure.reason is not None or not state.config.delete:
        return 0
    count = segments_to_delete(
        state.config,
        sizes=[s.size for s in state.segments],
        max_timestamps=[s.largest_timestamp for s in state.segments],
        now_ms=now,
    )
    if keep_from is not None:  # segment i goes only if the next one starts at or below it
        while count and state.segments[count].base_offset > keep_from:
            count -= 1
    _drop_oldest(state, count, "retention", now)
    return count


def delete_records(state: PartitionState, offset: int, *, follower: bool = False) -> int:
    """Kafka's DeleteRecords: the log starts at ``offset`` (-1: the log end) from now
    on, the segments wholly below it are deleted; never moves it back. Returns the
    log start offset. ``follower``: the follower's, the log start of the partition
    it copies (following.py).

    Raises:
        ReadOnlyError, LogFailedError: as an append.
        OffsetOutOfRangeError: ``offset`` is past the log end.
        PolicyViolationError: the topic's cleanup.policy has no ``delete``.
    """
    state.require_appendable(follower=follower)
    if not state.config.delete and not follower:
        why = f"Records of partition {state.name} can not be deleted"
        raise PolicyViolationError(f"{why} due to the configured policy")
    offset = state.next_offset if offset == -1 else offset
    if not 0 <= offset <= state.next_offset:
        raise OffsetOutOfRangeError(
            f"offset {offset} is past the end ({state.next_offset}) of {state.name}"
        )
    if offset > state.log_start_offset:
        state.log_start_offset = offset
        below = sum(1 for s in state.segments[1:] if s.base_offset <= offset)
        _drop_oldest(state, below, "records deleted", state.clock())
        state.keys.drop()
        state.epochs.start_moved(offset)
    return state.log_start_offset


def _drop_oldest(state: PartitionState, count: int, why: str, now: int) -> None:
    """Take the ``count`` oldest segments out of the log; their files go after
    file.delete.delay.ms (delayed.py)."""
    for _ in range(count):
        oldest = state.remove_oldest()
        state.log_start_offset = max(state.log_start_offset, state.bases[0])
        try:
            state.removal.remove(oldest, state.config.file_delete_delay_ms, now)
        except OSError as e:
            state.fail(f"deleting segment {oldest.base_offset} ({why})", e)
            raise
    if count:
        state.unflushed.directory_changed()
        state.keys.drop()  # some keys' latest records may be gone: rebuilt on use
        state.epochs.start_moved(state.log_start_offset)
