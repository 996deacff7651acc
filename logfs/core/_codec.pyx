# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled loops of the record codec: those that touch every record.

`record.py` is the readable reference for the RecordBatch v2 layout; this
module does the per-record work of the hot paths in C, over many batches at
once, and the tests hold it to the reference byte for byte:

- `walk_records` follows the records of records sections (uncompressed), checks
  every field as Kafka's broker does, and notes where each record's key and
  value are: for decoding (columnar.py: ``stream``, ``offset/<n>``, Spark) and
  for compressed batches once decompressed;
- `check_batches` checks whole batches a producer sent, headers, CRCs and
  records (validate.py, the ``append.batches`` path);
- `gather` copies many values out of a buffer into one, each optionally
  followed by a separator byte: the lines of ``stream`` and the data buffer of
  an Arrow binary column, with its offsets.

A record, after the batch header (all varints zig-zag encoded)::

    length | attributes (1 byte) | timestamp delta | offset delta |
    key length | key | value length | value | header count |
    (header key length | header key | header value length | header value)*
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

import numpy as np

cdef enum:
    # The smallest record: attributes, timestamp delta, offset delta, key
    # length, value length and header count, one byte each.
    MIN_RECORD_BYTES = 6


cpdef enum Problem:
    # What `walk_records` found wrong; validate.py words the messages.
    OK = 0
    DECLARED = 1  # the section ends before the declared records do
    LONG_VARINT = 2  # a varint over 10 bytes
    SHORT_RECORD = 3  # a record length under MIN_RECORD_BYTES
    TIMESTAMP_OVERRUN = 4
    OFFSET_OVERRUN = 5
    OFFSET_ORDER = 6  # an offset delta other than the record's index (strict only)
    KEY_LENGTH = 7
    NO_KEY = 8  # a null key where keys are required
    VALUE_LENGTH = 9
    HEADER_COUNT = 10
    HEADERS = 11  # a null, non-UTF-8 or overrunning header
    UNFILLED = 12  # the fields end before the record's length says
    SECTION = 13  # the records do not end exactly at the section's end


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


cdef inline bint is_utf8(const uint8_t* buf, Py_ssize_t pos, Py_ssize_t length):
    cdef Py_ssize_t i
    for i in range(pos, pos + length):
        if buf[i] >= 0x80:  # not plain ASCII: ask Python's strict decoder
            try:
                PyUnicode_DecodeUTF8(<const char*>buf + pos, length, "strict")
            except UnicodeDecodeError:
                return False
            return True
    return True


cdef int skip_headers(
    const uint8_t* buf, Py_ssize_t* at, Py_ssize_t end, int64_t count
) except -1:
    """Step over ``count`` record headers from ``at[0]``; OK or HEADERS."""
    cdef Py_ssize_t pos = at[0]
    cdef int64_t key_length, value_length
    cdef int64_t i
    for i in range(count):
        pos = read_varint(buf, pos, end, &key_length)
        if pos < 0 or not 0 <= key_length <= end - pos:
            return HEADERS
        if not is_utf8(buf, pos, key_length):
            return HEADERS
        pos = read_varint(buf, pos + key_length, end, &value_length)
        if pos < 0 or not -1 <= value_length <= end - pos:
            return HEADERS
        if value_length > 0:
            pos += value_length
    at[0] = pos
    return OK


cdef struct Walk:
    # What `walk_section` found: where a problem is, and totals of the records.
    int64_t record
    int64_t found
    int64_t wanted
    int64_t ts_low  # smallest and largest timestamp delta
    int64_t ts_high
    int64_t value_bytes  # bytes of the non-null values


