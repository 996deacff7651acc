# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The lines of uncompressed batches in one compiled pass (``stream``'s hot path).

`plain_lines` reads a region of a .log file whose batches were already found and
CRC-checked (logfile.py's `read_region`), walks each shown batch's records with
the one record walker (`read_full`: every record checked as
`walk_records` checks it) and copies each value followed by ``\\n`` into one
output buffer as it goes: no columns, no second pass over the records. The
bytes are those of `columnar.value_lines` over `columnar.decode_region` (tests
hold the two to each other); compressed batches stay on that path.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from .binary cimport HeaderLayout, get_be, header_layout, whole_batch
from .crc cimport logfs_crc32c
from .walker cimport OK, SECTION, Rec, read_full

from . import record

cdef HeaderLayout H = header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)
cdef int MAGIC = record.MAGIC
cdef int CODEC_MASK = record.CODEC_MASK
cdef int TRANSACTIONAL_BIT = record.TRANSACTIONAL_BIT
cdef int CONTROL_BIT = record.CONTROL_BIT


cdef int copy_lines(
    const uint8_t* b, Py_ssize_t at, int64_t start, char* dst, Py_ssize_t* out, int64_t* k
) except -1:
    """The lines of the batch at ``b + at`` (records from offset ``start``: a
    batch from ``start`` on is whole, as `value_lines` keeps it) to
    ``dst + out[0]``, moving ``out[0]`` on; OK or the walker's problem, with
    the record's index in ``k[0]``. As `walk_section`: every record read and
    checked (FULL), and the records ending exactly where the batch does."""
    cdef const uint8_t* h = b + at
    cdef Py_ssize_t pos = at + H.size, w = out[0]
    cdef Py_ssize_t end = at + <int32_t>get_be(h + H.batch_length, 4) + H.log_overhead
    cdef int64_t base = <int64_t>get_be(h + H.base_offset, 8)
    cdef int64_t count = <int32_t>get_be(h + H.records_count, 4), n, value_len
    cdef int code
    cdef Rec r
    for n in range(count):
        k[0] = n
        code = read_full(b, pos, end, -1, False, &r)
        if code != OK:
            out[0] = w
            return code
        if base >= start or base + r.offset_delta >= start:
            value_len = r.value_len if r.value_len > 0 else 0
            memcpy(dst + w, b + r.value, value_len)
            w += value_len
            dst[w] = 10
            w += 1
        pos = r.end
    out[0] = w
    k[0] = count
    return OK if pos == end else SECTION


def plain_lines(
    const uint8_t[::1] region,
    const int64_t[::1] positions,
    int64_t start,
):
    """Every record's value followed by ``\\n`` (a null value: just ``\\n``), for
    the uncompressed batches at ``positions`` of ``region`` (whole, CRC-checked
    batches, the caller's choice of shown ones), leaving out records whose
    offset is below ``start``.

    Returns:
        ``(lines, code, batch, record)``: the lines (a memoryview of a
        bytearray) and OK, or the walker's first problem (`Problem`) with the
        index of its batch in ``positions`` and of its record there.
    """
    cdef Py_ssize_t n = positions.shape[0], i, size, bound = 0, at = 0
    cdef const uint8_t* b = &region[0] if region.shape[0] else NULL
    cdef int64_t k
    cdef int code
    # A record takes at least 6 bytes besides its value, so a records section
    # bounds its lines; the buffer is cut to what was written.
    for i in range(n):
        size = <int32_t>get_be(b + positions[i] + H.batch_length, 4) + H.log_overhead
        bound += size - H.size
    out = PyByteArray_FromStringAndSize(NULL, bound)
    cdef char* dst = PyByteArray_AS_STRING(out)
    for i in range(n):
        code = copy_lines(b, positions[i], start, dst, &at, &k)
        if code != OK:
            return memoryview(out)[:at], code, i, k
    return memoryview(out)[:at], OK, 0, 0


def scan_lines(
    const uint8_t[::1] region,
    int64_t start,
    int64_t end_offset,
    bint transactions_shown,
):
    """The lines of the batches of ``region`` (read from a .log file at a batch
    boundary) in one pass: each batch's header checked as `scan_batches`
    checks it and its CRC-32C (crc32c.h, where the batch lies),
    then its records walked and their values copied out (`copy_lines`).
    Control batches add nothing. The pass stops, for the caller's slower path
    to look at, at the first batch that is cut off by the region's end, bad
    (header or CRC), compressed, from ``end_offset`` on, or a transactional
    data batch unless ``transactions_shown`` (no aborted transaction in range).

    Returns:
        ``(lines, stop, next_offset, code, record)``: the lines (a memoryview of
        a bytearray), where the pass stopped in ``region``, the offset after the
        last batch passed (-1: none), and OK, or the walker's problem met in
        the batch at ``stop`` at its record ``record``.
    """
    cdef Py_ssize_t limit = region.shape[0], pos = 0, size, at = 0
    cdef const uint8_t* b = &region[0] if limit else NULL
    cdef const uint8_t* h
    cdef int64_t last_delta, base, next_offset = -1, k
    cdef int attributes, code
    # Each record takes at least 6 bytes besides its value: the region bounds its lines.
    out = PyByteArray_FromStringAndSize(NULL, limit)
    cdef char* dst = PyByteArray_AS_STRING(out)
    while pos + H.size <= limit:
        h = b + pos
        size = whole_batch(h, H, limit - pos, MAGIC)
        if size < 0:
            break
        last_delta = <int32_t>get_be(h + H.last_offset_delta, 4)
        base = <int64_t>get_be(h + H.base_offset, 8)
        attributes = <int>get_be(h + H.attributes, 2)
        if base >= end_offset or attributes & CODEC_MASK:
            break
        if not transactions_shown and attributes & (TRANSACTIONAL_BIT | CONTROL_BIT) == (
            TRANSACTIONAL_BIT
        ):
            break  # maybe aborted: the caller's to judge
        if logfs_crc32c(0, h + H.attributes, size - H.attributes) != get_be(h + H.crc, 4):
            break
        if not attributes & CONTROL_BIT:
            code = copy_lines(b, pos, start, dst, &at, &k)
            if code != OK:
                return memoryview(out)[:at], pos, next_offset, code, k
        next_offset = base + last_delta + 1
        pos += size
    return memoryview(out)[:at], pos, next_offset, OK, 0
