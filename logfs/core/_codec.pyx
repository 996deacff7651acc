# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled loops of the record codec: those that touch every record.

`record.py` is the readable reference for the RecordBatch v2 layout; this
module does the per-record work of the hot paths in C, over many batches at
once, and the tests hold it to the reference byte for byte:

- `walk_records` follows the records of records sections (uncompressed), checks
  every field as Kafka's broker does, and notes where each record's key and
  value are: for checking producers' batches (validate.py) and for decoding
  (columnar.py: ``stream``, ``offset/<n>``, Spark).
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
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
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


def walk_records(
    const uint8_t[::1] data,
    const int64_t[::1] starts,
    const int64_t[::1] ends,
    const int64_t[::1] counts,
    int64_t[::1] timestamp_delta,
    int64_t[::1] offset_delta,
    int64_t[::1] key_start,
    int64_t[::1] key_length,
    int64_t[::1] value_start,
    int64_t[::1] value_length,
    bint strict=False,
    bint keys_required=False,
):
    """Walk the records sections ``data[starts[i]:ends[i]]`` of ``counts[i]``
    records each, filling one element per record (section by section) of the
    six arrays; a null key or value has length -1 (its start is where it
    would be).

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
    cdef Py_ssize_t n_sections = starts.shape[0]
    cdef Py_ssize_t row = 0, s, pos, end, record_end, start
    cdef int64_t n, count, length, value, headers
    cdef int code
    for s in range(n_sections):
        pos, end, count = starts[s], ends[s], counts[s]
        start = pos
        for n in range(count):
            pos = read_varint(buf, pos, end, &length)
            if pos == -2:
                return LONG_VARINT, s, n, 0, 0
            if pos < 0:
                return DECLARED, s, n, n, count
            if length < MIN_RECORD_BYTES:
                return SHORT_RECORD, s, n, length, MIN_RECORD_BYTES
            if length > end - pos:
                return SECTION, s, n, pos + length - start, end - start
            record_end = pos + length
            pos += 1  # the attributes byte: unused in v2
            pos = read_varint(buf, pos, record_end, &value)
            if pos < 0:
                return (LONG_VARINT if pos == -2 else TIMESTAMP_OVERRUN), s, n, 0, 0
            timestamp_delta[row] = value
            pos = read_varint(buf, pos, record_end, &value)
            if pos < 0:
                return (LONG_VARINT if pos == -2 else OFFSET_OVERRUN), s, n, 0, 0
            if strict and value != n:
                return OFFSET_ORDER, s, n, value, n
            offset_delta[row] = value
            pos = read_varint(buf, pos, record_end, &value)
            if pos == -2:
                return LONG_VARINT, s, n, 0, 0
            if pos < 0 or not -1 <= value <= record_end - pos:
                return KEY_LENGTH, s, n, 0, 0
            if keys_required and value < 0:
                return NO_KEY, s, n, 0, 0
            key_start[row], key_length[row] = pos, value
            if value > 0:
                pos += value
            pos = read_varint(buf, pos, record_end, &value)
            if pos == -2:
                return LONG_VARINT, s, n, 0, 0
            if pos < 0 or not -1 <= value <= record_end - pos:
                return VALUE_LENGTH, s, n, 0, 0
            value_start[row], value_length[row] = pos, value
            if value > 0:
                pos += value
            pos = read_varint(buf, pos, record_end, &headers)
            if pos == -2:
                return LONG_VARINT, s, n, 0, 0
            if pos < 0 or not 0 <= headers <= (record_end - pos) // 2:
                return HEADER_COUNT, s, n, 0, 0
            if headers:
                code = skip_headers(buf, &pos, record_end, headers)
                if code != OK:
                    return code, s, n, 0, 0
            if pos != record_end:
                return UNFILLED, s, n, 0, 0
            row += 1
        if pos != end:
            return SECTION, s, count, pos - start, end - start
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