cdef int walk_section(
    const uint8_t* buf,
    Py_ssize_t pos,
    Py_ssize_t end,
    int64_t count,
    int64_t* fields,
    Py_ssize_t stride,
    bint strict,
    bint keys_required,
    Walk* w,
) except -1:
    """Walk and check the ``count`` records of ``buf[pos:end]``: OK or the
    problem, with ``w`` saying where. Unless ``fields`` is NULL, record i's
    timestamp delta, offset delta, key start and length, value start and
    length go to ``fields[k * stride + i]`` for k = 0..5."""
    cdef Py_ssize_t start = pos, record_end
    cdef int64_t n, length, value, headers
    cdef int code
    w.ts_low, w.ts_high, w.value_bytes = 0, 0, 0
    for n in range(count):
        w.record = n
        pos = read_varint(buf, pos, end, &length)
        if pos == -2:
            return LONG_VARINT
        if pos < 0:
            w.found, w.wanted = n, count
            return DECLARED
        if length < MIN_RECORD_BYTES:
            w.found, w.wanted = length, MIN_RECORD_BYTES
            return SHORT_RECORD
        if length > end - pos:
            w.found, w.wanted = pos + length - start, end - start
            return SECTION
        record_end = pos + length
        pos += 1  # the attributes byte: unused in v2
        pos = read_varint(buf, pos, record_end, &value)
        if pos < 0:
            return LONG_VARINT if pos == -2 else TIMESTAMP_OVERRUN
        if n == 0 or value < w.ts_low:
            w.ts_low = value
        if n == 0 or value > w.ts_high:
            w.ts_high = value
        if fields != NULL:
            fields[n] = value
        pos = read_varint(buf, pos, record_end, &value)
        if pos < 0:
            return LONG_VARINT if pos == -2 else OFFSET_OVERRUN
        if strict and value != n:
            w.found, w.wanted = value, n
            return OFFSET_ORDER
        if fields != NULL:
            fields[stride + n] = value
        pos = read_varint(buf, pos, record_end, &value)
        if pos == -2:
            return LONG_VARINT
        if pos < 0 or not -1 <= value <= record_end - pos:
            return KEY_LENGTH
        if keys_required and value < 0:
            return NO_KEY
        if fields != NULL:
            fields[2 * stride + n] = pos
            fields[3 * stride + n] = value
        if value > 0:
            pos += value
        pos = read_varint(buf, pos, record_end, &value)
        if pos == -2:
            return LONG_VARINT
        if pos < 0 or not -1 <= value <= record_end - pos:
            return VALUE_LENGTH
        if fields != NULL:
            fields[4 * stride + n] = pos
            fields[5 * stride + n] = value
        if value > 0:
            pos += value
            w.value_bytes += value
        pos = read_varint(buf, pos, record_end, &headers)
        if pos == -2:
            return LONG_VARINT
        if pos < 0 or not 0 <= headers <= (record_end - pos) // 2:
            return HEADER_COUNT
        if headers:
            code = skip_headers(buf, &pos, record_end, headers)
            if code != OK:
                return code
        if pos != record_end:
            return UNFILLED
    if pos != end:
        w.record, w.found, w.wanted = count, pos - start, end - start
        return SECTION
    return OK


def walk_records(
    const uint8_t[::1] data,
    const int64_t[::1] starts,
    const int64_t[::1] ends,
    const int64_t[::1] counts,
    int64_t[:, ::1] fields,
    bint strict=False,
    bint keys_required=False,
):
    """Walk the records sections ``data[starts[i]:ends[i]]`` of ``counts[i]``
    records each, filling ``fields`` (6 rows, a column per record, section by
    section): timestamp delta, offset delta, key start, key length, value
    start, value length; a null key or value has length -1.

    Every record is checked as Kafka's broker checks a producer's: lengths
    within the record, fields filling it exactly, header keys non-null UTF-8,
    and the records ending exactly at the section's end. ``strict`` also wants
    offset deltas 0, 1, ... (a producer's batch; a compacted segment has gaps)
    and ``keys_required`` a key in every record.

    Returns:
        ``(code, section, record, found, wanted)``: code OK, or the first
        problem met, in section ``section`` at its record ``record``; for
        SHORT_RECORD ``found`` is the length, for DECLARED the records found
        and ``wanted`` those declared, for SECTION ``found`` the bytes the
        records took and ``wanted`` the section's.
    """
    cdef const uint8_t* buf = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t stride = fields.shape[1], row = 0, s
    cdef int64_t* out = &fields[0, 0] if stride else NULL
    cdef Walk w
    cdef int code
    for s in range(starts.shape[0]):
        code = walk_section(
            buf, starts[s], ends[s], counts[s], out + row if out != NULL else NULL, stride,
            strict, keys_required, &w,
        )
        if code != OK:
            return code, s, w.record, w.found, w.wanted
        row += counts[s]
    return OK, 0, 0, 0, 0


# ---------------------------------------------------------------- whole batches

cdef enum:
    HEADER_SIZE = 61  # record.py's layout, big-endian
    LENGTH_AT = 8
    MAGIC_AT = 16
    CRC_AT = 17
    ATTRIBUTES_AT = 21
    LAST_DELTA_AT = 23
    BASE_TIMESTAMP_AT = 27
    MAX_TIMESTAMP_AT = 35
    COUNT_AT = 57
    CODEC_MASK = 0x07
    TRANSACTIONAL_BIT = 0x10
    CONTROL_BIT = 0x20

