# cython: language_level=3, boundscheck=False, wraparound=False
"""Views of whole batches lying back to back in one buffer, made in C: the
batches a write holds, cut by their length fields (`validate.split_batches`),
and the buffers of one ``writev`` of a run of them (`BatchRun.pieces`). Each is
a loop over a few dozen headers per MiB that Python would spend a microsecond
per batch on; the views are the same slices Python makes."""

from libc.stdint cimport int32_t, int64_t, uint8_t

from .binary cimport HeaderLayout, get_be, header_layout

from . import record

cdef HeaderLayout H = header_layout(record.FIELD_OFFSETS, record.HEADER_SIZE)
cdef int MAGIC = record.MAGIC
cdef Py_ssize_t MIN_BATCH_LENGTH = H.size - H.log_overhead

# What stopped `cut_batches` before the end of its whole batches.
SHORT_LENGTH = 1  # a length field below a batch header's
TOO_LARGE = 2  # a batch over the limit
BAD_MAGIC = 3  # a magic other than 2


def cut_batches(view, int64_t max_batch_bytes):
    """The whole batches at the start of ``view`` (one-dimensional bytes), each
    a slice of it: ``(batches, used, problem)``, ``used`` the bytes they cover
    (where the batch after them starts) and ``problem`` 0, or SHORT_LENGTH,
    TOO_LARGE or BAD_MAGIC for the batch at ``used`` (its magic looked at once
    its byte is there), which is cut no further."""
    cdef const uint8_t[::1] data = view
    cdef const uint8_t *buf = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t pos = 0, end = data.shape[0], size
    cdef int64_t length
    cdef list batches = []
    while end - pos >= H.log_overhead:
        length = <int32_t>get_be(buf + pos + H.batch_length, 4)
        if length < MIN_BATCH_LENGTH:
            return batches, pos, SHORT_LENGTH
        if H.log_overhead + length > max_batch_bytes:
            return batches, pos, TOO_LARGE
        if end - pos > H.magic and buf[pos + H.magic] != MAGIC:
            return batches, pos, BAD_MAGIC
        size = H.log_overhead + length
        if end - pos < size:
            break
        batches.append(view[pos : pos + size])
        pos += size
    return batches, pos, 0


def run_pieces(
    data,
    heads,
    const int64_t[::1] stops,
    const int64_t[::1] sizes,
    Py_ssize_t first,
    Py_ssize_t head_bytes,
):
    """`BatchRun.pieces`: for each batch i (``first + i`` in the run), ending at
    ``stops[i]`` in ``data`` and ``sizes[i]`` long, its bytes; or, where
    ``heads`` (each batch's first ``head_bytes``, one after another) is not
    None, its head from there, then the rest of it from ``data``."""
    cdef Py_ssize_t i, n = stops.shape[0], at
    cdef list out = []
    if heads is None:
        for i in range(n):
            out.append(data[stops[i] - sizes[i] : stops[i]])
        return out
    for i in range(n):
        at = (first + i) * head_bytes
        out.append(heads[at : at + head_bytes])
        out.append(data[stops[i] - sizes[i] + head_bytes : stops[i]])
    return out
