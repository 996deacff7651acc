# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled loops of the record codec: those that touch every record.

`record.py` is the readable reference for the RecordBatch v2 layout; this
module does the per-record work of the hot paths in C, over many batches at
once, and the tests hold it to the reference byte for byte. One walker,
`read_record`, reads a record with its strictness as a parameter: HOP (its
length and offset: stepping to an offset), FIELDS (its key and value: the
cleaner) or FULL (every field, as Kafka's broker checks a producer's):

- `walk_records` follows the records of records sections (uncompressed), checks
  every field as Kafka's broker does, and notes where each record's key and
  value are: for decoding (columnar.py: ``stream``, ``offset/<n>``, Spark) and
  for compressed batches once decompressed (FULL);
- `scan_batches` walks the batch headers of a .log file's bytes, CRCs
  checked (logfile.py: recovery, lookups, ``stream``, ``check``);
- `find_record` finds one record of a batch by its offset (``offset/<n>``,
  `Log.read`), hopping over the others (HOP) and checking it (FULL);
- `check_batches` checks whole batches a producer sent, headers, CRCs and
  records (validate.py, the ``append.batches`` path);
- `line_lengths` and `encode_plain` turn appended lines into batches (the
  ``append`` path), and `index_points` picks the batches that get index
  entries;
- `map_keys` (the live keys of ``keys/``), `OffsetMap` (the cleaner's key
  map, filled by the same loop) and `keep_records` (what a cleaning keeps)
  read records' keys and values (FIELDS);
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
from libc.stdlib cimport calloc, free
from libc.string cimport memchr, memcpy

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


cpdef enum Strictness:
    # How much of a record `read_record` reads and checks.
    HOP = 0  # its length and timestamp and offset deltas: enough to step to an offset
    FIELDS = 1  # also its key and value lengths, within the record (the cleaner)
    FULL = 2  # also its headers, and its fields filling it exactly: as Kafka's broker


cdef struct Rec:
    # One record as `read_record` found it; positions are into its buffer.
    Py_ssize_t start  # its length prefix
    Py_ssize_t end
    int64_t length
    int64_t ts_delta
    int64_t offset_delta
    Py_ssize_t key
    int64_t key_len  # -1: null
    Py_ssize_t value
    int64_t value_len  # -1: null
    int64_t headers


