# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The one record walker: the per-record loops of decoding, compiled.

`record.py` is the readable reference for the RecordBatch v2 layout; this
module reads records in C, over many batches at once, and the tests hold it to
the reference byte for byte. One walker, `read_record`, reads a record with its
strictness as a parameter: HOP (its length and offset: stepping to an offset),
FIELDS (its key and value: the cleaner, log/_keymap.pyx, which cimports it
through walker.pxd) or FULL (every field, as Kafka's broker checks a producer's):

- `walk_records` follows the records of records sections (uncompressed), checks
  every field as Kafka's broker does, and notes where each record's key and
  value are: for decoding (columnar.py: ``stream``, ``offset/<n>``, Spark) and
  for compressed batches once decompressed (FULL); `walk_section`, its loop
  over one section, is also the record check of producers' batches (_checks.pyx);
- `find_record` finds one record of a batch by its offset (``offset/<n>``,
  `Log.read`), hopping over the others (HOP) and checking it (FULL).

A record, after the batch header (all varints zig-zag encoded)::

    length | attributes (1 byte) | timestamp delta | offset delta |
    key length | key | value length | value | header count |
    (header key length | header key | header value length | header value)*
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t

from .binary cimport read_varint

cdef enum:
    # The smallest record: attributes, timestamp delta, offset delta, key
    # length, value length and header count, one byte each.
    MIN_RECORD_BYTES = 6


cdef inline Py_ssize_t read_bytes_field(
    const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, int64_t* length
) noexcept nogil:
    """The length of the bytes field at ``pos`` (-1: null) into ``length``;
    the position of its bytes, -2 for a varint over 10 bytes, -1 when the
    length runs past ``end`` or is below -1."""
    pos = read_varint(buf, pos, end, length)
    if pos == -2:
        return -2
    if pos < 0 or not -1 <= length[0] <= end - pos:
        return -1
    return pos


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
    cdef int64_t _i
    for _i in range(count):
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


cdef int read_record(
    const uint8_t* buf,
    Py_ssize_t pos,
    Py_ssize_t end,
    int strictness,
    int64_t want_offset_delta,
    bint keys_required,
    Rec* r,
) except -1:
    """The one record walker: the record at ``pos`` of ``buf[:end]`` into
    ``r``, read and checked as far as ``strictness`` says; OK or the first
    problem. ``want_offset_delta`` (unless negative) is the offset delta it
    must have (a producer's batch: the record's index); ``keys_required``
    refuses a null key (from FIELDS on)."""
    cdef Py_ssize_t p
    r.start = pos
    p = read_varint(buf, pos, end, &r.length)
    if p == -2:
        return LONG_VARINT
    if p < 0:
        return DECLARED
    if r.length < MIN_RECORD_BYTES:
        return SHORT_RECORD
    r.end = p + r.length
    if r.length > end - p:
        return SECTION
    p = read_varint(buf, p + 1, r.end, &r.ts_delta)  # after the attributes byte, unused in v2
    if p < 0:
        return LONG_VARINT if p == -2 else TIMESTAMP_OVERRUN
    p = read_varint(buf, p, r.end, &r.offset_delta)
    if p < 0:
        return LONG_VARINT if p == -2 else OFFSET_OVERRUN
    if want_offset_delta >= 0 and r.offset_delta != want_offset_delta:
        return OFFSET_ORDER
    if strictness == HOP:
        return OK
    p = read_bytes_field(buf, p, r.end, &r.key_len)
    if p < 0:
        return LONG_VARINT if p == -2 else KEY_LENGTH
    if keys_required and r.key_len < 0:
        return NO_KEY
    r.key = p
    if r.key_len > 0:
        p += r.key_len
    p = read_bytes_field(buf, p, r.end, &r.value_len)
    if p < 0:
        return LONG_VARINT if p == -2 else VALUE_LENGTH
    r.value = p
    if strictness == FIELDS:
        return OK
    if r.value_len > 0:
        p += r.value_len
    p = read_varint(buf, p, r.end, &r.headers)
    if p == -2:
        return LONG_VARINT
    if p < 0 or not 0 <= r.headers <= (r.end - p) // 2:
        return HEADER_COUNT
    if r.headers and skip_headers(buf, &p, r.end, r.headers) != OK:
        return HEADERS
    if p != r.end:
        return UNFILLED
    return OK


cdef enum:
    # Room from a record's start for what `quick_record` reads without a bound: the
    # length, the attributes byte, the timestamp and offset deltas and the key length
    # (41 bytes at most); the value length only where 10 bytes lie before the end.
    QUICK_ROOM = 64


