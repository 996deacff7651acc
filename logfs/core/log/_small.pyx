# cython: language_level=3
"""The small-write fast path: one unkeyed record appended to a partition's active segment.

Web servers and loggers write one line per ``write()``. Through `Log.append`
each such line pays for machinery sized for many records (cutting records
into batches, a list of values, the general encoder, numpy). Here the
one-record batch is encoded in C (the same bytes `Log.append` writes) and
written to the active segment with one ``writev()``, in two steps, so that
the mount can answer the writer between them (mount/fuse/_lines.pyx):

1. `write_line` checks that nothing but an append is to be decided, encodes
   the batch and writes it to the segment file; once it returns, the record
   is in the file (the page cache) and survives the daemon's death, as
   after `Log.append`;
2. `LineAppend.finish` does what `Log._write` does after its ``write()``:
   the index entry, the stream marks, the segment's size and next offset,
   and what the next flush must sync. Nothing may touch the log between
   the two steps.

`write_line` declines (None, nothing written) whenever the general path has
more to decide: a roll due, a compacted or compressed topic, an offline or
read-only log, keys being watched, a record near the size limit. A failed
write fails as in `Log.append`.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.errno cimport ENOSPC, errno
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from posix.uio cimport iovec, writev
from posix.unistd cimport ftruncate

import os

from crc32c import crc32c

from ..config import INT_MAX, now_ms
from ..format import compression
from ..format.batching import max_record_bytes
from ..format.record import HEADER_SIZE, LOG_OVERHEAD, MAGIC, TIMESTAMP_TYPE_BIT
from ..storage import DESCRIPTORS
from ..storage.stream import MARK_BYTES
from .failure import CLEAN_WRITE_ERRORS

# Values up to this size take the fast path; longer ones are rare in line-at-a-time
# writers and the general path checks them against max.message.bytes exactly.
MAX_VALUE = 64 << 10
cdef enum:
    HEADER_BYTES = 61  # record.HEADER_SIZE, checked below
    CRC_AT = 17  # the batch header's CRC field; what it covers starts after it
    COVERED_AT = 21  # attributes: the first byte the CRC covers
    MAX_RECORD_HEAD = 16  # a record's length, fixed fields and value length, as varints

if HEADER_SIZE != HEADER_BYTES:
    raise ImportError(f"a batch header is {HEADER_SIZE} bytes, not {HEADER_BYTES}")

NONE = compression.NONE
BY_NAME = compression.BY_NAME


cdef inline uint8_t *put_be(uint8_t *at, int64_t value, int size):
    cdef int i
    for i in range(size - 1, -1, -1):
        at[i] = <uint8_t>(value & 0xFF)
        value >>= 8
    return at + size


cdef inline uint8_t *put_varint(uint8_t *at, int64_t value):
    """Kafka's zigzag varint."""
    cdef unsigned long long z = <unsigned long long>((value << 1) ^ (value >> 63))
    while z >= 0x80:
        at[0] = <uint8_t>((z & 0x7F) | 0x80)
        at += 1
        z >>= 7
    at[0] = <uint8_t>z
    return at + 1


cdef inline int64_t wall_ms():
    """`now_ms` in C (the log's clock unless a test gave it another)."""
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000


cdef class LineAppend:
    """A record written to the active segment whose bookkeeping is to come."""

    cdef readonly object log
    cdef object segment
    cdef readonly int64_t first
    cdef int64_t start, now
    cdef Py_ssize_t size, stream_bytes

    def finish(self):
        """What `Log._write` does after its write(), for this one batch: the
        index as `LogSegment._index_batch`, the stream marks as
        `SegmentStream.on_append`, the flush's share as `Unflushed.appended`
        (tests/core/log/test_fast_path.py compares the state they leave with theirs)."""
        segment = self.segment
        if segment._managed:
            DESCRIPTORS.touch(segment)  # the descriptor budget's use mark
        cdef int64_t max_timestamp = segment.max_timestamp
        if self.now > max_timestamp:
            max_timestamp = self.now
            segment.max_timestamp, segment._offset_of_max = max_timestamp, self.first
        cdef int64_t since = segment._bytes_since_index_entry
        if since > segment.config.index_interval_bytes:
            segment.offset_index.append(self.first, self.start)
            segment.time_index.maybe_append(max_timestamp, segment._offset_of_max)
            since = 0
        segment._bytes_since_index_entry = since + self.size
        stream = segment.stream
        cdef list positions = stream._positions
        cdef int64_t appended = stream.appended
        if not positions or appended - <int64_t>positions[-1] >= MARK_BYTES:
            stream._offsets.append(self.first)
            positions.append(appended)
        stream.appended = appended + self.stream_bytes
        segment.size = self.start + self.size
        segment.next_offset = self.first + 1
        unflushed = self.log._unflushed
        cdef dict written = unflushed.segments
        written[segment.base_offset] = segment
        unflushed.messages += 1


