"""Replacing segments by a rewritten one, crash-safely: the cleaner's swap.

A group of consecutive segments is replaced by one segment of base offset B
(the group's first), the renames being the steps:

a. ``B.log.cleaned``, ``B.index.cleaned``, ``B.timeindex.cleaned`` (and
   ``B.txnindex.cleaned`` when the cleaned segment keeps aborted transactions'
   markers) are written and fsynced (`aside` names them; the writer is the cleaner);
b. every file of the group's old segments is renamed to ``*.deleted`` and the
   directory fsynced;
c. the cleaned index files, then ``B.log.cleaned`` (the commit), are renamed
   to their names and the directory fsynced;
d. the ``*.deleted`` files are removed.

`recover_swap` runs before a partition's segments are opened: while a
``.log.cleaned`` exists the commit has not happened, so the ``*.deleted``
files are renamed back and the ``.cleaned`` ones removed (the segments are as
they were before the swap); otherwise leftover ``*.cleaned`` and ``*.deleted``
files are removed (as after it). A ``.log.swap`` left by Kafka is completed
as Kafka does. A crash at any step thus leaves the directory as it was before
or after a group's swap, never a mix.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..config import TopicConfig
from .logfile import DELETED, base_offset_of, fsync_dir, iter_batches
from .segment import LogSegment, remove_segment_files

logger = logging.getLogger(__name__)

# A swap's files: written aside, Kafka's swap (and DELETED: old ones renamed aside).
CLEANED, SWAP = ".cleaned", ".swap"


def aside(directory: str, base_offset: int, config: TopicConfig) -> LogSegment:
    """A new, empty segment written aside (step a): ``B.*.cleaned``, opened
    for appends. An earlier attempt's files are removed first, or the appends
    would follow them."""
    remove_segment_files(directory, base_offset, CLEANED)
    return LogSegment(directory, base_offset, config, writable=True, suffix=CLEANED)


def swap_in(
    directory: str, old: list[LogSegment], new: LogSegment | None, config: TopicConfig
) -> LogSegment | None:
    """Steps b-d: replace the consecutive segments ``old`` by ``new`` (written
    aside, fsynced and closed; None: by nothing). Closes ``old``; returns the
    new segment opened under its own name, or None.

    Raises:
        OSError: a rename, unlink or fsync failed; the directory is then as
            before or after the swap once `recover_swap` has run.
    """
    renamed = []
    for segment in old:
        paths = (segment.log_path, segment.index_path, segment.timeindex_path)
        for path in (*paths, segment.txn_index.path):
            if os.path.exists(path):
                os.rename(path, path + DELETED)
                renamed.append(path + DELETED)
    fsync_dir(directory)
    if new is not None:
        os.rename(new.index_path, new.index_path.removesuffix(CLEANED))
        os.rename(new.timeindex_path, new.timeindex_path.removesuffix(CLEANED))
        if os.path.exists(new.txn_index.path):
            os.rename(new.txn_index.path, new.txn_index.path.removesuffix(CLEANED))
        os.rename(new.log_path, new.log_path.removesuffix(CLEANED))  # the commit
    fsync_dir(directory)
    for segment in old:
        segment.close()
    for path in renamed:
        os.unlink(path)
    if new is None:
        return None
    segment = LogSegment(directory, new.base_offset, config, writable=True)
    segment.load()
    return segment


def recover_swap(directory: Path) -> bool:
    """Finish or undo what a crash left of a swap (the steps above): while a
    ``.log.cleaned`` exists the commit did not happen, so ``*.deleted`` files
    go back and ``*.cleaned`` ones go; otherwise both go. Returns whether
    anything was found."""
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
        _complete_kafka_swap(directory, name)
    return True


def _complete_kafka_swap(directory: Path, name: str) -> None:
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
            remove_segment_files(directory, other)
    # its indexes are not trusted: rebuilt from the log when it is loaded
    remove_segment_files(directory, base, SWAP, kinds=(".index", ".timeindex"))
    os.rename(path, directory / name.removesuffix(SWAP))
    logger.warning("%s: completed the swap of a cleaning", path)
