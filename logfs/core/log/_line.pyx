# cython: language_level=3
"""The one-line fast path: one unkeyed record appended to a partition's active segment.

Web servers and loggers write one line per ``write()``. Through `Log.append`
each such line pays for machinery sized for many records (cutting records
into batches, a list of values, the general encoder, numpy). Here the
one-record batch is encoded in C (the same bytes `Log.append` writes) and
written to the active segment with one ``writev()``, in two steps, so that
the mount can answer the writer between them (mount/fuse/_lines.pyx):

1. `LineWriter.write_at` checks that nothing but an append is to be decided —
   asking the segment's roll rule as the general path does — encodes the
   batch (its CRC-32C in C over the pieces, format/crc32c.h: the line is
   written from where the caller holds it, not copied) and has the segment's
   books write it (`SegmentTail.write`: all of
   it, or none and the error); once it returns, the record is in the file
   (the page cache) and survives the daemon's death, as after `Log.append`;
2. `LineWrite.keep_books` keeps the books through the same owners as the general
   path: the segment's tail (index entries, stream marks, size, next offset,
   max timestamp: books.pyx) and what the next flush must sync (`Unflushed`).
   Nothing may touch the log between the two steps.

A writer of lines writes them in a row, and the mount takes them in a row
while nothing else runs on the log (mount/fuse/_lines.pyx): `LineWriter.write_next_at`
writes such a line through what the row's first `write_at` found (the segment, its
descriptor, the topic's rules), checking only what a line of the row changes
(the segment's roll rule, flush.messages, the line's length) and whether the
descriptor budget closed a file since (`DESCRIPTORS.closed`: a reader in
another thread may have closed this segment's file).

`write_at` declines (None, nothing written) whenever the general path has more
to decide: a roll due, a compacted or compressed topic, a record that would
reach flush.messages (its write() waits for the fsync), an offline or
read-only log, live keys kept, a record near the size limit, a transaction
open in the partition (the record's stream bytes wait for the last stable offset). A failed write
fails as in `Log.append` (`Failure.write_failed`).

The steps are C functions (_line.pxd), which the mount's compiled take of a
line calls with the line where the request holds it; `write`, `write_next` and
`finish` are the same from Python (`Log.write_line`, the tests). It works over
the partition's `PartitionState` (state.py), as `Log`'s other parts do, and
cimports the segment's books (storage/books.pxd) so that they are kept without
Python's attribute lookups.
"""

from cpython.bytes cimport PyBytes_AS_STRING
from libc.errno cimport EIO
from libc.stdint cimport int64_t, uint8_t, uint32_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from posix.uio cimport iovec

from ..format.binary cimport HeaderLayout, header_layout, put_be, put_varint, varint_size
from ..storage.books cimport SegmentTail


cdef extern from "../format/crc32c.h":
    uint32_t logfs_crc32c(uint32_t crc, const void *data, size_t size) nogil
    uint32_t logfs_crc32c_portable(uint32_t crc, const void *data, size_t size) nogil

from ..config import flush_messages_limit, now_ms
from ..format import compression, record
from ..format.batching import max_record_bytes
from ..storage import DESCRIPTORS

# Values up to this size take the fast path; longer ones are rare in line-at-a-time
# writers and the general path checks them against max.message.bytes exactly.
MAX_VALUE = 64 << 10
cdef HeaderLayout H = header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)
cdef int MAGIC = record.MAGIC
cdef int LOG_APPEND_TIME_BIT = record.TIMESTAMP_TYPE_BIT
cdef uint8_t NO_HEADERS = 0  # a record's headers count, the last byte of the line's batch
cdef enum:
    HEAD_ROOM = 128  # the batch header and a record's head
    MAX_RECORD_HEAD = 16  # a record's length, fixed fields and value length, as varints

if H.size + MAX_RECORD_HEAD > HEAD_ROOM:
    raise ImportError(f"a batch header of {H.size} bytes leaves no room for a record's head")

NONE = compression.NONE
BY_NAME = compression.BY_NAME