cdef _write_failed(log, int fd, int64_t start, Py_ssize_t written, Py_ssize_t size):
    """Raise what `Log._write` raises when `LogSegment.append`'s writev fails:
    the batch cut off, and the partition offline unless the error is clean."""
    cdef int code = errno
    if written < 0:
        error = OSError(code, os.strerror(code))
    else:
        error = OSError(ENOSPC, f"short write of {written} of {size} bytes")
    if ftruncate(fd, start) != 0:  # a torn batch stays in the file: not a clean error
        code = errno
        error = OSError(code, f"cutting off a partly written batch failed: {os.strerror(code)}")
    if error.errno not in CLEAN_WRITE_ERRORS:
        log.fail("appending to a segment", error)
    raise error


def write_line(log, bytes data, Py_ssize_t length):
    """Write a record holding ``data[:length]`` (no key, no headers, the time
    now) to ``log``'s active segment if the fast path applies: a `LineAppend`
    to finish before anything else touches the log, else None and nothing
    written.

    Raises:
        OSError: writing failed, as in `Log.append` (the partition goes
            offline unless it is a clean ENOSPC).
    """
    config = log.config
    keys = log._keys
    if (
        not log.writable
        or log._failure.reason is not None
        or "compact" in config.cleanup_policy
        or keys._latest is not None
        or keys._changed
        or length > MAX_VALUE
        or length >= max_record_bytes(config)
        or BY_NAME[config.compression_type] != NONE
    ):
        return None
    cdef uint8_t head[HEADER_BYTES + MAX_RECORD_HEAD]
    cdef uint8_t *at = head + HEADER_BYTES
    cdef int64_t body = 4 + (put_varint(at, length) - at) + length + 1  # see below
    at = put_varint(at, body)
    at[0] = 0  # attributes
    at[1] = 0  # timestamp delta
    at[2] = 0  # offset delta
    at[3] = 1  # key length -1
    at = put_varint(at + 4, length)
    cdef Py_ssize_t head_size = at - head
    cdef Py_ssize_t size = head_size + length + 1
    if size > config.max_message_bytes:
        return None
    cdef list segments = log.segments
    segment = segments[len(segments) - 1]
    cdef int64_t first = segment.next_offset
    clock = log.clock
    cdef int64_t now = wall_ms() if clock is now_ms else clock()
    cdef int64_t segment_size = segment.size
    # `should_roll`'s rule, read from the segment without building its arguments
    if segment_size > 0 and (
        segment_size > config.segment_bytes - size
        or now - (segment._first_timestamp or segment.first_timestamp) > config.segment_ms
    ):
        return None  # a roll is due: `Log._write` does it
    offsets, times = segment.offset_index, segment.time_index
    if (
        offsets._count >= offsets.max_entries
        or times._count >= times.max_entries
        or first - segment.base_offset > INT_MAX
    ):
        return None  # the same
    cdef int attributes = (
        TIMESTAMP_TYPE_BIT if config.message_timestamp_type == "LogAppendTime" else 0
    )
    at = head
    at = put_be(at, first, 8)
    at = put_be(at, size - LOG_OVERHEAD, 4)
    at = put_be(at, -1, 4)  # partition leader epoch
    at[0] = MAGIC
    at = put_be(at + 5, attributes, 2)  # after the CRC, filled in below
    at = put_be(at, 0, 4)  # last offset delta
    at = put_be(at, now, 8)
    at = put_be(at, now, 8)
    at = put_be(at, -1, 8)  # producer id
    at = put_be(at, -1, 2)  # producer epoch
    at = put_be(at, -1, 4)  # base sequence
    put_be(at, 1, 4)  # records
    # The CRC covers the header from the attributes on, the record and its
    # headers count (0): built where it is contiguous, then computed once.
    covered = PyBytes_FromStringAndSize(NULL, size - COVERED_AT)
    cdef uint8_t *c = <uint8_t *>PyBytes_AS_STRING(covered)
    memcpy(c, head + COVERED_AT, head_size - COVERED_AT)
    memcpy(c + head_size - COVERED_AT, PyBytes_AS_STRING(data), length)
    c[size - COVERED_AT - 1] = 0  # headers count
    put_be(head + CRC_AT, <uint32_t>crc32c(covered), 4)
    cdef int fd = segment._fd
    if fd < 0:
        fd = segment._file()
    cdef iovec parts[2]
    parts[0].iov_base = head
    parts[0].iov_len = COVERED_AT
    parts[1].iov_base = c
    parts[1].iov_len = size - COVERED_AT
    cdef Py_ssize_t written = writev(fd, parts, 2)
    if written != size:
        _write_failed(log, fd, segment_size, written, size)
    cdef LineAppend done = LineAppend.__new__(LineAppend)
    done.log, done.segment = log, segment
    done.first, done.start, done.now = first, segment_size, now
    done.size, done.stream_bytes = size, length + 1
    return done


def append_line(log, bytes value):
    """`write_line` and its bookkeeping at once: the record's offset, or None
    and nothing appended."""
    written = write_line(log, value, len(value))
    if written is None:
        return None
    written.finish()
    return written.first
