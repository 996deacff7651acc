# The one-line fast path (_line.pyx), for the mount's compiled take of a line
# (mount/fuse/_lines.pyx, through this package's __init__.pxd): its calls per
# line are C calls, the bytes of the line read where the request holds them.

from libc.stdint cimport int64_t, uint8_t

from ..storage.books cimport SegmentTail


cdef class LineWrite:
    cdef object state, segment, unflushed
    cdef SegmentTail tail
    cdef readonly int64_t first
    cdef int64_t now
    cdef Py_ssize_t size, stream_bytes
    cdef bint finished  # its books are kept: the next line of a row may follow it

    cdef int keep_books(self) except -1


cdef class LineWriter:
    cdef object state
    # What the topic's config decides for every line, worked out once per
    # config (a `TopicConfig` is immutable: a change replaces it).
    cdef object config  # the config they were worked out for
    cdef bint declines  # compacted or compressed: the general path
    cdef Py_ssize_t max_length  # the longest value taken
    cdef int64_t max_message  # max.message.bytes
    cdef int64_t flush_at  # unflushed records at which flush.messages is reached
    cdef int attributes  # the batch's timestamp type
    # The row's last line (`write_next`): its write, the segment's descriptor it
    # went through, and the budget's count of closed files then.
    cdef LineWrite last
    cdef int last_fd
    cdef Py_ssize_t closes

    cdef int learn(self, config) except -1
    cdef LineWrite write_at(self, const uint8_t *data, Py_ssize_t length)
    cdef LineWrite write_next_at(self, const uint8_t *data, Py_ssize_t length)
    cdef int put(
        self, LineWrite done, int fd, const uint8_t *data, Py_ssize_t length, int64_t now,
        int64_t pending,
    ) except -2
