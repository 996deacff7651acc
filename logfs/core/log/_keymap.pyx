# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Records' keys, compiled: the log cleaner's key map (`OffsetMap`, cleaner.py
and compaction.py), what a cleaning keeps (`keep_records`) and the live keys of
``keys/`` (`map_keys`, keys.py). `map_keys` and `OffsetMap.map` share one loop;
every record is read by format's one record walker (FIELDS), cimported through
walker.pxd."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport INT64_MIN, int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

from ..format.walker cimport FIELDS, OK, Rec, read_record

import numpy as np


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
