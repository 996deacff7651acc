"""Opening a segment, the crash rules of `LogSegment`.

A clean open (`Opening.load`) trusts the offset index up to its last entry and walks the
batches after it. After a crash (`Opening.recover`) every batch from the recovery point on is
validated, its index entries rebuilt, and the log cut at the first torn batch: a torn write
can only be past the recovery point or at the very tail of the last segment. A bad batch
holding offsets below the recovery point (or below the next segment's base) was on the disk,
so it is damage, not a torn write: it is kept, and reads that reach it fail with
`CorruptRecordError` until ``logfs check --repair`` cuts it.

What an open finds goes into the segment's books (`SegmentTail`, books.pyx): its size,
next offset, largest timestamp and the offset that reached it, and index entries.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

import numpy as np

from ..errors import CorruptIndexError, CorruptRecordError

logger = logging.getLogger(__name__)


class Walked(NamedTuple):
    """The batches a walk found, to index: one entry per batch."""

    sizes: list[int]
    last_offsets: list[int]
    max_timestamps: list[int]


class Opening:
    """The opening half of `LogSegment` (segment.py holds the fields it uses)."""

    def _start(self) -> None:
        """Nothing is known of the file's batches yet but what the time index says
        (its last entry: the largest timestamp, and the offset that reached it)."""
        self.tail.reset(self.size)
        last = self.time_index.last
        if last is not None:
            self.tail.max_timestamp, self.tail.offset_of_max = last.timestamp, last.offset

    def load(self, keep_below: int = -1) -> None:
        """Read the indexes and find the log end from the last index entry;
        a bad batch holding offsets below ``keep_below`` is kept (`_keep_damage`).

        Raises:
            CorruptIndexError: the index disagrees with the log.
            CorruptRecordError: the tail past the last index entry is not
                whole batches (a torn write): the caller recovers.
        """
        self.offset_index.load()
        self.time_index.load()
        self.offset_index.check(self.size)
        self._start()
        last = self.offset_index.last
        if len(self.offset_index):
            header = self._header_at(last.position)
            if header.last_offset != last.offset:
                raise CorruptIndexError(
                    f"{self.index_path}: entry ({last.offset}, {last.position}) points at a batch "
                    f"ending at {header.last_offset}"
                )
        self._scan_tail(
            last.position, verify=False, indexed=len(self.offset_index) > 0, keep_below=keep_below
        )
        self.time_index.check(self.next_offset)
        self.stream.reset(self.size)

    def recover(self, from_offset: int = -1, keep_below: int = -1) -> int:
        """Validate every batch holding offsets >= ``from_offset``, rebuild the
        index entries for them and truncate at the first bad batch, unless it
        holds offsets below ``keep_below`` (`_keep_damage`).

        Returns:
            The number of bytes truncated.
        """
        start, next_offset = 0, self.base_offset
        if from_offset > self.base_offset:
            try:
                self.offset_index.load()
                self.time_index.load()
                self.offset_index.check(self.size)
                start, next_offset = self._position_of(from_offset)
            except (CorruptIndexError, CorruptRecordError):
                start, next_offset = 0, self.base_offset
        if start:
            self.offset_index.truncate_to_position(start)
            self.time_index.truncate_to_offset(next_offset)
        else:
            self.offset_index.clear()
            self.time_index.clear()
        self._start()
        self.tail.next_offset = next_offset
        if self.writable:
            # Validate what the disk holds, not what the page cache remembers: after
            # a failed fsync Linux may keep pages it never wrote, marked clean.
            # This drops clean cached pages of the tail (dirty ones stay, to be written).
            os.posix_fadvise(self._file(), start, 0, os.POSIX_FADV_DONTNEED)
        self.validated_bytes = self.size - start
        truncated = self._scan_tail(start, verify=True, keep_below=keep_below)
        self.flush_indexes()
        self.stream.reset(self.size)
        return truncated

    def _scan_tail(
        self, position: int, *, verify: bool, indexed: bool = False, keep_below: int = -1
    ) -> int:
        """Walk batches from ``position`` (a batch boundary) to the end of the
        log, indexing them; ``indexed`` says the first one is indexed already.

        A bad batch holding offsets below ``keep_below`` is damage, kept
        (`_keep_damage`); any other is a torn tail: truncated away (writable,
        ``verify``), the end of the log in memory (read-only: a live writer's
        torn tail) or raised. Returns the number of bytes truncated.
        """
        last_indexed = self.offset_index.last.position if len(self.offset_index) else 0
        self.tail.bytes_since_index_entry = position - last_indexed
        first, walked = position, Walked([], [], [])
        try:
            for pos, header, _ in self.batches(position, verify=verify):
                if indexed and pos == position:
                    self.tail.bytes_since_index_entry = header.size
                    first = pos + header.size
                else:
                    if header.base_offset < self.next_offset:
                        raise CorruptRecordError(
                            f"{self.log_path}: batch at position {pos} has base offset "
                            f"{header.base_offset}, expected at least {self.next_offset}",
                            pos,
                        )
                    walked.sizes.append(header.size)
                    walked.last_offsets.append(header.last_offset)
                    walked.max_timestamps.append(header.max_timestamp)
                self.tail.next_offset = header.next_offset
        except CorruptRecordError as e:
            self._index_walked(first, walked)
            bad = e.args[1] if len(e.args) > 1 else self.size
            if self.next_offset < keep_below and not (self.tail_may_tear and self._is_tail(bad)):
                return self._keep_damage(e, bad, keep_below, verify)
            if not self.writable:
                logger.warning("%s (serving the %d bytes before it)", e.args[0], bad)
                self.tail.size = bad
                self.torn = True
                return 0
            if not verify:
                raise
            cut = self.size - bad
            os.ftruncate(self._file(), bad)
            os.fsync(self._file())
            self.tail.size = bad
            logger.warning("truncated %d bytes: %s", cut, e.args[0])
            return cut
        self._index_walked(first, walked)
        return 0

    def _keep_damage(
        self, error: CorruptRecordError, position: int, end_offset: int, verify: bool
    ) -> int:
        """A bad batch at ``position`` holding offsets below ``end_offset`` (the
        recovery point, or the next segment's base): those were on the disk, so this
        is damage, not a torn write. Nothing is cut; reads that reach it fail with
        `CorruptRecordError` until ``logfs check --repair`` cuts it. A bad CRC leaves
        the framing readable, so the batches after it are still found; broken framing
        hides them, and the segment is taken to end at ``end_offset``
        (`end_unknown`). Returns what the walk on truncated (a torn tail past it)."""
        self.damage = self.damage or str(error.args[0])
        logger.error("%s: damage below the recovery point, kept: reads of it fail", error.args[0])
        try:
            header = self._header_at(position)
            if position + header.size > self.size:
                raise CorruptRecordError("the batch runs past the end of the file")
        except CorruptRecordError:
            self.tail.next_offset = max(self.next_offset, end_offset)
            self.end_unknown = True
            return 0
        self.tail.next_offset = max(self.next_offset, header.next_offset)
        return self._scan_tail(position + header.size, verify=verify, keep_below=end_offset)

    def _is_tail(self, position: int) -> bool:
        """Whether the bad batch at ``position`` is a torn tail: nothing readable
        follows it (its framing is broken, or it is the last batch)."""
        try:
            return position + self._header_at(position).size >= self.size
        except CorruptRecordError:
            return True

    def mark_missing(self, end_offset: int) -> None:
        """The segment ends before ``end_offset`` (the next segment's base), though
        those offsets were on the disk: damage (`_keep_damage`)."""
        self.damage = (
            f"{self.log_path}: offsets {self.next_offset}..{end_offset - 1} are missing "
            "(the segment ends before the next one begins)"
        )
        logger.error("%s", self.damage)
        self.tail.next_offset = end_offset
        self.end_unknown = True

    def _index_walked(self, start: int, walked: Walked) -> None:
        if walked.sizes:
            self.tail.index_batches(start, *(np.array(column, np.int64) for column in walked))
