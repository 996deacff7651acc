# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled check of whole batches a producer sent (validate.py, the
``append.batches`` and Produce paths): headers, CRCs and, through the one
record walker (walker.pyx), every record, in one pass over all the batches of
a call."""

from libc.stdint cimport INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t

from .binary cimport HeaderLayout, get_be, header_layout
from .crc cimport logfs_crc32c
from .walker cimport OK, Walk, walk_section

from . import compression, record

cdef HeaderLayout H = header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)
cdef int MAGIC = record.MAGIC
cdef int CODEC_MASK = record.CODEC_MASK
TRANSACTIONAL_BIT = record.TRANSACTIONAL_BIT
CONTROL_BIT = record.CONTROL_BIT
cdef int LAST_CODEC = max(compression.NAMES)  # the codecs compression.py knows

# check_batches' own problems, beyond the walker's `Problem`.
HEADER_PROBLEM = 100  # the header is refused: validate.py's header check says why
TIMESTAMP_RANGE = 101  # record timestamps outside a 64-bit integer


def check_batches(
    const uint8_t[::1] data,
    const int64_t[::1] starts,
    const int64_t[::1] sizes,
    int64_t max_message_bytes,
    bint keys_required,
    int64_t[:, ::1] out,
    int refused_bits=TRANSACTIONAL_BIT | CONTROL_BIT,
):
    """Check the batches ``data[starts[i]:starts[i] + sizes[i]]`` a producer
    sent, as Kafka's broker does: header (length field, magic, size within
    ``max_message_bytes``, CRC-32C (crc32c.h, where the batch lies),
    none of the ``refused_bits`` (control, and transactional but from a producer
    in a transaction: validate.py), a known codec, at least one record, the
    last offset delta) and, for uncompressed batches, every record as
    `walker.walk_records` with ``strict``.

    For batch i, ``out[:, i]`` gets: records count, its records' largest
    timestamp, its stream bytes (values plus one per record), 1 if it is
    compressed (its records not walked: the caller decompresses them), its
    attributes and its header's max timestamp.

    Returns:
        ``(code, batch, record, found, wanted)`` as `walker.walk_records`, or
        HEADER_PROBLEM or TIMESTAMP_RANGE for ``batch``.
    """
    cdef const uint8_t* buf = &data[0] if data.shape[0] else NULL
    cdef const uint8_t* h
    cdef Py_ssize_t i, start, size
    cdef int64_t count, base_timestamp, attributes
    cdef Walk w
    cdef int code
    for i in range(starts.shape[0]):
        start, size = starts[i], sizes[i]
        h = buf + start
        if size < H.size or <int32_t>get_be(h + H.batch_length, 4) != size - H.log_overhead:
            return HEADER_PROBLEM, i, 0, 0, 0
        if h[H.magic] != MAGIC or size > max_message_bytes:
            return HEADER_PROBLEM, i, 0, 0, 0
        attributes = <int16_t>get_be(h + H.attributes, 2)
        count = <int32_t>get_be(h + H.records_count, 4)
        if attributes & refused_bits or (attributes & CODEC_MASK) > LAST_CODEC:
            return HEADER_PROBLEM, i, 0, 0, 0
        if count < 1 or <int32_t>get_be(h + H.last_offset_delta, 4) != count - 1:
            return HEADER_PROBLEM, i, 0, 0, 0
        if logfs_crc32c(0, h + H.attributes, size - H.attributes) != get_be(h + H.crc, 4):
            return HEADER_PROBLEM, i, 0, 0, 0
        base_timestamp = <int64_t>get_be(h + H.base_timestamp, 8)
        out[0, i] = count
        out[3, i] = attributes & CODEC_MASK != 0
        out[4, i] = attributes
        out[5, i] = <int64_t>get_be(h + H.max_timestamp, 8)
        if out[3, i]:
            continue
        code = walk_section(
            buf, start + H.size, start + size, count, NULL, 0, True, keys_required, &w
        )
        if code != OK:
            return code, i, w.record, w.found, w.wanted
        if (w.ts_high > 0 and base_timestamp > INT64_MAX - w.ts_high) or (
            w.ts_low < 0 and base_timestamp < INT64_MIN - w.ts_low
        ):
            return TIMESTAMP_RANGE, i, 0, 0, 0
        out[1, i] = base_timestamp + w.ts_high
        out[2, i] = w.value_bytes + count
    return OK, 0, 0, 0, 0
