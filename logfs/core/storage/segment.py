"""One segment: a ``.log`` file of record batches and its two indexes.

File names are the segment's base offset (the first offset it may hold) as
20 zero-padded digits, so ``ls`` sorts them in offset order::

    00000000000000368769.log         batches, back to back, nothing else
    00000000000000368769.index       sparse offset index (see index.py)
    00000000000000368769.timeindex   sparse time index
    00000000000000368769.txnindex    aborted transactions whose marker is here (txnindex.py)

Invariants: the ``.log`` file is a sequence of complete, CRC-valid batches
whose offsets strictly increase, from ``base_offset`` up to ``next_offset``.
Appends are one ``write()`` each, so a crash leaves at most one torn batch at
the tail (or garbage, after power loss); `recover` validates batches from a
known-good position and truncates at the first bad one.

Index entries are kept in memory and written to their files when the segment
is flushed, rolled or closed: an index is only trusted up to the recovery
point and rebuilt from the log past it.

What an append changes — the index entries by Kafka's interval rule, the stream
marks, the size, the next offset, the running max timestamp — and the roll rule
are the books of its `SegmentTail` (books.pyx), which the compiled line path
uses too. Opening and the crash rules are opening.py's; file names and every
walk over a ``.log`` file are logfile.py's; a segment's files are removed only
by `remove_segment_files`.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator

import numpy as np

from ..config import TopicConfig, now_ms
from ..errors import CorruptRecordError
from ..format.batching import BatchInfo
from ..format.record import HEADER_SIZE, NO_TIMESTAMP, BatchHeader, read_header
from .books import SegmentStream, SegmentTail
from .descriptors import DESCRIPTORS
from .index import OffsetIndex, TimeIndex
from .logfile import (
    SCAN_CHUNK,
    TXN_INDEX,
    BatchAt,
    find_batch,
    iter_batches,
    remove_segment_files,
    segment_name,
    segment_paths,
)
from .opening import Opening
from .txnindex import TransactionIndex

logger = logging.getLogger(__name__)


class LogSegment(Opening):
    """The files of one base offset; appends go to the end of the ``.log``."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        config: TopicConfig,
        *,
        writable: bool,
        suffix: str = "",
        created_ms: int | None = None,
    ) -> None:
        """``suffix`` follows each file name: the cleaner writes a segment aside
        as ``.log.cleaned`` and friends (swap.py). ``created_ms``: when the
        segment was created or opened (its log's clock; default: now), which
        segment.ms counts from when its first batch has no timestamp."""
        self.directory = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self._config = config
        self.writable = writable
        self.log_path, self.index_path, self.timeindex_path = segment_paths(
            directory, base_offset, suffix
        )
        self.offset_index = OffsetIndex(
            self.index_path, base_offset, config.segment_index_bytes, writable=writable
        )
        self.time_index = TimeIndex(
            self.timeindex_path, base_offset, config.segment_index_bytes, writable=writable
        )
        self.txn_index = TransactionIndex(
            os.path.join(directory, segment_name(base_offset, TXN_INDEX + suffix)),
            writable=writable,
        )
        # Files are open only while the descriptor budget allows (descriptors.py);
        # a segment written aside (by the cleaner, in a thread) is outside it.
        self._fd = -1
        self.pins = 0  # walks under way: the budget does not close the files meanwhile
        self._managed = not suffix
        self._flags = os.O_RDWR | os.O_APPEND if writable else os.O_RDONLY
        self._open_file(self._flags | os.O_CREAT if writable else self._flags)
        size = os.fstat(self._fd).st_size
        self.stream = SegmentStream(size)
        self.tail = SegmentTail(
            base_offset,
            size,
            self.offset_index,
            self.time_index,
            self.stream,
            config,
            self._read_first_timestamp,
            now_ms() if created_ms is None else created_ms,
        )
        self.validated_bytes = 0  # what `recover` read and checked
        # Damage below the recovery point, kept for reads to fail on (see `_keep_damage`).
        self.damage: str | None = None
        self.end_unknown = False  # the damage hides the end: next_offset is a lower bound
        self.torn = False  # read-only: the tail is a torn write, not served
        # The last segment at open: only its tail may be torn by a crash (`_is_tail`).
        self.tail_may_tear = writable

    # ------------------------------------------------------------ the books (books.pyx)

    @property
    def config(self) -> TopicConfig:
        return self._config

    @config.setter
    def config(self, config: TopicConfig) -> None:
        """A changed topic configuration, from the next append on."""
        self._config = config
        self.tail.configure(config)

    @property
    def size(self) -> int:
        """Bytes of the ``.log`` file that hold whole batches (served and appended to)."""
        return self.tail.size

    @property
    def next_offset(self) -> int:
        """The offset after the last record of the segment."""
        return self.tail.next_offset

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp of the segment's batches (-1: none)."""
        return self.tail.max_timestamp

    @property
    def first_timestamp(self) -> int | None:
        """The first batch's max timestamp: a segment's age counts from it (segment.ms),
        as Kafka's ``rollingBasedTimestamp`` does; None while the segment is empty."""
        return self.tail.first_timestamp

    def _read_first_timestamp(self) -> int:
        return self._header_at(0).max_timestamp

    # ------------------------------------------------------------ descriptors

    def _open_file(self, flags: int) -> int:
        self._fd = os.open(self.log_path, flags, 0o644)
        if self._managed:
            DESCRIPTORS.touch(self)
        return self._fd

    def _file(self) -> int:
        """The ``.log`` file's descriptor, opened again if the budget closed it."""
        if self._fd < 0:
            return self._open_file(self._flags)
        if self._managed:
            DESCRIPTORS.touch(self)
        return self._fd

    def file_lost(self) -> OSError | None:
        """Whether the ``.log`` file this segment writes through is no longer the
        file at its path (removed, renamed away or replaced from outside): an
        OSError saying which, else None. Two ``stat`` calls; only an open file
        can tell (a closed one is opened by its path again)."""
        if self._fd < 0:
            return None
        held = os.fstat(self._fd)
        try:
            found = os.stat(self.log_path)
        except FileNotFoundError:
            return FileNotFoundError(errno.ENOENT, "the segment file was removed", self.log_path)
        if held.st_nlink == 0 or (found.st_dev, found.st_ino) != (held.st_dev, held.st_ino):
            return OSError(errno.ESTALE, "the segment file was replaced", self.log_path)
        return None

    def release(self) -> None:
        """Close the files to stay under the descriptor budget; pending index
        entries stay in memory, and the next use opens the files again."""
        self.offset_index.release()
        self.time_index.release()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # ------------------------------------------------------------ loading

    # ------------------------------------------------------------ reading

    def _header_at(self, position: int) -> BatchHeader:
        buf = os.pread(self._file(), HEADER_SIZE, position)
        return read_header(buf, 0, position)

    def headers(self, offset: int = -1) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from the one holding ``offset`` (the
        first, for -1) to the end, one small read per header: the record bytes
        are not read (the producer state's replay)."""
        position = self._position_of(offset)[0] if offset > self.base_offset else 0
        end = self.size
        while end - position >= HEADER_SIZE:
            header = self._header_at(position)
            yield position, header
            position += header.size

    def batch_at(self, position: int, header: BatchHeader) -> memoryview:
        """The whole batch whose header is ``header`` at ``position`` (not CRC-checked)."""
        return memoryview(os.pread(self._file(), header.size, position))

    def batches(
        self, position: int = 0, *, verify: bool = True, chunk: int = SCAN_CHUNK
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Yield (position, header, batch bytes) from ``position`` to the end
        of the log as it is now (see `iter_batches`); the segment's files
        stay open meanwhile."""
        fd, self.pins = self._file(), self.pins + 1
        try:
            yield from iter_batches(
                fd, position, self.size, verify=verify, chunk=chunk, path=self.log_path
            )
        finally:
            self.pins -= 1

    def _position_of(self, offset: int) -> tuple[int, int]:
        """Position and base offset of the batch holding ``offset``, or the end
        of the log and the offset after it when no batch does; headers only."""
        start = self.offset_index.lookup(offset)
        position, next_offset = start.position, self.base_offset
        chunk = self.config.index_interval_bytes + 2 * HEADER_SIZE + 4096
        for pos, header, _ in self.batches(start.position, verify=False, chunk=chunk):
            if header.last_offset >= offset:
                return pos, header.base_offset
            position, next_offset = pos + header.size, header.next_offset
        return position, next_offset

    def find(self, offset: int) -> BatchAt | None:
        """The CRC-checked batch that holds ``offset``, or None."""
        if offset >= self.next_offset:
            return None
        start = self.offset_index.lookup(offset).position
        found = find_batch(self._file(), start, self.size, offset, self.log_path)
        if found is None and self.end_unknown:
            raise CorruptRecordError(f"offset {offset}: {self.damage}", self.size)
        return found

    def first_batch_at_time(self, timestamp: int) -> BatchAt | None:
        """The first batch whose max timestamp is >= ``timestamp``."""
        entry = self.time_index.lookup_before(timestamp)
        start = self._position_of(entry.offset + 1)[0] if entry else 0
        for pos, header, batch in self.batches(start):
            if header.max_timestamp >= timestamp:
                return BatchAt(pos, header, batch)
        return None

    def holding(self, offset: int) -> tuple[int, int]:
        """(position, size) of the batch holding ``offset`` (the first whose last
        offset is >= it), or (the log's end, 0) when no batch does. One header
        read when an index entry points at that batch (entries are batches' last
        offsets, as Kafka's: the first entry at or past ``offset``), as every
        batch past ``index.interval.bytes`` has; else `_position_of`'s walk."""
        end, entry = self.size, self.offset_index.first_at_least(offset)
        if entry is not None and end - entry.position >= HEADER_SIZE:
            header = self._header_at(entry.position)
            fits = entry.position + header.size <= end
            if header.base_offset <= offset <= header.last_offset and fits:
                return entry.position, header.size
        position = self._position_of(offset)[0]
        return position, self._header_at(position).size if end - position >= HEADER_SIZE else 0

    def fetch_slice(
        self, offset: int, max_bytes: int, end_offset: int | None, min_one: bool
    ) -> tuple[int, int | None]:
        """(position, size) of what a fetch at ``offset`` gets of this segment, as
        Kafka's ``LogSegment.read`` slices it: from the batch holding ``offset``,
        ``max_bytes`` long (cut wherever that ends), or with ``min_one`` at least
        that batch whole; never into a batch at or past ``end_offset`` (a batch's
        first offset: the last stable offset). Headers only, two at most: the
        record bytes go to ``sendfile``. Size None when no batch at or after
        ``offset`` is in this segment before ``end_offset``."""
        position, first = self.holding(offset)
        stop = self.size
        if end_offset is not None and end_offset < self.next_offset:
            stop = self.holding(end_offset)[0]
        if not first or position >= stop:
            return position, None
        return position, min(stop - position, max(max_bytes, first if min_one else 0))

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms measures, as Kafka's ``largestTimestamp``: the largest
        timestamp known from the indexes and appends, or, for a segment without one, the
        ``.log`` file's modification time."""
        if self.max_timestamp != NO_TIMESTAMP or not self.size:
            return self.max_timestamp
        return os.fstat(self._file()).st_mtime_ns // 1_000_000

    # ------------------------------------------------------------ writing

    def should_roll(self, batch: BatchInfo, now: int, pending: int = 0, first: int = -1) -> bool:
        """Whether to roll before appending ``batch`` at ``now`` (the log's clock),
        after ``pending`` bytes of batches to be written with it, the first
        stamped ``first``: the roll rule (`books.should_roll`)."""
        return self.tail.should_roll_before(
            batch.size, batch.max_timestamp, batch.last_offset, now, pending, first
        )

    def roll_point(self, run, start: int, now: int, check_first: bool = True) -> int:
        """`should_roll` over a `BatchRun`'s batches from ``start`` on, written
        together: the first before which to roll, or their number."""
        return self.tail.roll_point(
            run.sizes, run.max_timestamps, run.last_offsets, now, start, check_first
        )

    def append(self, data: bytes | list, batches: list[BatchInfo]) -> None:
        """Append whole batches (bytes, or a list of buffers: gathered by the
        kernel, no copy) in one writev(); on failure nothing stays behind, or
        the error says the cut failed (its errno is that of the cut)."""
        self.tail.write_all(self._file(), data if isinstance(data, list) else [data])
        if len(batches) == 1:  # one small write: numpy's per-call costs would dominate
            info = batches[0]
            self.tail.appended(info.size, info.last_offset, info.max_timestamp, info.stream_bytes)
            return
        fields = ("size", "last_offset", "max_timestamp", "stream_bytes")
        self.tail.appended_batches(
            *(np.fromiter((getattr(i, f) for i in batches), np.int64, len(batches)) for f in fields)
        )

    def append_run(self, batches: list, run: tuple[np.ndarray, ...]) -> None:
        """`append` of ``batches`` (buffers) with their facts as int64 arrays
        ``(sizes, last_offsets, max_timestamps, stream_bytes)``."""
        self.tail.write_all(self._file(), batches)
        self.tail.appended_batches(*run)

    def on_become_inactive(self) -> None:
        """Record the final max timestamp, as Kafka does when rolling."""
        if self.max_timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp, self.next_offset - 1)
        self.flush_indexes()
        self.seal()

    def seal(self) -> None:
        """No more appends: the indexes' arrays may leave memory (indexmemory.py)."""
        self.offset_index.seal()
        self.time_index.seal()

    def flush_indexes(self) -> None:
        if self._managed:  # writing opens the index files
            DESCRIPTORS.touch(self)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def fileno(self) -> int:
        """The ``.log`` file's descriptor, for immediate use only: the budget may
        close it once another segment opens files (`os.dup` it to keep it)."""
        return self._file()

    def sync_fds(self) -> list[int]:
        """Write pending index entries; the fds whose fsync makes this durable
        (the transaction index is synced here too: it holds no descriptor)."""
        self.flush_indexes()
        self.txn_index.sync()
        return [self._file(), self.offset_index.fileno(), self.time_index.fileno()]

    def sync_paths(self) -> list[str]:
        """Write pending index entries; the files whose fsync makes this durable
        (a flush opens them one at a time: see core/log/flushing.py)."""
        self.flush_indexes()
        self.offset_index.fileno()  # the index files exist from the first flush on
        self.time_index.fileno()
        paths = [self.log_path, self.index_path, self.timeindex_path]
        return paths + [self.txn_index.path] if len(self.txn_index) else paths

    def close(self, *, write: bool = True) -> None:
        """Close the files, writing pending index entries first (``write``)."""
        if write and self.writable and self.damage is None:
            self.on_become_inactive()  # Kafka too: the time index gets its last entry
        elif write and self.writable:
            self.flush_indexes()
        self.release()
        DESCRIPTORS.forget(self)

    def delete(self) -> None:
        """Close the segment and remove its files (`remove_segment_files`)."""
        self.close(write=False)
        remove_segment_files(self.directory, self.base_offset, self.suffix)