cdef inline int read_record(
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
    """Walk and check (`read_record`, FULL) the ``count`` records of
    ``buf[pos:end]``: OK or the problem, with ``w`` saying where. Unless
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


def scan_batches(
    const uint8_t[::1] buf,
    view,
    Py_ssize_t offset,
    Py_ssize_t limit,
    bint verify,
    crc32c,
    make_header,
):
    """The whole batches of ``buf[offset:limit]`` from ``offset`` (a batch
    boundary), in a .log file's reading: headers made by ``make_header``
    from the 13 header fields, where each starts, and where the scan stopped
    (at ``limit`` or at the first batch that does not fit before it, has a
    header that cannot be right, or, with ``verify``, fails its CRC-32C; the
    caller looks at that batch again to say which).

    Returns:
        ``(headers, offsets, stop)``.
    """
    cdef const uint8_t* b = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* h
    cdef int64_t length, last_delta, count
    headers, offsets = [], []
    while offset + HEADER_SIZE <= limit:
        h = b + offset
        length = <int32_t>be(h + LENGTH_AT, 4)
        last_delta = <int32_t>be(h + LAST_DELTA_AT, 4)
        count = <int32_t>be(h + COUNT_AT, 4)
        if h[MAGIC_AT] != 2 or length < HEADER_SIZE - 12 or last_delta < 0 or count < 0:
            break
        if offset + length + 12 > limit:
            break
        if verify and crc32c(view[offset + ATTRIBUTES_AT : offset + length + 12]) != be(
            h + CRC_AT, 4
        ):
            break
        headers.append(make_header((
            <int64_t>be(h, 8), length, <int32_t>be(h + 12, 4), 2, be(h + CRC_AT, 4),
            <int16_t>be(h + ATTRIBUTES_AT, 2), last_delta,
            <int64_t>be(h + BASE_TIMESTAMP_AT, 8), <int64_t>be(h + MAX_TIMESTAMP_AT, 8),
            <int64_t>be(h + 43, 8), <int16_t>be(h + 51, 2), <int32_t>be(h + 53, 4), count,
        )))
        offsets.append(offset)
        offset += length + 12
    return headers, offsets, offset


def index_points(const int64_t[::1] sizes, int64_t since, int64_t interval):
    """Which of consecutive batches of ``sizes`` bytes get an index entry, by
    Kafka's rule (more than ``interval`` bytes since the last entry when the
    batch is appended), given ``since`` bytes before the first: a bool array,
    and the bytes since the last entry after them."""
    cdef Py_ssize_t i, n = sizes.shape[0]
    points = np.zeros(n, np.bool_)
    cdef uint8_t[::1] out = points.view(np.uint8)
    for i in range(n):
        if since > interval:
            out[i] = 1
            since = 0
        since += sizes[i]
    return points, since


# ---------------------------------------------------------------- encoding

cdef inline int varint_size(uint64_t z) noexcept nogil:
    cdef int size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


cdef inline Py_ssize_t put_varint(uint8_t* out, Py_ssize_t pos, uint64_t z) noexcept nogil:
    """Write ``z`` (already zig-zagged) as a varint at ``pos``; the position after it."""
    while z >= 0x80:
        out[pos] = (z & 0x7F) | 0x80
        z >>= 7
        pos += 1
    out[pos] = <uint8_t>z
    return pos + 1


cdef inline void put_be(uint8_t* out, Py_ssize_t pos, uint64_t value, int size) noexcept nogil:
    cdef int i
    for i in range(size - 1, -1, -1):
        out[pos + i] = value & 0xFF
        value >>= 8


def line_lengths(const uint8_t[::1] text, Py_ssize_t end):
    """The length of every ``\\n``-terminated line in ``text[:end]`` (which ends
    with a newline), without its newline: an int64 array."""
    cdef Py_ssize_t count = 0, pos = 0, i = 0
    cdef const uint8_t* t = &text[0] if end else NULL
    cdef const uint8_t* hit
    while pos < end:  # count first, so the array is allocated once
        hit = <const uint8_t*>memchr(t + pos, 10, end - pos)
        if hit == NULL:
            break
        count += 1
        pos = hit - t + 1
    lengths = np.empty(count, np.int64)
    cdef int64_t[::1] out = lengths
    pos = 0
    for i in range(count):
        hit = <const uint8_t*>memchr(t + pos, 10, end - pos)
        out[i] = hit - t - pos
        pos = hit - t + 1
    return lengths


def encode_plain(
    const uint8_t[::1] packed,
    const int64_t[::1] lengths,
    int64_t base_offset,
    Py_ssize_t batch_bytes,
    int64_t timestamp,
    int attributes,
    crc32c,
):
    """Uncompressed batches of keyless, headerless records at one timestamp,
    byte for byte `record.encode_batch`'s: the values are ``packed``, each
    followed by one separator byte, ``lengths`` long. Records fill each batch
    up to ``batch_bytes`` (a record larger than that gets a batch of its own).
    Each record is::

        length | 0 attributes | 0 timestamp delta | offset delta | -1 key length |
        value length | value | 0 header count

    Returns:
        ``(data, sizes, last_offsets, stream_bytes)``: the batches one after
        the other in a bytearray, and per batch its size, last offset and
        stream bytes (values plus one per record).
    """
    cdef Py_ssize_t n = lengths.shape[0], i, j, first, pos, src = 0, total = 0, start, size
    cdef int64_t body, length, stream, delta
    # Pass 1: where batches end (greedy, exact sizes) and the buffer's size.
    cuts_array = np.empty(n, np.int64)
    cdef int64_t[::1] cuts = cuts_array
    cdef Py_ssize_t nb = 0
    size = HEADER_SIZE
    first = 0
    for i in range(n):
        body = 4 + varint_size(2 * (i - first)) + varint_size(2 * lengths[i]) + lengths[i]
        body += varint_size(2 * body)
        if i > first and size + body > batch_bytes:  # close the batch before record i
            cuts[nb] = i
            nb += 1
            total += size
            first, size = i, HEADER_SIZE
            body = 4 + 1 + varint_size(2 * lengths[i]) + lengths[i]  # offset delta 0
            body += varint_size(2 * body)
        size += body
    if n:
        cuts[nb] = n
        nb += 1
        total += size
    out = bytearray(total)
    view = memoryview(out)
    cdef uint8_t* o = out
    cdef const uint8_t* p = &packed[0] if packed.shape[0] else NULL
    sizes, last_offsets, streams = [], [], []
    pos, first = 0, 0
    for j in range(nb):
        start = pos
        pos += HEADER_SIZE
        stream = 0
        for i in range(first, cuts[j]):
            length, delta = lengths[i], i - first
            body = 4 + varint_size(2 * delta) + varint_size(2 * length) + length
            pos = put_varint(o, pos, 2 * body)
            o[pos] = 0  # attributes
            o[pos + 1] = 0  # timestamp delta
            pos = put_varint(o, pos + 2, 2 * delta)
            o[pos] = 1  # key length -1: no key
            pos = put_varint(o, pos + 1, 2 * length)
            memcpy(o + pos, p + src, length)
            pos += length
            o[pos] = 0  # header count
            pos += 1
            src += length + 1
            stream += length + 1
        put_be(o, start, base_offset + first, 8)
        put_be(o, start + LENGTH_AT, pos - start - 12, 4)
        put_be(o, start + 12, 0xFFFFFFFF, 4)  # partition leader epoch -1
        o[start + MAGIC_AT] = 2
        put_be(o, start + ATTRIBUTES_AT, attributes, 2)
        put_be(o, start + LAST_DELTA_AT, cuts[j] - first - 1, 4)
        put_be(o, start + BASE_TIMESTAMP_AT, timestamp, 8)
        put_be(o, start + MAX_TIMESTAMP_AT, timestamp, 8)
        put_be(o, start + 43, 0xFFFFFFFFFFFFFFFF, 8)  # producer id -1
        put_be(o, start + 51, 0xFFFF, 2)  # producer epoch -1
        put_be(o, start + 53, 0xFFFFFFFF, 4)  # base sequence -1
        put_be(o, start + COUNT_AT, cuts[j] - first, 4)
        put_be(o, start + CRC_AT, crc32c(view[start + ATTRIBUTES_AT : pos]), 4)
        sizes.append(pos - start)
        last_offsets.append(base_offset + cuts[j] - 1)
        streams.append(stream)
        first = cuts[j]
    return out, sizes, last_offsets, streams


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


# ---------------------------------------------------------------- the log cleaner

def map_keys(
    const uint8_t[::1] body, int64_t count, int64_t base_offset, int64_t first_dirty,
    dict latest, bint live=False, set changed=None,
):
    """Set ``latest[key]`` to the offset of each keyed record at or after
    ``first_dirty`` of a records section (uncompressed), in order. With
    ``live``, a tombstone (null value) removes its key instead: the live keys
    of the ``keys/`` view; ``changed`` (if given) collects every key seen.
    Returns -1, or the index of a malformed record."""
    return note_keys(body, count, base_offset, first_dirty, None, latest, live, changed)


cdef inline uint64_t rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t fmix(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xff51afd7ed558ccdULL
    k ^= k >> 33
    k *= 0xc4ceb9fe1a85ec53ULL
    k ^= k >> 33
    return k


cdef void hash128(const uint8_t* p, Py_ssize_t n, uint64_t* a, uint64_t* b) noexcept nogil:
    """A 128-bit hash of ``p[:n]`` in the way of MurmurHash3's x64 variant:
    two lanes mixing 8 bytes at a time, the tail and the length, then
    finalized."""
    cdef uint64_t h1 = 0x9368e53c2f6af274ULL, h2 = 0x586dcd208f7cd3fdULL, k1, k2
    cdef Py_ssize_t i = 0, j
    while i + 16 <= n:
        memcpy(&k1, p + i, 8)
        memcpy(&k2, p + i + 8, 8)
        h1 ^= rotl(k1 * 0x87c37b91114253d5ULL, 31) * 0x4cf5ad432745937fULL
        h1 = (rotl(h1, 27) + h2) * 5 + 0x52dce729
        h2 ^= rotl(k2 * 0x4cf5ad432745937fULL, 33) * 0x87c37b91114253d5ULL
        h2 = (rotl(h2, 31) + h1) * 5 + 0x38495ab5
        i += 16
    k1 = k2 = 0
    for j in range(n - i):
        if j < 8:
            k1 |= <uint64_t>p[i + j] << (8 * j)
        else:
            k2 |= <uint64_t>p[i + j] << (8 * (j - 8))
    h1 ^= rotl(k1 * 0x87c37b91114253d5ULL, 31) * 0x4cf5ad432745937fULL
    h2 ^= rotl(k2 * 0x4cf5ad432745937fULL, 33) * 0x87c37b91114253d5ULL
    h1 ^= <uint64_t>n
    h2 ^= <uint64_t>n
    h1 += h2
    h2 += h1
    h1 = fmix(h1)
    h2 = fmix(h2)
    h1 += h2
    h2 += h1
    a[0] = h1
    b[0] = h2 | 1  # never (0, 0): that marks an empty slot


cdef class OffsetMap:
    """The cleaner's key map: each key's latest offset, the key kept as a
    128-bit hash (Kafka's SkimpyOffsetMap keeps an MD5), in an open-addressing
    table that doubles at half full. Two keys that shared a hash would count
    as one; with n keys the chance is about n^2 / 2^129 (10^-24 for 10^7)."""

    cdef uint64_t* table  # slots of (hash a, hash b, offset)
    cdef Py_ssize_t capacity, size

    def __cinit__(self, Py_ssize_t capacity=1 << 12):
        self.capacity = capacity
        self.size = 0
        self.table = <uint64_t*>calloc(3 * capacity, sizeof(uint64_t))
        if self.table == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.table)

    def __len__(self):
        return self.size

    cdef Py_ssize_t slot(self, uint64_t a, uint64_t b) noexcept nogil:
        cdef Py_ssize_t i = <Py_ssize_t>(a & <uint64_t>(self.capacity - 1))
        while self.table[3 * i + 1] != 0:
            if self.table[3 * i] == a and self.table[3 * i + 1] == b:
                return i
            i = (i + 1) & (self.capacity - 1)
        return i

    cdef int grow(self) except -1:
        cdef uint64_t* old = self.table
        cdef Py_ssize_t n = self.capacity, i, j
        self.capacity = 2 * n
        self.table = <uint64_t*>calloc(3 * self.capacity, sizeof(uint64_t))
        if self.table == NULL:
            self.table, self.capacity = old, n
            raise MemoryError()
        for i in range(n):
            if old[3 * i + 1] != 0:
                j = self.slot(old[3 * i], old[3 * i + 1])
                memcpy(self.table + 3 * j, old + 3 * i, 3 * sizeof(uint64_t))
        free(old)
        return 0

    cdef int put(self, const uint8_t* key, Py_ssize_t n, int64_t offset) except -1:
        cdef uint64_t a, b
        hash128(key, n, &a, &b)
        cdef Py_ssize_t i = self.slot(a, b)
        if self.table[3 * i + 1] == 0:
            if 2 * (self.size + 1) > self.capacity:
                self.grow()
                i = self.slot(a, b)
            self.table[3 * i] = a
            self.table[3 * i + 1] = b
            self.size += 1
        self.table[3 * i + 2] = <uint64_t>offset
        return 0

    cdef int64_t get(self, const uint8_t* key, Py_ssize_t n) noexcept nogil:
        """The key's offset, -1 if it is not in the map."""
        cdef uint64_t a, b
        hash128(key, n, &a, &b)
        cdef Py_ssize_t i = self.slot(a, b)
        return <int64_t>self.table[3 * i + 2] if self.table[3 * i + 1] != 0 else -1

    def map(self, const uint8_t[::1] body, int64_t count, int64_t base_offset, int64_t first_dirty):
        """Note the offset of each keyed record at or after ``first_dirty`` of
        a records section (uncompressed), in order. Returns -1, or the index
        of a malformed record."""
        return note_keys(body, count, base_offset, first_dirty, self, None, False, None)

    def contains(self, bytes key):
        return self.get(<const uint8_t*>PyBytes_AS_STRING(key), len(key)) >= 0


cdef int64_t note_keys(
    const uint8_t[::1] body, int64_t count, int64_t base_offset, int64_t first_dirty,
    OffsetMap table, dict latest, bint live, set changed,
) except -2:
    """The loop of `map_keys` and `OffsetMap.map`: each keyed record at or
    after ``first_dirty``, in order, into ``table`` if given, else into
    ``latest`` as `map_keys` says. -1, or the index of a malformed record."""
    cdef const uint8_t* buf = &body[0] if body.shape[0] else NULL
    cdef Py_ssize_t pos = 0, end = body.shape[0]
    cdef int64_t i, offset
    cdef Rec r
    for i in range(count):
        if read_record(buf, pos, end, FIELDS, -1, False, &r) != OK:
            return i
        pos = r.end
        offset = base_offset + r.offset_delta
        if r.key_len < 0 or offset < first_dirty:
            continue
        if table is not None:
            table.put(buf + r.key, r.key_len, offset)
            continue
        key = PyBytes_FromStringAndSize(<const char*>buf + r.key, r.key_len)
        if live and r.value_len < 0:
            latest.pop(key, None)
        else:
            latest[key] = offset
        if changed is not None:
            changed.add(key)
    return -1


def keep_records(
    const uint8_t[::1] body, int64_t count, int64_t base_offset, int64_t base_timestamp,
    int64_t append_time, OffsetMap latest, int64_t horizon,
):
    """Which records of a records section (uncompressed) a cleaning keeps: a
    keyed record whose key has no later offset in ``latest``, unless it is a
    tombstone (null value) older than ``horizon``. ``append_time`` is the
    batch's max timestamp for LogAppendTime batches (every record's), else
    INT64_MIN.

    Returns:
        ``(kept, section, max_ts_delta)``: how many records stay; the new
        records section (the kept records' bytes, unchanged, in order), or
        None when all stay; the largest timestamp delta among those kept.
        ``kept`` is -1 - i for a malformed record i.
    """
    cdef const uint8_t* buf = &body[0] if body.shape[0] else NULL
    cdef Py_ssize_t pos = 0, end = body.shape[0], size = 0, at = 0
    cdef int64_t i, offset, timestamp, kept = 0, max_delta = INT64_MIN
    cdef Rec r
    spans = np.empty((max(count, 1), 2), np.int64)
    cdef int64_t[:, ::1] span = spans
    for i in range(count):
        if read_record(buf, pos, end, FIELDS, -1, False, &r) != OK:
            return -1 - i, None, 0
        pos = r.end
        if r.key_len < 0:
            continue
        offset = base_offset + r.offset_delta
        if latest.get(buf + r.key, r.key_len) > offset:
            continue
        timestamp = append_time if append_time != INT64_MIN else base_timestamp + r.ts_delta
        if r.value_len < 0 and timestamp < horizon:
            continue
        span[kept, 0] = r.start
        span[kept, 1] = r.end
        size += r.end - r.start
        max_delta = max(max_delta, r.ts_delta)
        kept += 1
    if kept == count:
        return kept, None, max_delta
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* dst = PyBytes_AS_STRING(out)
    for i in range(kept):
        memcpy(dst + at, buf + span[i, 0], span[i, 1] - span[i, 0])
        at += span[i, 1] - span[i, 0]
    return kept, out, max_delta
