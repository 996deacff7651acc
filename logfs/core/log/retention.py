"""Retention of a partition log: deleting whole non-active segments past
retention.ms or beyond retention.bytes, oldest first (`segments_to_delete`, in
config.py, decides), and moving the log start offset past them."""

from __future__ import annotations

from ..config import segments_to_delete
from .state import PartitionState


def enforce_retention(state: PartitionState, now_ms: int | None = None) -> int:
    """Delete the segments retention says go; returns how many were deleted.

    Raises:
        OSError: a segment's files could not be removed (the partition goes offline).
    """
    if not state.writable or state.failure.reason is not None or not state.config.delete:
        return 0
    count = segments_to_delete(
        state.config,
        sizes=[s.size for s in state.segments],
        max_timestamps=[s.largest_timestamp for s in state.segments],
        now_ms=state.clock() if now_ms is None else now_ms,
    )
    for _ in range(count):
        oldest = state.remove_oldest()
        state.log_start_offset = max(state.log_start_offset, state.bases[0])
        try:
            oldest.delete()
        except OSError as e:
            state.fail(f"deleting segment {oldest.base_offset} (retention)", e)
            raise
    if count:
        state.unflushed.directory_changed()
        state.keys.drop()  # some keys' latest records may be gone: rebuilt on use
    return count