# check_batches' own problems, beyond `Problem`'s.
HEADER_PROBLEM = 100  # the header is refused: validate.py's header check says why
TIMESTAMP_RANGE = 101  # record timestamps outside a 64-bit integer


cdef inline uint64_t be(const uint8_t* p, int size) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(size):
        v = (v << 8) | p[i]
    return v


def check_batches(
    const uint8_t[::1] data,
    view,
    const int64_t[::1] starts,
    const int64_t[::1] sizes,
    crc32c,
    int64_t max_message_bytes,
    bint keys_required,
    int64_t[:, ::1] out,
):
    """Check the batches ``data[starts[i]:starts[i] + sizes[i]]`` a producer
    sent, as Kafka's broker does: header (length field, magic, size within
    ``max_message_bytes``, CRC-32C by ``crc32c`` over ``view``, the same bytes,
    no control or transactional bit, a known codec, at least one record, the
    last offset delta) and, for uncompressed batches, every record as
    `walk_records` with ``strict``.

    For batch i, ``out[:, i]`` gets: records count, its records' largest
    timestamp, its stream bytes (values plus one per record), 1 if it is
    compressed (its records not walked: the caller decompresses them), its
    attributes and its header's max timestamp.

    Returns:
        ``(code, batch, record, found, wanted)`` as `walk_records`, or
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
        if size < HEADER_SIZE or <int32_t>be(h + LENGTH_AT, 4) != size - 12:
            return HEADER_PROBLEM, i, 0, 0, 0
        if h[MAGIC_AT] != 2 or size > max_message_bytes:
            return HEADER_PROBLEM, i, 0, 0, 0
        attributes = <int16_t>be(h + ATTRIBUTES_AT, 2)
        count = <int32_t>be(h + COUNT_AT, 4)
        if attributes & (TRANSACTIONAL_BIT | CONTROL_BIT) or (attributes & CODEC_MASK) > 4:
            return HEADER_PROBLEM, i, 0, 0, 0
        if count < 1 or <int32_t>be(h + LAST_DELTA_AT, 4) != count - 1:
            return HEADER_PROBLEM, i, 0, 0, 0
        if crc32c(view[start + ATTRIBUTES_AT : start + size]) != be(h + CRC_AT, 4):
            return HEADER_PROBLEM, i, 0, 0, 0
        base_timestamp = <int64_t>be(h + BASE_TIMESTAMP_AT, 8)
        out[0, i] = count
        out[3, i] = attributes & CODEC_MASK != 0
        out[4, i] = attributes
        out[5, i] = <int64_t>be(h + MAX_TIMESTAMP_AT, 8)
        if out[3, i]:
            continue
        code = walk_section(
            buf, start + HEADER_SIZE, start + size, count, NULL, 0, True, keys_required, &w
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


def gather(
    const uint8_t[::1] data,
    const int64_t[::1] start,
    const int64_t[::1] length,
    int separator=-1,
    bint with_offsets=False,
):
    """The bytes ``data[start[i]:start[i] + length[i]]`` of every i, one after
    the other, each followed by ``separator`` if it is a byte value (a length
    below 0 counts as 0: a null value). With ``with_offsets``, also the Arrow
    offsets of the pieces (int32, one more than the pieces; no separators in
    between then).

    Returns:
        ``bytes``, or ``(bytes, offsets)``.
    """
    cdef Py_ssize_t n = start.shape[0], i, total = 0, at = 0, size
    cdef const uint8_t* src = &data[0] if data.shape[0] else NULL
    for i in range(n):
        if length[i] > 0:
            total += length[i]
    if separator >= 0:
        total += n
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* dst = PyBytes_AS_STRING(out)
    offsets = np.empty(n + 1 if with_offsets else 0, np.int32)
    cdef int32_t[::1] off = offsets
    if with_offsets and total > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of values for one Arrow array")
    with nogil:
        for i in range(n):
            if with_offsets:
                off[i] = <int32_t>at
            size = length[i] if length[i] > 0 else 0
            memcpy(dst + at, src + start[i], size)
            at += size
            if separator >= 0:
                dst[at] = <char>separator
                at += 1
        if with_offsets:
            off[n] = <int32_t>at
    return (out, offsets) if with_offsets else out