cdef inline bint quick_record(
    const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, int64_t want_offset_delta,
    bint keys_required, Rec* r,
) noexcept nogil:
    """`read_record` (FULL) of the usual record, at least QUICK_ROOM bytes before
    ``end``, without headers: each varint read within its longest (10 bytes, which
    lie in the buffer) and its place checked after.
    False, and ``r`` to be read again, for anything else, good or bad: `read_record`
    then reads it and words its problem."""
    cdef Py_ssize_t p = read_varint(buf, pos, pos + 10, &r.length)
    if p < 0 or r.length < MIN_RECORD_BYTES or r.length > end - p:
        return False
    r.start, r.end = pos, p + r.length
    p = read_varint(buf, p + 1, p + 11, &r.ts_delta)
    if p < 0:
        return False
    p = read_varint(buf, p, p + 10, &r.offset_delta)
    if p < 0 or p > r.end or (want_offset_delta >= 0 and r.offset_delta != want_offset_delta):
        return False
    p = read_varint(buf, p, p + 10, &r.key_len)
    if p < 0 or not -1 <= r.key_len <= r.end - p or (keys_required and r.key_len < 0):
        return False
    r.key = p
    if r.key_len > 0:
        p += r.key_len
    if p + 10 > end:
        return False
    p = read_varint(buf, p, p + 10, &r.value_len)
    if p < 0 or not -1 <= r.value_len <= r.end - p:
        return False
    r.value = p
    if r.value_len > 0:
        p += r.value_len
    r.headers = 0
    return p + 1 == r.end and buf[p] == 0


cdef int read_full(
    const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, int64_t want_offset_delta,
    bint keys_required, Rec* r,
) except -1:
    """`read_record` (FULL), the usual record read by `quick_record`."""
    if pos + QUICK_ROOM <= end and quick_record(buf, pos, end, want_offset_delta, keys_required, r):
        return OK
    return read_record(buf, pos, end, FULL, want_offset_delta, keys_required, r)


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
    bint quick=True,
) except -1:
    """Walk and check (`read_record`, FULL) the ``count`` records of
    ``buf[pos:end]``: OK or the problem, with ``w`` saying where. ``quick``:
    the usual record is read by `quick_record` (the tests turn it off to hold
    the two to each other). Unless
    ``fields`` is NULL, record i's timestamp delta, offset delta, key start
    and length, value start and length go to ``fields[k * stride + i]`` for
    k = 0..5."""
    cdef Py_ssize_t start = pos
    cdef int64_t n
    cdef int code
    cdef Rec r
    w.ts_low, w.ts_high, w.value_bytes = 0, 0, 0
    for n in range(count):
        w.record = n
        if quick:
            code = read_full(buf, pos, end, n if strict else -1, keys_required, &r)
        else:
            code = read_record(buf, pos, end, FULL, n if strict else -1, keys_required, &r)
        if code != OK:
            if code == DECLARED:
                w.found, w.wanted = n, count
            elif code == SHORT_RECORD:
                w.found, w.wanted = r.length, MIN_RECORD_BYTES
            elif code == SECTION:
                w.found, w.wanted = r.end - start, end - start
            elif code == OFFSET_ORDER:
                w.found, w.wanted = r.offset_delta, n
            return code
        if n == 0 or r.ts_delta < w.ts_low:
            w.ts_low = r.ts_delta
        if n == 0 or r.ts_delta > w.ts_high:
            w.ts_high = r.ts_delta
        if r.value_len > 0:
            w.value_bytes += r.value_len
        if fields != NULL:
            fields[n] = r.ts_delta
            fields[stride + n] = r.offset_delta
            fields[2 * stride + n] = r.key
            fields[3 * stride + n] = r.key_len
            fields[4 * stride + n] = r.value
            fields[5 * stride + n] = r.value_len
        pos = r.end
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
    bint quick=True,
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
            strict, keys_required, &w, quick,
        )
        if code != OK:
            return code, s, w.record, w.found, w.wanted
        row += counts[s]
    return OK, 0, 0, 0, 0


def find_record(const uint8_t[::1] body, int64_t count, int64_t delta):
    """The record with offset delta ``delta`` in a records section of
    ``count`` records, found by hopping over the others by their length
    prefixes (`read_record`, HOP), and its fields checked as `walk_records`
    checks them (FULL).

    Returns:
        ``(start, end, timestamp_delta, key, value, header_count)``: its
        bytes (length prefix included), its key and value (None when null);
        ``start`` -1 if no record has the offset (past it, or a gap), -2 if
        the section does not parse there (``end`` is then the position).
    """
    cdef const uint8_t* b = &body[0] if body.shape[0] else NULL
    cdef Py_ssize_t end = body.shape[0], pos = 0
    cdef int64_t _n
    cdef Rec r
    for _n in range(count):
        if read_record(b, pos, end, HOP, -1, False, &r) != OK:
            return -2, pos, 0, None, None, 0
        if r.offset_delta > delta:
            return -1, 0, 0, None, None, 0
        if r.offset_delta == delta:
            if read_record(b, pos, r.end, FULL, -1, False, &r) != OK:
                return -2, pos, 0, None, None, 0
            key = None if r.key_len < 0 else b[r.key : r.key + r.key_len]
            value = None if r.value_len < 0 else b[r.value : r.value + r.value_len]
            return pos, r.end, r.ts_delta, key, value, r.headers
        pos = r.end
    return -1, 0, 0, None, None, 0
