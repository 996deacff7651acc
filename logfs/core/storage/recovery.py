"""Opening a partition directory's segments, recovering them where needed.

Segments whose offsets are all below the recovery point were fsynced: they
are only loaded (their indexes read and sanity-checked, the tail past the
last index entry walked). From the segment holding the recovery point on,
every batch is validated (see `LogSegment.recover`). At the first bad batch
the segment is truncated and every later segment is deleted, so what is
served is always a prefix of what was written; a segment that ends before
the next one begins (cut short from outside) counts as bad too, unless the
next one begins below the offsets known handed out (the recovery point, or
``gaps_below``) or is an empty last segment (a writer's mark, `mark_end`):
that gap is kept, so that no offset is handed out twice. A
read-only open validates the same way in memory only, writes nothing and
serves the valid prefix.

Before that, a writer's open finishes or undoes what a crash left of a
cleaning's swap (`swap.recover_swap`).
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path
from typing import NamedTuple

from ..config import TopicConfig
from ..errors import CorruptIndexError, CorruptRecordError
from .logfile import base_offset_of, segment_name
from .segment import LogSegment, remove_segment_files
from .swap import recover_swap

logger = logging.getLogger(__name__)


class Loaded(NamedTuple):
    """A partition directory's segments as `load_segments` opened them."""

    segments: list[LogSegment]
    truncated_bytes: int
    first_recovered: int  # index of the first segment validated from the recovery point
    deleted_files: bool


def load_segments(
    directory: Path,
    config: TopicConfig,
    recovery_point: int,
    *,
    writable: bool,
    created_ms: int | None = None,
    gaps_below: int = 0,
) -> Loaded:
    """The directory's segments in offset order, recovered as described above;
    ``created_ms``: the time they are opened at (see `LogSegment`); a gap between
    segments below ``gaps_below`` (offsets handed out, whatever the recovery
    point) is kept like one below the recovery point."""
    if writable:
        directory.mkdir(parents=True, exist_ok=True)
        recover_swap(directory)
    bases = segment_bases(directory)
    first = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    segments: list[LogSegment] = []
    truncated = 0
    for i, base in enumerate(bases):
        segment = LogSegment(str(directory), base, config, writable=writable, created_ms=created_ms)
        segment.tail_may_tear = i + 1 == len(bases)
        if segments and segments[-1].next_offset > base:
            logger.warning("%s: segment %d overlaps the one before it", directory, base)
        # Offsets below this were on the disk: damage to them is kept, not cut, but in
        # the last segment's tail (a torn write can only be past the recovery point, or
        # at the tail of the segment being appended to).
        keep_below = min(recovery_point, bases[i + 1]) if i + 1 < len(bases) else recovery_point
        if writable and i >= first:
            cut = segment.recover(recovery_point if i == first else -1, keep_below)
        else:
            try:
                segment.load(keep_below)
                cut = 0
            except (CorruptIndexError, CorruptRecordError) as e:
                # damage below the recovery point: found now, handled as recovery does
                logger.warning("%s: %s; rebuilding from the log", segment.log_path, e)
                cut = segment.recover(keep_below=keep_below)
        segments.append(segment)
        # A cleaned segment may end before the next begins (compacted topics have gaps).
        short = not config.compact and _ends_short(segment, bases, i)
        gap_kept = max(keep_below, min(gaps_below, bases[i + 1])) if short else 0
        if short and (segment.next_offset < gap_kept or _is_mark(directory, bases, i + 1)):
            segment.mark_missing(bases[i + 1])
            short = False
        if cut or short or segment.torn:
            # A torn tail: what follows was never on the disk for sure; a writer
            # deletes it, a reader does not serve it.
            if writable:
                truncated += cut
                _delete_segments_after(directory, base)
            return Loaded(segments, truncated, first, writable)
    return Loaded(segments, truncated, first, False)


def segment_bases(directory: Path) -> list[int]:
    """The base offsets of the directory's ``.log`` files, sorted. Unlike
    ``Path.glob``, raises what listing the directory raises (``PermissionError``):
    an unreadable partition is an error, never an empty one."""
    named = (base_offset_of(name, ".log") for name in os.listdir(directory))
    return sorted(base for base in named if base is not None)


def _ends_short(segment: LogSegment, bases: list[int], i: int) -> bool:
    """A recovered segment that ends before the next one begins (truncated
    from outside, e.g. to zero bytes): keeping the next would leave a hole."""
    return i + 1 < len(bases) and segment.next_offset < bases[i + 1]


def _is_mark(directory: Path, bases: list[int], i: int) -> bool:
    """Whether segment ``i`` is an empty last one: what a writer that lost its
    active segment's file leaves at its next offset (`mark_end`). Nothing in it
    can be torn, and offsets below it were handed out: the gap before it stays."""
    if i + 1 != len(bases):
        return False
    return os.stat(directory / segment_name(bases[i], ".log")).st_size == 0


def _delete_segments_after(directory: Path, base: int) -> None:
    for path in sorted(directory.glob("*.log")):
        later = base_offset_of(path.name, ".log")
        if later is not None and later > base:
            logger.warning("%s: deleting segment after a truncated one", path)
            remove_segment_files(directory, later)
