# A segment's books (books.pyx), for the compiled append path (log/_line.pyx)
# as much as for segment.py: one definition of what an append changes.

from libc.stdint cimport int64_t
from posix.uio cimport iovec


cdef class SegmentStream:
    cdef readonly int64_t loaded_size
    cdef public object loaded
    cdef public object origin
    cdef readonly int64_t appended
    cdef list offsets
    cdef list positions

    cdef int note(self, int64_t first_offset, int64_t stream_bytes) except -1


cdef class SegmentTail:
    cdef readonly int64_t base_offset
    cdef public int64_t size
    cdef public int64_t next_offset
    cdef public int64_t max_timestamp
    cdef public int64_t offset_of_max
    cdef public int64_t bytes_since_index_entry
    cdef readonly int64_t created_ms
    cdef readonly int64_t roll_jitter_ms
    cdef int64_t rolling_timestamp
    cdef bint rolling_known
    cdef int64_t segment_bytes
    cdef int64_t segment_ms
    cdef int64_t index_interval_bytes
    cdef object offset_index
    cdef object time_index
    cdef object read_first_timestamp
    cdef readonly SegmentStream stream
    cdef int64_t reserved  # the end of the blocks reserved past the file's end

    cdef bint index_rule(
        self, int64_t size, int64_t last_offset, int64_t max_timestamp
    ) noexcept
    cdef int grew(
        self, int64_t size, int64_t last_offset, int64_t max_timestamp, int64_t stream_bytes
    ) except -1
    cdef int64_t first_batch_timestamp(self) except? -2
    cdef int write(self, int fd, iovec* parts, int count, Py_ssize_t total) except -1
    cdef void reserve_ahead(self, int fd, int64_t total) noexcept
    cpdef appended(
        self, int64_t size, int64_t last_offset, int64_t max_timestamp, int64_t stream_bytes
    )
    cpdef bint should_roll_before(
        self,
        int64_t batch_size,
        int64_t max_timestamp,
        int64_t last_offset,
        int64_t now,
        int64_t pending=*,
        int64_t pending_first_timestamp=*,
    ) except -1
