# The byte-level helpers every compiled module of logfs cimports: Kafka's
# zig-zag varints, big-endian integers, and where the fields of a batch header
# lie. The layout is not restated here: record.py's `HEADER` struct is its one
# definition, and each module reads the offsets from it when it is imported
# (`header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)`).

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t


cdef struct HeaderLayout:
    # Where each field of a RecordBatch v2 header starts, and the header's size.
    Py_ssize_t size
    Py_ssize_t base_offset
    Py_ssize_t batch_length
    Py_ssize_t partition_leader_epoch
    Py_ssize_t magic
    Py_ssize_t crc
    Py_ssize_t attributes
    Py_ssize_t last_offset_delta
    Py_ssize_t base_timestamp
    Py_ssize_t max_timestamp
    Py_ssize_t producer_id
    Py_ssize_t producer_epoch
    Py_ssize_t base_sequence
    Py_ssize_t records_count
    Py_ssize_t log_overhead  # the bytes before the partition leader epoch (not in the length)


cdef inline HeaderLayout header_layout(dict offsets, Py_ssize_t size) except *:
    """The layout from record.py's field offsets (by field name) and header size."""
    cdef HeaderLayout h
    h.size = size
    h.base_offset = offsets["base_offset"]
    h.batch_length = offsets["batch_length"]
    h.partition_leader_epoch = offsets["partition_leader_epoch"]
    h.magic = offsets["magic"]
    h.crc = offsets["crc"]
    h.attributes = offsets["attributes"]
    h.last_offset_delta = offsets["last_offset_delta"]
    h.base_timestamp = offsets["base_timestamp"]
    h.max_timestamp = offsets["max_timestamp"]
    h.producer_id = offsets["producer_id"]
    h.producer_epoch = offsets["producer_epoch"]
    h.base_sequence = offsets["base_sequence"]
    h.records_count = offsets["records_count"]
    h.log_overhead = h.partition_leader_epoch
    return h


cdef inline uint64_t get_be(const uint8_t* p, int size) noexcept nogil:
    """The unsigned big-endian integer of ``size`` bytes at ``p``."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(size):
        v = (v << 8) | p[i]
    return v


cdef inline void put_be(uint8_t* out, Py_ssize_t pos, uint64_t value, int size) noexcept nogil:
    """``value``'s low ``size`` bytes, big-endian, at ``out[pos:]``."""
    cdef int i
    for i in range(size - 1, -1, -1):
        out[pos + i] = value & 0xFF
        value >>= 8


cdef inline uint64_t zigzag(int64_t value) noexcept nogil:
    return (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)


cdef inline int varint_size(int64_t value) noexcept nogil:
    """The bytes of ``value`` as a zig-zag varint."""
    cdef uint64_t z = zigzag(value)
    if z < 0x80:  # the usual sizes first: a record's lengths and deltas
        return 1
    if z < 0x4000:
        return 2
    cdef int size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


cdef inline Py_ssize_t put_varint(uint8_t* out, Py_ssize_t pos, int64_t value) noexcept nogil:
    """``value`` as a zig-zag varint at ``out[pos:]``; the position after it."""
    cdef uint64_t z = zigzag(value)
    if z < 0x80:  # the usual sizes first, as in `varint_size`
        out[pos] = <uint8_t>z
        return pos + 1
    if z < 0x4000:
        out[pos] = (z & 0x7F) | 0x80
        out[pos + 1] = <uint8_t>(z >> 7)
        return pos + 2
    while z >= 0x80:
        out[pos] = (z & 0x7F) | 0x80
        z >>= 7
        pos += 1
    out[pos] = <uint8_t>z
    return pos + 1


cdef inline Py_ssize_t read_varint(
    const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, int64_t* out
) noexcept nogil:
    """The zig-zag varint at ``pos``, into ``out``; the position after it, -1
    when it runs past ``end``, -2 when it is longer than 10 bytes."""
    cdef uint64_t z = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if pos >= end:
            return -1
        b = buf[pos]
        pos += 1
        z |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            out[0] = <int64_t>(z >> 1) ^ -<int64_t>(z & 1)
            return pos
        shift += 7
        if shift > 63:
            return -2


cdef inline Py_ssize_t whole_batch(
    const uint8_t* h, HeaderLayout H, Py_ssize_t room, uint8_t magic
) noexcept nogil:
    """The size of the batch whose header is at ``h``, or -1 where that header cannot
    be right (magic, length, last offset delta, record count) or the batch does not fit
    in the ``room`` bytes from ``h``: the first check of every reader of .log bytes."""
    cdef int64_t size = <int32_t>get_be(h + H.batch_length, 4) + H.log_overhead
    if h[H.magic] != magic or size < H.size or size > room:
        return -1
    if <int32_t>get_be(h + H.last_offset_delta, 4) < 0:
        return -1
    if <int32_t>get_be(h + H.records_count, 4) < 0:
        return -1
    return size
