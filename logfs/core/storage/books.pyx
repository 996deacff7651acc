# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A segment's books: what every append changes, each rule written once.

`SegmentTail` holds the numbers of a segment's end that appends move — its
size, next offset, largest timestamp and the offset that reached it, the
bytes since the last index entry, the first batch's timestamp — and applies,
for the line path (log/_line.pyx, which cimports it through books.pxd) and
for `LogSegment.append` alike:

- Kafka's index rule (`LogSegment.append`): the running max timestamp is
  updated, then an offset and a time index entry are added when more than
  index.interval.bytes were appended since the last one;
- the stream marks of the segment's `SegmentStream` (stream.py's index of
  lines);
- the write itself: all of a batch's bytes with one ``writev()``, or none (the
  file cut back to where it ended);
- Kafka's roll rule (`should_roll`, `time_waited_for_roll`).

Opening a segment (opening.py) sets the numbers from what its files hold.
"""

from libc.errno cimport EINTR, ENOSPC, errno
from libc.stdint cimport INT32_MAX, int64_t
from posix.types cimport off_t
from posix.uio cimport iovec, writev

import bisect
import os
from typing import NamedTuple

import numpy as np

from ..format.record import NO_TIMESTAMP

MARK_BYTES = 64 * 1024  # stream bytes between the marks of a `SegmentStream`
IOV_MAX = 1024  # buffers one writev() takes (Linux)

cdef enum:
    RESERVE_FROM = 64 * 1024  # a write at least this large reserves blocks ahead
    RESERVE_MAX = 8 * 1024 * 1024  # and at most this much past itself

cdef extern from "<fcntl.h>":  # with _GNU_SOURCE, which Python.h defines
    const int FALLOC_FL_KEEP_SIZE
    int fallocate(int fd, int mode, off_t offset, off_t length)


class Counted(NamedTuple):
    """Stream bytes of a run of batches, and marks into it."""

    total: int
    offsets: list
    positions: list


cpdef bint should_roll(
    int64_t size,
    int64_t batch_size,
    int64_t segment_bytes,
    int64_t waited_ms,
    int64_t roll_ms,
    bint index_full,
    bint offset_overflow,
) noexcept:
    """Kafka's roll rule (``LogSegment.shouldRoll``): start a new segment before
    appending a batch of ``batch_size`` bytes to one of ``size`` bytes when it
    would exceed segment.bytes, when it has waited more than ``roll_ms``
    (segment.ms less the segment's jitter, as `time_waited_for_roll` counts),
    when an index is full, or when the batch's offsets cannot be stored relative
    to the segment's base. An empty segment takes any batch of any age: rolling
    it would gain nothing."""
    return (
        (size > 0 and size > segment_bytes - batch_size)
        or (size > 0 and waited_ms > roll_ms)
        or index_full
        or offset_overflow
    )


cpdef int64_t time_waited_for_roll(
    int64_t now, int64_t message_timestamp, int64_t first_timestamp, int64_t created_ms
) noexcept:
    """How long a segment has waited to be rolled, as Kafka counts it
    (``LogSegment.timeWaitedForRoll``): the incoming batch's largest timestamp
    against the segment's first batch's; only when that batch has no timestamp
    (-1), the clock ``now`` against when the segment was created or opened. So
    batches stamped long ago fill a segment like any others."""
    if first_timestamp >= 0:
        return message_timestamp - first_timestamp
    return now - created_ms


cdef class SegmentStream:
    """A segment's stream index (stream.py), in memory only: its stream bytes
    (the part on disk when it was opened, counted lazily into ``loaded``,
    then appends) and marks into them.

    Marks ``(offset, stream position)`` are taken at batch boundaries at least
    every `MARK_BYTES` of appended stream; its one query, `mark_before`, is
    "largest lower bound" too. ``origin`` is the log start offset and its
    stream position, kept by the partition's stream (log/lines.py).
    """

    def __init__(self, int64_t loaded_size):
        self.reset(loaded_size)

    def reset(self, int64_t loaded_size):
        """Start over for a segment file of ``loaded_size`` bytes, not counted yet."""
        self.loaded_size = loaded_size
        self.loaded = None if loaded_size else Counted(0, [], [])
        self.origin = None
        self.appended = 0
        self.offsets = []
        self.positions = []

    cdef int note(self, int64_t first_offset, int64_t stream_bytes) except -1:
        """A batch appended from ``first_offset``, adding ``stream_bytes``."""
        cdef Py_ssize_t n = len(self.positions)
        if n == 0 or self.appended - <int64_t>self.positions[n - 1] >= MARK_BYTES:
            self.offsets.append(first_offset)
            self.positions.append(self.appended)
        self.appended += stream_bytes
        return 0

    def release(self, int64_t first_offset, int64_t stream_bytes):
        """A batch held past the last stable offset is decided: its stream bytes
        (0 for an aborted or control batch) follow the others', in offset order."""
        self.note(first_offset, stream_bytes)

    @property
    def size(self):
        """Stream bytes of the whole segment; None until the loaded part is counted."""
        return None if self.loaded is None else self.loaded.total + self.appended

    def marks(self):
        """The marks of the appended part: (offsets, stream positions in it)."""
        return list(self.offsets), list(self.positions)

    def mark_before(self, int64_t position):
        """The last mark at or before stream ``position`` (of this segment):
        ``(offset, position)``; needs the loaded part counted."""
        loaded = self.loaded
        cdef int64_t total = loaded.total
        cdef Py_ssize_t i
        if position >= total and self.positions:
            i = max(0, bisect.bisect_right(self.positions, position - total) - 1)
            return self.offsets[i], total + self.positions[i]
        i = bisect.bisect_right(loaded.positions, position) - 1
        if i < 0:
            return -1, 0  # the segment's first offset
        return loaded.offsets[i], loaded.positions[i]


cdef class SegmentTail:
    """The end of one segment, as appends move it (module docstring).

    ``read_first_timestamp()`` reads the first batch's largest timestamp from
    the file, the first time the roll rule needs it for a segment that was
    opened non-empty (Kafka's ``rollingBasedTimestamp``, loaded lazily).
    """

    def __init__(
        self,
        int64_t base_offset,
        int64_t size,
        offset_index,
        time_index,
        SegmentStream stream,
        config,
        read_first_timestamp,
        int64_t created_ms,
    ):
        self.base_offset = base_offset
        self.offset_index, self.time_index, self.stream = offset_index, time_index, stream
        self.read_first_timestamp = read_first_timestamp
        self.created_ms = created_ms
        self.roll_jitter_ms = config.random_segment_jitter()  # drawn once per segment
        self.configure(config)
        self.reset(size)

    def configure(self, config):
        """Take a topic configuration's numbers (from the next append on)."""
        self.segment_bytes = config.segment_bytes
        self.segment_ms = config.segment_ms
        self.index_interval_bytes = config.index_interval_bytes

    def reset(self, int64_t size):
        """The segment's file holds ``size`` bytes that nothing is known of yet
        (opening walks them, and sets what it finds)."""
        self.size = size
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max = self.base_offset
        self.bytes_since_index_entry = 0
        self.rolling_known = False
        self.reserved = 0

    cdef bint index_rule(self, int64_t size, int64_t last_offset, int64_t max_timestamp) noexcept:
        """Kafka's rule for one batch of ``size`` bytes ending at
        ``last_offset``: the running max timestamp and the offset that reached
        it, then whether the batch gets index entries (more than
        index.interval.bytes since the last)."""
        cdef bint due
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_timestamp, last_offset
        due = self.bytes_since_index_entry > self.index_interval_bytes
        if due:
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size
        return due

    cdef int grew(
        self, int64_t size, int64_t last_offset, int64_t max_timestamp, int64_t stream_bytes
    ) except -1:
        """The segment's end moves past a batch: stream marks, size, next offset.
        ``stream_bytes`` -1: the batch is past the last stable offset, its stream
        bytes are noted once its transactions are decided (`SegmentStream.release`)."""
        if self.size == 0:  # the segment's first batch: its age counts from it
            self.rolling_timestamp, self.rolling_known = max_timestamp, True
        if stream_bytes >= 0:
            self.stream.note(self.next_offset, stream_bytes)
        self.size += size
        self.next_offset = last_offset + 1
        return 0

    cpdef appended(
        self, int64_t size, int64_t last_offset, int64_t max_timestamp, int64_t stream_bytes
    ):
        """One batch written at the end of the segment: its index entries, stream
        marks, the segment's size and next offset."""
        cdef int64_t position = self.size
        if self.index_rule(size, last_offset, max_timestamp):
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
        self.grew(size, last_offset, max_timestamp, stream_bytes)

    def appended_batches(
        self, const int64_t[::1] sizes, const int64_t[::1] last_offsets,
        const int64_t[::1] max_timestamps, const int64_t[::1] stream_bytes,
    ):
        """`appended` of consecutive batches, their index entries added at once."""
        self.index_batches(self.size, sizes, last_offsets, max_timestamps)
        cdef Py_ssize_t i
        for i in range(sizes.shape[0]):
            self.grew(sizes[i], last_offsets[i], max_timestamps[i], stream_bytes[i])

    def index_batches(
        self,
        int64_t start,
        const int64_t[::1] sizes,
        const int64_t[::1] last_offsets,
        const int64_t[::1] max_timestamps,
    ):
        """The index rule over batches laid out from ``start`` (appended, or
        walked by opening), their entries added at once; the position after them."""
        cdef Py_ssize_t i, n = sizes.shape[0], k = 0
        entries = np.empty((4, n), np.int64)
        cdef int64_t[:, ::1] e = entries
        cdef int64_t position = start
        for i in range(n):
            if self.index_rule(sizes[i], last_offsets[i], max_timestamps[i]):
                e[0, k], e[1, k] = last_offsets[i], position
                e[2, k], e[3, k] = self.max_timestamp, self.offset_of_max
                k += 1
            position += sizes[i]
        if k:
            self.offset_index.extend(entries[0, :k], entries[1, :k])
            self.time_index.extend_maybe(entries[2, :k], entries[3, :k])
        return position

    cdef int64_t first_batch_timestamp(self) except? -2:
        if not self.rolling_known:
            self.rolling_timestamp = self.read_first_timestamp()
            self.rolling_known = True
        return self.rolling_timestamp

    @property
    def first_timestamp(self):
        """The first batch's largest timestamp (the one a segment's age counts
        from); None while the segment is empty."""
        return self.first_batch_timestamp() if self.size else None

    cpdef bint should_roll_before(
        self,
        int64_t batch_size,
        int64_t max_timestamp,
        int64_t last_offset,
        int64_t now,
        int64_t pending=0,
        int64_t pending_first_timestamp=-1,
    ) except -1:
        """`should_roll` for this segment before a batch of ``batch_size``
        bytes ending at ``last_offset``, with ``max_timestamp``, appended at
        ``now`` (the log's clock), after ``pending`` bytes of batches that are
        to be written with it (the first of them stamped
        ``pending_first_timestamp``)."""
        cdef int64_t size = self.size + pending
        cdef int64_t first = self.first_batch_timestamp() if self.size else pending_first_timestamp
        cdef int64_t waited = time_waited_for_roll(now, max_timestamp, first, self.created_ms)
        return should_roll(
            size,
            batch_size,
            self.segment_bytes,
            waited,
            self.segment_ms - self.roll_jitter_ms,
            self.offset_index.is_full or self.time_index.is_full,
            last_offset - self.base_offset > INT32_MAX,
        )

    def roll_point(
        self,
        const int64_t[::1] sizes,
        const int64_t[::1] max_timestamps,
        const int64_t[::1] last_offsets,
        int64_t now,
        Py_ssize_t start,
        bint check_first,
    ):
        """Where a roll comes in batches ``start``.. written together to this
        segment at ``now``: the first ``i`` whose `should_roll_before`, after
        the batches from ``start`` before it, says so (``start`` itself only
        asked if ``check_first``: a batch that just had a roll is not asked
        again); the number of batches if none."""
        cdef Py_ssize_t i, n = sizes.shape[0]
        cdef int64_t pending = 0
        for i in range(start, n):
            if (i > start or check_first) and self.should_roll_before(
                sizes[i],
                max_timestamps[i],
                last_offsets[i],
                now,
                pending,
                max_timestamps[start] if pending else NO_TIMESTAMP,
            ):
                return i
            pending += sizes[i]
        return n

    cdef int write(self, int fd, iovec* parts, int count, Py_ssize_t total) except -1:
        """Write ``parts`` (``total`` bytes) at the end of the segment's file
        with one ``writev()``: all of them, or the file is cut back to where it
        ended and the error raised (`cut_back`). The line path's, in C."""
        cdef Py_ssize_t written = writev(fd, parts, count)
        while written < 0 and errno == EINTR:
            written = writev(fd, parts, count)
        cdef int code = errno
        if written == total:
            return 0
        if written < 0:
            raise self.cut_back(fd, OSError(code, os.strerror(code)))
        raise self.cut_back(fd, short_write(written, total))

    def write_all(self, int fd, list buffers):
        """`write` of Python buffers (bytes, memoryviews; gathered by the
        kernel, no copy), through ``os.writev``: `LogSegment.append`'s."""
        if len(buffers) > IOV_MAX:
            buffers = [b"".join(buffers)]
        total = sum(len(b) for b in buffers)
        if total >= RESERVE_FROM and self.size + total > self.reserved:
            self.reserve_ahead(fd, total)
        try:
            written = os.writev(fd, buffers)
            if written != total:
                raise short_write(written, total)
        except BaseException as e:
            raise self.cut_back(fd, e)

    cdef void reserve_ahead(self, int fd, int64_t total) noexcept:
        """Blocks for a write of ``total`` bytes and four more like it (at most
        RESERVE_MAX, not past segment.bytes) reserved past the file's end, its
        size unchanged: the write fills them instead of having ext4 reserve
        block by block as it copies (docs/benchmarks.md, "Bulk writes taken from
        the request, into blocks reserved ahead"). Given back at the roll (`LogAppends.roll`); where
        it cannot be done, the file system allocates as it writes."""
        cdef int64_t start = max(self.size, self.reserved)
        cdef int64_t end = self.size + total + min(4 * total, <int64_t>RESERVE_MAX)
        end = min(end, max(self.segment_bytes, self.size + total))
        self.reserved = end  # tried: not again before the writes pass it
        if end > start:
            fallocate(fd, FALLOC_FL_KEEP_SIZE, start, end - start)

    def cut_back(self, int fd, error):
        """After a failed write: the file cut back to the segment's end, so no
        part of a batch stays behind; the error to raise, ``error``, or, if the
        cut fails too, that failure (a torn batch stays in the file: not a
        clean error; its errno is the cut's)."""
        self.reserved = 0  # the cut gives back what was reserved past the end
        try:
            os.ftruncate(fd, self.size)
        except OSError as undo:
            cut = f"cutting off a partly written batch failed: {undo.strerror}"
            failed = OSError(undo.errno, cut)
            failed.__cause__ = error
            return failed
        return error


def short_write(Py_ssize_t written, Py_ssize_t total):
    """What a write() that took only part of a batch means: no space for the rest."""
    return OSError(ENOSPC, f"short write of {written} of {total} bytes")
