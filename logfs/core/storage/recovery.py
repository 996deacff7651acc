"""Opening a partition directory's segments, recovering them where needed.

Segments whose offsets are all below the recovery point were fsynced: they
are only loaded (their indexes read and sanity-checked, the tail past the
last index entry walked). From the segment holding the recovery point on,
every batch is validated (see `LogSegment.recover`). At the first bad batch
the segment is truncated and every later segment is deleted, so what is
served is always a prefix of what was written; a segment that ends before
the next one begins (cut short from outside) counts as bad too, so offsets
never have a hole. A read-only open validates the same way in memory only,
writes nothing and serves the valid prefix.

Before that, a writer's open finishes or undoes what a crash left of a
cleaning of a compacted log (`recover_cleaning`; the protocol is cleaner.py's).
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path
from typing import NamedTuple

from ..config import TopicConfig
from ..errors import CorruptIndexError, CorruptRecordError
from .logfile import base_offset_of, iter_batches
from .segment import LogSegment

logger = logging.getLogger(__name__)

SUFFIXES = (".log", ".index", ".timeindex")  # the files of a segment
# A cleaning's files (cleaner.py): written aside, old ones renamed aside, Kafka's swap.
CLEANED, DELETED, SWAP = ".cleaned", ".deleted", ".swap"


class Loaded(NamedTuple):
    segments: list[LogSegment]
    truncated_bytes: int
    first_recovered: int  # index of the first segment validated from the recovery point
    deleted_files: bool


def load_segments(
    directory: Path, config: TopicConfig, recovery_point: int, *, writable: bool
) -> Loaded:
    """The directory's segments in offset order, recovered as described above."""
    if writable:
        directory.mkdir(parents=True, exist_ok=True)
        recover_cleaning(directory)  # also removes what retention left as *.deleted
    named = (base_offset_of(p.name, ".log") for p in directory.glob("*.log"))
    bases = sorted(base for base in named if base is not None)
    first = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    segments: list[LogSegment] = []
    truncated = 0
    for i, base in enumerate(bases):
        segment = LogSegment(str(directory), base, config, writable=writable)
        if segments and segments[-1].next_offset > base:
            logger.warning("%s: segment %d overlaps the one before it", directory, base)
        if writable and i >= first:
            cut = segment.recover(recovery_point if i == first else -1)
        else:
            try:
                segment.load()
                cut = 0
            except (CorruptIndexError, CorruptRecordError) as e:
                # damage below the recovery point: found now, handled as recovery does
                logger.warning("%s: %s; rebuilding from the log", segment.log_path, e)
                cut = segment.recover()
        segments.append(segment)
        # A cleaned segment may end before the next begins (compacted topics have gaps).
        short = not config.compact and _ends_short(segment, bases, i)
        if writable and (cut or short):
            truncated += cut
            _delete_segments_after(directory, base)
            return Loaded(segments, truncated, first, True)
    return Loaded(segments, truncated, first, False)


def _ends_short(segment: LogSegment, bases: list[int], i: int) -> bool:
    """A recovered segment that ends before the next one begins (truncated
    from outside, e.g. to zero bytes): keeping the next would leave a hole."""
    return i + 1 < len(bases) and segment.next_offset < bases[i + 1]


def _delete_segments_after(directory: Path, base: int) -> None:
    for path in sorted(directory.glob("*.log")):
        later = base_offset_of(path.name, ".log")
        if later is not None and later > base:
            logger.warning("%s: deleting segment after a truncated one", path)
            for suffix in SUFFIXES:
                path.with_suffix(suffix).unlink(missing_ok=True)


def recover_cleaning(directory: Path) -> bool:
    """Finish or undo what a crash left of a cleaning (cleaner.py's steps):
    while a ``.log.cleaned`` exists the commit did not happen, so ``*.deleted``
    files go back and ``*.cleaned`` ones go; otherwise both go. Returns
    whether anything was found."""
    names = os.listdir(directory)
    found = [n for n in names if n.endswith((CLEANED, DELETED, SWAP))]
    if not found:
        return False
    uncommitted = any(n.endswith(".log" + CLEANED) for n in names)
    for name in sorted(found):
        path = directory / name
        if name.endswith(DELETED) and uncommitted:
            logger.warning("%s: an unfinished cleaning: restoring it", path)
            os.replace(path, directory / name.removesuffix(DELETED))
        elif name.endswith(CLEANED) or name.endswith(DELETED):
            path.unlink(missing_ok=True)
    for name in sorted(n for n in found if n.endswith(".log" + SWAP)):
        _complete_swap(directory, name)
    return True


def _complete_swap(directory: Path, name: str) -> None:
    """A Kafka ``B.log.swap``: its segments replace those whose base offsets
    fall in [B, the swap's next offset), as Kafka's LogLoader does."""
    base = base_offset_of(name.removesuffix(SWAP), ".log")
    if base is None:
        return
    path = directory / name
    fd = os.open(path, os.O_RDONLY)
    try:
        end = base
        for _, header, _ in iter_batches(fd, 0, os.fstat(fd).st_size, verify=False):
            end = header.next_offset
    finally:
        os.close(fd)
    for log_path in directory.glob("*.log"):
        other = base_offset_of(log_path.name, ".log")
        if other is not None and base <= other < end:
            for suffix in SUFFIXES:
                log_path.with_suffix(suffix).unlink(missing_ok=True)
    for suffix in (".index", ".timeindex"):
        (directory / (name.removesuffix(".log" + SWAP) + suffix + SWAP)).unlink(missing_ok=True)
    os.rename(path, directory / name.removesuffix(SWAP))
    logger.warning("%s: completed the swap of a cleaning", path)
