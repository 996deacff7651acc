# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled scan of a .log file's batch headers (logfile.py's walker:
recovery, lookups, ``stream``, ``check``): every whole batch of a buffer at
once, CRCs checked, headers made as record.py's `BatchHeader`s."""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t

from ..format.binary cimport HeaderLayout, get_be, header_layout, whole_batch

from ..format import record

cdef HeaderLayout H = header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)
cdef int MAGIC = record.MAGIC


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
    cdef int64_t size
    headers, offsets = [], []
    while offset + H.size <= limit:
        h = b + offset
        size = whole_batch(h, H, limit - offset, MAGIC)
        if size < 0:
            break
        if verify and crc32c(view[offset + H.attributes : offset + size]) != get_be(
            h + H.crc, 4
        ):
            break
        headers.append(make_header((
            <int64_t>get_be(h + H.base_offset, 8), size - H.log_overhead,
            <int32_t>get_be(h + H.partition_leader_epoch, 4), MAGIC, get_be(h + H.crc, 4),
            <int16_t>get_be(h + H.attributes, 2), <int32_t>get_be(h + H.last_offset_delta, 4),
            <int64_t>get_be(h + H.base_timestamp, 8), <int64_t>get_be(h + H.max_timestamp, 8),
            <int64_t>get_be(h + H.producer_id, 8), <int16_t>get_be(h + H.producer_epoch, 2),
            <int32_t>get_be(h + H.base_sequence, 4), <int32_t>get_be(h + H.records_count, 4),
        )))
        offsets.append(offset)
        offset += size
    return headers, offsets, offset
