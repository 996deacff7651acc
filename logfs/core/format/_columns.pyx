# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The byte loops of the column-wise codec (columnar.py) and of line framing:
the newlines of appended text (`line_lengths`, the mount's framing) and the
lengths of ``append.bin`` frames (`frame_lengths`), the
encoder of many plain records (`encode_plain`, the general append path's), both
in one pass over appended text (`encode_lines`, the ``append`` file's bulk
writes), and the gather of values into one buffer (`gather`: the lines of
``stream``, the data buffer of an Arrow binary column for Spark)."""

from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_FromStringAndSize,
    PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memchr, memcpy

import numpy as np

from .binary cimport HeaderLayout, header_layout, put_be, put_varint, varint_size
from .crc cimport logfs_crc32c

from ..errors import TooLargeError

from . import record

cdef HeaderLayout H = header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)
cdef int MAGIC = record.MAGIC


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


cdef inline int64_t frame_length(const uint8_t* p) noexcept nogil:
    return (<int64_t>p[0] << 24) | (<int64_t>p[1] << 16) | (<int64_t>p[2] << 8) | p[3]


def frame_lengths(const uint8_t[::1] data, int64_t max_bytes):
    """The whole ``append.bin`` frames at the start of ``data`` (a 4-byte big-endian
    length, then the value): their values' lengths (an int64 array) and the bytes
    they cover; the rest is the start of a frame.

    Raises:
        TooLargeError: a length over ``max_bytes``, as soon as its 4 bytes are there.
    """
    cdef Py_ssize_t n = data.shape[0], pos = 0, count = 0, i
    cdef int64_t length
    while n - pos >= 4:  # count first, so the array is allocated once
        length = frame_length(&data[pos])
        if length > max_bytes:
            raise TooLargeError(f"a frame of {length} bytes exceeds {max_bytes}")
        if pos + 4 + length > n:
            break
        pos += 4 + length
        count += 1
    lengths = np.empty(count, np.int64)
    cdef int64_t[::1] out = lengths
    pos = 0
    for i in range(count):
        out[i] = frame_length(&data[pos])
        pos += 4 + out[i]
    return lengths, pos


cdef inline Py_ssize_t put_plain(
    uint8_t* o,
    Py_ssize_t pos,
    int64_t body,
    int64_t delta,
    Py_ssize_t length,
    const uint8_t* head,
    Py_ssize_t skip,
    const uint8_t* rest,
) noexcept nogil:
    """One plain record at ``pos`` (``body`` bytes after its length varint: no key, no
    headers, timestamp delta 0, offset delta ``delta``), its value of ``length`` bytes
    the ``skip`` of ``head`` then the rest from ``rest``; where it ends."""
    pos = put_varint(o, pos, body)
    o[pos] = 0  # attributes
    o[pos + 1] = 0  # timestamp delta
    pos = put_varint(o, pos + 2, delta)
    o[pos] = 1  # key length -1: no key
    pos = put_varint(o, pos + 1, length)
    if skip:  # the first value's start, written before
        memcpy(o + pos, head, skip)
    memcpy(o + pos + skip, rest, length - skip)
    pos += length
    o[pos] = 0  # header count
    return pos + 1


cdef inline void close_batch(
    uint8_t* o, Py_ssize_t start, Py_ssize_t end, int64_t base_offset, int64_t count,
    int64_t timestamp, int attributes,
) noexcept:
    """The header of the batch ``o[start:end]``, its CRC last."""
    put_be(o, start + H.base_offset, base_offset, 8)
    put_be(o, start + H.batch_length, end - start - H.log_overhead, 4)
    put_be(o, start + H.partition_leader_epoch, 0xFFFFFFFF, 4)  # -1
    o[start + H.magic] = MAGIC
    put_be(o, start + H.attributes, attributes, 2)
    put_be(o, start + H.last_offset_delta, count - 1, 4)
    put_be(o, start + H.base_timestamp, timestamp, 8)
    put_be(o, start + H.max_timestamp, timestamp, 8)
    put_be(o, start + H.producer_id, 0xFFFFFFFFFFFFFFFF, 8)  # -1
    put_be(o, start + H.producer_epoch, 0xFFFF, 2)  # -1
    put_be(o, start + H.base_sequence, 0xFFFFFFFF, 4)  # -1
    put_be(o, start + H.records_count, count, 4)
    cdef uint32_t crc = logfs_crc32c(0, o + start + H.attributes, end - start - H.attributes)
    put_be(o, start + H.crc, crc, 4)


def encode_plain(
    const uint8_t[::1] packed,
    const int64_t[::1] lengths,
    int64_t base_offset,
    Py_ssize_t batch_bytes,
    int64_t timestamp,
    int attributes,
    bytes head=b"",
    Py_ssize_t gap=1,
):
    """Uncompressed batches of keyless, headerless records at one timestamp,
    byte for byte `record.encode_batch`'s: the values are ``packed``, each
    followed by ``gap`` bytes (a line's newline; the next frame's length),
    ``lengths`` long. Records fill each batch up to ``batch_bytes`` (a record
    larger than that gets a batch of its own).
    Each record is::

        length | 0 attributes | 0 timestamp delta | offset delta | -1 key length |
        value length | value | 0 header count

    ``head``, if given, is the start of the first value, written before
    ``packed`` (a line's part held from an earlier write), and counted in the
    first length: it is copied from there, so no one joins it to ``packed``.

    Returns:
        ``(data, sizes, last_offsets, stream_bytes)``: the batches one after
        the other in a bytearray, and per batch (int64 arrays) its size, last
        offset and stream bytes (values plus one per record).
    """
    cdef Py_ssize_t n = lengths.shape[0], i, j, first, pos, src = 0, total = 0, start, size
    cdef int64_t body, length, stream, delta
    cdef Py_ssize_t skip = len(head)  # of the first value: taken from head
    cdef const uint8_t* h = <const uint8_t*>PyBytes_AS_STRING(head)
    if skip and (n == 0 or lengths[0] < skip):
        raise ValueError(f"a head of {skip} bytes longer than the first value")
    # Pass 1: where batches end (greedy, exact sizes) and the buffer's size.
    cuts_array = np.empty(n, np.int64)
    cdef int64_t[::1] cuts = cuts_array
    cdef Py_ssize_t nb = 0
    size = H.size
    first = 0
    for i in range(n):
        body = 4 + varint_size(i - first) + varint_size(lengths[i]) + lengths[i]
        body += varint_size(body)
        if i > first and size + body > batch_bytes:  # close the batch before record i
            cuts[nb] = i
            nb += 1
            total += size
            first, size = i, H.size
            body = 4 + 1 + varint_size(lengths[i]) + lengths[i]  # offset delta 0
            body += varint_size(body)
        size += body
    if n:
        cuts[nb] = n
        nb += 1
        total += size
    # Not zeroed first: every byte of it is written below (each batch's whole
    # header, every record); zeroing showed in the daemon's profile as a pass of its own.
    out = PyByteArray_FromStringAndSize(NULL, total)
    cdef uint8_t* o = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef const uint8_t* p = &packed[0] if packed.shape[0] else NULL
    columns = np.empty((3, nb), np.int64)
    cdef int64_t[:, ::1] c = columns
    pos, first = 0, 0
    for j in range(nb):
        start = pos
        pos += H.size
        stream = 0
        for i in range(first, cuts[j]):
            length, delta = lengths[i], i - first
            body = 4 + varint_size(delta) + varint_size(length) + length
            pos = put_plain(o, pos, body, delta, length, h, skip, p + src)
            src += length - skip + gap
            skip = 0
            stream += length + 1
        close_batch(o, start, pos, base_offset + first, cuts[j] - first, timestamp, attributes)
        c[0, j] = pos - start
        c[1, j] = base_offset + cuts[j] - 1
        c[2, j] = stream
        first = cuts[j]
    return out, columns[0], columns[1], columns[2]


cdef struct Cut:
    # One batch of `encode_lines`: where it starts in the output, its first
    # record's index, its stream bytes.
    Py_ssize_t start
    int64_t first
    int64_t stream


def encode_lines(
    const uint8_t[::1] text,
    bytes head,
    int64_t base_offset,
    Py_ssize_t batch_bytes,
    int64_t timestamp,
    int attributes,
    Py_ssize_t limit,
):
    """`line_lengths` and `encode_plain` in one pass: every ``\\n``-terminated
    line of ``text`` (which ends with one) a record, ``head`` the first line's
    start, written before (not joined to ``text``: that would copy it). Each
    newline is found (``memchr``) and its record written into the batch being
    filled at once, the batches cut and their bytes the same as
    `encode_plain`'s; each batch's CRC is taken as it closes, while its bytes
    are still in the processor's cache.

    The output grows as it fills (a bytearray, resized): its first size covers
    lines of about 64 bytes or more, so shorter lines pay for a copy or two,
    never for counting the lines first.

    Raises:
        TooLargeError: a line longer than ``limit`` bytes (nothing is returned).

    Returns:
        ``(data, sizes, last_offsets, stream_bytes)`` as `encode_plain`.
    """
    cdef Py_ssize_t n = text.shape[0], src = 0, pos, start, stop, length, cap, need
    cdef Py_ssize_t skip = len(head), nb = 0, room = 64, j
    cdef int64_t i = 0, first = 0, body, delta, stream = 0
    cdef const uint8_t* t = &text[0] if n else NULL
    cdef const uint8_t* h = <const uint8_t*>PyBytes_AS_STRING(head)
    cdef const uint8_t* hit
    cdef int64_t[:, ::1] c
    cdef Cut* grown
    if skip and not n:
        raise ValueError("a head without a line to start")
    cdef Cut* cuts = <Cut*>PyMem_Realloc(NULL, room * sizeof(Cut))
    if cuts == NULL:
        raise MemoryError()
    cap = n + skip + (n + skip) // 8 + 4 * H.size
    out = PyByteArray_FromStringAndSize(NULL, cap)
    cdef uint8_t* o = <uint8_t*>PyByteArray_AS_STRING(out)
    try:
        pos = H.size
        cuts[0].start, cuts[0].first = 0, 0
        while src < n:
            hit = <const uint8_t*>memchr(t + src, 10, n - src)
            if hit == NULL:
                raise ValueError("text must end with a newline")
            length = hit - t - src + skip
            if length > limit:
                raise TooLargeError(f"a record of {length} bytes exceeds {limit}")
            delta = i - first
            body = 4 + varint_size(delta) + varint_size(length) + length
            if i > first and pos - cuts[nb].start + body + varint_size(body) > batch_bytes:
                close_batch(
                    o, cuts[nb].start, pos, base_offset + first, delta, timestamp, attributes
                )
                cuts[nb].stream = stream
                nb += 1
                if nb == room:
                    room *= 2
                    grown = <Cut*>PyMem_Realloc(cuts, room * sizeof(Cut))
                    if grown == NULL:
                        raise MemoryError()
                    cuts = grown
                first, delta, stream = i, 0, 0
                cuts[nb].start, cuts[nb].first = pos, i
                pos += H.size
                body = 5 + varint_size(length) + length
            need = pos + body + 5
            if need > cap:  # short lines: more overhead than the first size allowed
                cap = max(2 * cap, need)
                PyByteArray_Resize(out, cap)
                o = <uint8_t*>PyByteArray_AS_STRING(out)
            pos = put_plain(o, pos, body, delta, length, h, skip, t + src)
            src = hit - t + 1
            skip = 0
            stream += length + 1
            i += 1
        if i > first:
            close_batch(
                o, cuts[nb].start, pos, base_offset + first, i - first, timestamp, attributes
            )
            cuts[nb].stream = stream
            nb += 1
        PyByteArray_Resize(out, pos if nb else 0)  # no lines: not even a header
        columns = np.empty((3, nb), np.int64)
        c = columns
        for j in range(nb):
            start = cuts[j].start
            stop = cuts[j + 1].start if j + 1 < nb else pos
            c[0, j] = stop - start
            c[1, j] = base_offset + (cuts[j + 1].first if j + 1 < nb else i) - 1
            c[2, j] = cuts[j].stream
    finally:
        PyMem_Free(cuts)
    return out, columns[0], columns[1], columns[2]


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