cdef inline const uint8_t *bytes_at(bytes data, Py_ssize_t length) except NULL:
    """Where ``data``'s first ``length`` bytes lie."""
    if not 0 <= length <= len(data):
        raise ValueError(f"{length} bytes of {len(data)}")
    return <const uint8_t *>PyBytes_AS_STRING(data)


cdef inline int64_t wall_ms():
    """`now_ms` in C (the log's clock unless a test gave it another)."""
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class LineWrite:
    """A record written to the active segment whose books are to be kept
    (attributes: _line.pxd)."""

    cdef int keep_books(self) except -1:
        """The books after the write, each kept by its owner: the segment's tail
        and what the next flush must sync. If that fails, the line is in the
        file but the books lag it, and appending more would index them at wrong
        positions: the partition goes offline until the next open's recovery,
        which indexes what the file holds."""
        try:
            self.tail.appended(self.size, self.first, self.now, self.stream_bytes)
            self.unflushed.appended(self.segment, 1)
        except Exception as e:
            self.state.fail("indexing an appended line", OSError(EIO, repr(e)))
            raise
        self.finished = True
        return 0

    def finish(self):
        """`keep_books`, from Python."""
        self.keep_books()


cdef class LineWriter:
    """The one-line fast path of one partition (`Log.write_line`; attributes:
    _line.pxd)."""

    def __init__(self, state):
        self.state = state

    cdef int learn(self, config) except -1:
        """The config's part of the checks, for every line until it changes."""
        self.declines = (
            "compact" in config.cleanup_policy or BY_NAME[config.compression_type] != NONE
        )
        self.max_length = min(MAX_VALUE, max_record_bytes(config) - 1)
        self.max_message = config.max_message_bytes
        self.flush_at = flush_messages_limit(config)
        self.attributes = (
            LOG_APPEND_TIME_BIT if config.message_timestamp_type == "LogAppendTime" else 0
        )
        self.config = config
        return 0

    def write(self, bytes data, Py_ssize_t length):
        """Write a record holding ``data[:length]`` (no key, no headers, the
        time now) to the active segment if the fast path applies: a
        `LineWrite` to finish before anything else touches the log, else None
        and nothing written. A record that would reach flush.messages is
        declined too: its write() must wait for the fsync (the general path).

        Raises:
            OSError: writing failed, as in `Log.append` (the partition goes
                offline unless it is a clean ENOSPC).
        """
        return self.write_at(bytes_at(data, length), length)

    def write_next(self, bytes data, Py_ssize_t length):
        """`write_next_at` of ``data[:length]``, from Python."""
        return self.write_next_at(bytes_at(data, length), length)

    cdef LineWrite write_at(self, const uint8_t *data, Py_ssize_t length):
        """`write` of the ``length`` bytes at ``data``."""
        self.last = None
        state = self.state
        config = state.config
        if config is not self.config:
            self.learn(config)
        unflushed = state.unflushed
        if (
            self.declines
            or not state.writable
            or state.follows is not None
            or state.failure.reason is not None
            or state.held_from >= 0
            or not state.keys.quiet
        ):
            return None
        segment = state.active_segment
        clock = state.clock
        cdef int64_t now = wall_ms() if clock is now_ms else clock()
        cdef int fd = segment.fileno()
        cdef LineWrite done = LineWrite.__new__(LineWrite)
        done.state, done.segment, done.unflushed = state, segment, unflushed
        done.tail = segment.tail
        if self.put(done, fd, data, length, now, unflushed.messages) < 0:
            return None
        if clock is now_ms:  # a test's clock is asked at every line
            self.last, self.last_fd, self.closes = done, fd, DESCRIPTORS.closed
        return done

    cdef LineWrite write_next_at(self, const uint8_t *data, Py_ssize_t length):
        """`write_at` of the next line of a row: the line right after the one this
        writer wrote and finished last, nothing else having touched the log
        since (the mount's row of one-line writes, mount/fuse/_lines.pyx). It
        goes to the segment and through the descriptor the row's first line
        found, unless the budget closed a file since; then, and after a line
        declined or failed, it is a `write_at`. The same `LineWrite` comes back,
        to finish again."""
        cdef LineWrite last = self.last
        if last is None or not last.finished or DESCRIPTORS.closed != self.closes:
            return self.write_at(data, length)
        last.finished = False
        if self.put(last, self.last_fd, data, length, wall_ms(), last.unflushed.messages) < 0:
            self.last = None
            return None
        return last

    cdef int put(
        self, LineWrite done, int fd, const uint8_t *data, Py_ssize_t length, int64_t now,
        int64_t pending,
    ) except -2:
        """Encode the record of the ``length`` bytes at ``data`` stamped ``now`` and write it to
        ``done``'s segment through ``fd``: 0, and ``done`` says what to finish;
        -1 and nothing written if a line of the row may not take the fast path
        (too long, flush.messages reached, a roll due)."""
        if length > self.max_length or pending + 1 >= self.flush_at:
            return -1
        # The record: its length, four one-byte fields, the value's length, the
        # value, and a zero header count.
        cdef uint8_t head[HEAD_ROOM]
        cdef int64_t body = 4 + varint_size(length) + length + 1
        cdef Py_ssize_t at = put_varint(head, H.size, body)
        head[at] = 0  # attributes
        head[at + 1] = 0  # timestamp delta
        head[at + 2] = 0  # offset delta
        head[at + 3] = 1  # key length -1
        cdef Py_ssize_t head_size = put_varint(head, at + 4, length)
        cdef Py_ssize_t size = head_size + length + 1
        if size > self.max_message:
            return -1
        cdef SegmentTail tail = done.tail
        cdef int64_t first = tail.next_offset
        if tail.should_roll_before(size, now, first, now):
            return -1  # a roll is due: the general path does it
        put_be(head, H.base_offset, first, 8)
        put_be(head, H.batch_length, size - H.log_overhead, 4)
        put_be(head, H.partition_leader_epoch, 0xFFFFFFFF, 4)  # -1
        head[H.magic] = MAGIC
        put_be(head, H.attributes, self.attributes, 2)
        put_be(head, H.last_offset_delta, 0, 4)
        put_be(head, H.base_timestamp, now, 8)
        put_be(head, H.max_timestamp, now, 8)
        put_be(head, H.producer_id, 0xFFFFFFFFFFFFFFFF, 8)  # -1
        put_be(head, H.producer_epoch, 0xFFFF, 2)  # -1
        put_be(head, H.base_sequence, 0xFFFFFFFF, 4)  # -1
        put_be(head, H.records_count, 1, 4)
        # The CRC covers the header from the attributes on, the record and its
        # headers count (0): computed over the three pieces, which are written
        # as they lie (no copy of the line).
        cdef uint32_t crc = logfs_crc32c(0, head + H.attributes, head_size - H.attributes)
        crc = logfs_crc32c(crc, data, length)
        put_be(head, H.crc, logfs_crc32c(crc, &NO_HEADERS, 1), 4)
        cdef iovec parts[3]
        parts[0].iov_base = head
        parts[0].iov_len = head_size
        parts[1].iov_base = <void *>data
        parts[1].iov_len = length
        parts[2].iov_base = &NO_HEADERS
        parts[2].iov_len = 1
        try:
            tail.write(fd, parts, 3, size)
        except OSError as e:
            self.last = None
            state = self.state
            state.failure.write_failed(e, state.recovery_point)
            raise
        done.first, done.now = first, now
        done.size, done.stream_bytes = size, length + 1
        return 0

    def append(self, bytes value):
        """`write` of ``value`` and its books at once: the record's offset, or
        None and nothing appended."""
        written = self.write(value, len(value))
        if written is None:
            return None
        written.finish()
        return written.first


def crc32c_of(bytes data, uint32_t value=0, bint portable=False):
    """The CRC-32C the line's batch is checksummed with, in C (format/crc32c.h):
    ``data``'s, extending ``value``; ``portable``: the table's, which machines
    without SSE4.2 use. For the tests, which compare both with the crc32c package."""
    if portable:
        return logfs_crc32c_portable(value, PyBytes_AS_STRING(data), len(data))
    return logfs_crc32c(value, PyBytes_AS_STRING(data), len(data))
