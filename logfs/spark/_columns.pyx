# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Spark source's record headers, column by column, in C. The core's compiled walk of the
records sections gives every other field; after each value comes the record's headers count
(`header_counts`), and the records that have headers get them as the buffers of an Arrow
``list<struct<key: string, value: binary>>`` (`header_buffers`). No Python object per record
or header: the callers build Arrow arrays from the buffers.

A record, as Kafka's DefaultRecord writes it (varints zig-zag encoded)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint | key | valueLength varint | value
    | headersCount varint | (headerKeyLength varint | headerKey | headerValueLength varint
    | headerValue) * headersCount

The byte helpers are this module's own; lengths are checked against the end of the records
sections, a header key must be UTF-8 (Arrow's string type; Kafka's client decodes it so too).
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

import numpy as np

cdef inline Py_ssize_t varint(
    const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, int64_t* out
) noexcept nogil:
    """The zig-zag varint at ``pos`` into ``out``; the position after it, or -1 when it
    runs past ``end`` or over 10 bytes."""
    cdef uint64_t z = 0
    cdef int shift = 0
    cdef uint8_t b
    while pos < end and shift <= 63:
        b = buf[pos]
        pos += 1
        z |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            out[0] = <int64_t>(z >> 1) ^ -<int64_t>(z & 1)
            return pos
        shift += 7
    return -1


cdef inline Py_ssize_t field(
    const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, int64_t* length
) noexcept nogil:
    """The bytes field at ``pos``: its length (-1: null) into ``length``, the position of
    its bytes; -1 when it overruns ``end`` or its length is below -1."""
    pos = varint(buf, pos, end, length)
    if pos < 0 or not -1 <= length[0] <= end - pos:
        return -1
    return pos


def header_counts(const uint8_t[::1] data, const int64_t[::1] at):
    """The headers count of each record, read at ``at[i]`` (just after its value).

    Returns:
        ``(counts, starts)``: int64 arrays, the count and where the first header starts;
        None when a count overruns ``data`` or is negative.
    """
    cdef const uint8_t* buf = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t end = data.shape[0], n = at.shape[0], i, pos
    counts = np.empty(n, np.int64)
    starts = np.empty(n, np.int64)
    cdef int64_t[::1] c = counts, st = starts
    cdef int64_t count
    for i in range(n):
        pos = varint(buf, at[i], end, &count)
        if pos < 0 or count < 0:
            return None
        c[i] = count
        st[i] = pos
    return counts, starts


def header_buffers(const uint8_t[::1] data, const int64_t[::1] at, const int64_t[::1] count):
    """The Arrow buffers of the headers of the records whose headers start at ``at[i]``
    (``count[i]`` of them; 0: a null list, as Kafka's source gives a record without headers).

    Returns:
        ``(list_offsets, key_offsets, key_data, value_valid, value_offsets, value_data)``
        as numpy arrays (offsets int32, validity one byte per header), or None when a
        header overruns its record or its key is null or not UTF-8.
    """
    cdef const uint8_t* buf = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t end = data.shape[0], pos, n = at.shape[0], i, h = 0
    cdef int64_t _j, klen, vlen, total = 0, kbytes = 0, vbytes = 0
    for i in range(n):  # first pass: sizes, and every header checked
        pos = at[i]
        for _j in range(count[i]):
            pos = field(buf, pos, end, &klen)
            if pos < 0 or klen < 0:
                return None
            try:
                PyUnicode_DecodeUTF8(<const char*>buf + pos, klen, "strict")
            except UnicodeDecodeError:
                return None
            kbytes += klen
            pos = field(buf, pos + klen, end, &vlen)
            if pos < 0:
                return None
            vbytes += max(vlen, 0)
            pos += max(vlen, 0)
        total += count[i]
    if kbytes > 0x7FFFFFFF or vbytes > 0x7FFFFFFF:
        return None  # past int32 Arrow offsets: the caller cuts smaller runs
    list_offsets = np.empty(n + 1, np.int32)
    key_offsets = np.empty(total + 1, np.int32)
    value_offsets = np.empty(total + 1, np.int32)
    value_valid = np.empty(total, np.uint8)
    key_data = np.empty(kbytes, np.uint8)
    value_data = np.empty(vbytes, np.uint8)
    cdef int32_t[::1] lo = list_offsets, ko = key_offsets, vo = value_offsets
    cdef uint8_t[::1] vv = value_valid, kd = key_data, vd = value_data
    cdef int64_t kpos = 0, vpos = 0, b
    lo[0] = 0
    ko[0] = 0
    vo[0] = 0
    for i in range(n):  # second pass: the copies
        pos = at[i]
        for _j in range(count[i]):
            pos = field(buf, pos, end, &klen)
            for b in range(klen):
                kd[kpos + b] = buf[pos + b]
            kpos += klen
            pos = field(buf, pos + klen, end, &vlen)
            vv[h] = vlen >= 0
            for b in range(max(vlen, 0)):
                vd[vpos + b] = buf[pos + b]
            vpos += max(vlen, 0)
            pos += max(vlen, 0)
            h += 1
            ko[h] = <int32_t>kpos
            vo[h] = <int32_t>vpos
        lo[i + 1] = <int32_t>h
    return list_offsets, key_offsets, key_data, value_valid, value_offsets, value_data
