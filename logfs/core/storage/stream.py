"""A partition's records as lines: sizes and positions without scanning the log.

The mount's ``stream`` file is every record's value followed by ``\\n``, from
the log start offset. Its size and the position of each record in it are kept
per segment (`SegmentStream`), as *stream bytes* (value bytes plus one
per record):

- batches appended since the segment was opened add their stream bytes as they
  are written (the encoder knows them), so a growing partition's size is a sum
  over its segments;
- the part of a segment that was already on disk when it was opened is counted
  once, on first need, by `count_loaded` — column-wise, without building
  records, and safe to run in a worker thread (it reads through its own file
  descriptor and touches no shared state).

Marks ``(offset, stream position)`` at batch boundaries, at least every
`MARK_BYTES` of stream, let a reader start anywhere after decoding at most one
mark interval. Control batches add nothing (readers skip them), nor do records of
aborted transactions; records past the last stable offset are counted once their
transactions are decided (core/log/transactions.py), so the stream holds
committed records only, in offset order.

Reading lines (`read_lines`): one read of a region of the .log file, then one
compiled pass over it (`columnar.scan_lines`: headers, CRCs, records, values
copied out with their newlines). Batches that pass cannot judge alone
(compressed, or transactional where aborted transactions are in range) and
bad ones are left to `read_region` and `batch_lines`, the column-wise path,
which says what is wrong with a bad one.

`SegmentStream` is compiled (books.pyx), beside the rest of a segment's books:
appends note their stream bytes and marks from the line path's C as much as
from `LogSegment.append`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..format import compression
from ..format.columnar import (
    decode,
    decode_region,
    region_lines,
    scan_lines,
    stream_bytes,
    value_lines,
)
from ..format.record import BatchHeader
from .books import MARK_BYTES, Counted, SegmentStream
from .logfile import read_region

__all__ = [
    "MARK_BYTES",
    "Counted",
    "SegmentStream",
    "batch_lines",
    "count_loaded",
    "read_lines",
]

REGION_BYTES = 8 << 20  # decoding this much at a time amortizes numpy's per-call costs


def batch_lines(
    region: bytes,
    positions: list[int],
    headers: list[BatchHeader],
    *,
    start: int = -1,
    count_only: bool = False,
    hides: Callable[[BatchHeader], bool] | None = None,
):
    """The stream lines (or per-batch stream byte counts) of a region's data batches,
    leaving out records below ``start`` and the batches ``hides`` (default: control
    batches)."""
    hidden = hides or (lambda h: h.is_control)
    shown = [not hidden(h) for h in headers]
    data = [(p, h) for p, h, s in zip(positions, headers, shown, strict=True) if s]
    if not data:
        return [0] * len(headers) if count_only else b""
    plain = all(h.codec == compression.NONE for _, h in data)
    if plain and not count_only:  # one compiled pass, no columns
        return region_lines(region, [p for p, _ in data], [h for _, h in data], start)
    if plain:
        cols = decode_region(region, [p for p, _ in data], [h for _, h in data], False)
    else:
        cols = decode([(h, memoryview(region)[p : p + h.size]) for p, h in data])
    if count_only:
        counts = iter(stream_bytes(cols, len(data)).tolist())
        return [next(counts) if s else 0 for s in shown]
    keep = cols.offset >= start if start > data[0][1].base_offset else None
    return value_lines(cols, keep)


def read_lines(
    fd: int,
    position: int,
    first: BatchHeader,
    end: int,
    max_bytes: int,
    start: int,
    end_offset: int,
    *,
    transactions_shown: bool,
) -> tuple[memoryview, int] | None:
    """The lines of the batches from ``position`` (a batch boundary before
    ``end``, where the batch ``first`` starts) of the .log file ``fd``, in one
    compiled pass over one read of about ``max_bytes`` (`scan_lines`): records
    below ``start`` left out, nothing from ``end_offset`` on. Returns the lines
    and the offset after the last batch read, or None when the first batch is
    one the pass leaves to `read_region` and `batch_lines` (compressed,
    transactional unless ``transactions_shown``: known from ``first``, so
    nothing is read for it; larger than the read, or bad)."""
    maybe_aborted = first.is_transactional and not first.is_control and not transactions_shown
    if first.codec != compression.NONE or maybe_aborted:
        return None
    region = os.pread(fd, min(max_bytes, end - position), position)
    lines, _, after = scan_lines(region, start, end_offset, transactions_shown=transactions_shown)
    return None if after < 0 else (lines, after)


def count_loaded(
    path: str, loaded_size: int, hides: Callable[[BatchHeader], bool] | None = None
) -> Counted:
    """Count the stream bytes of ``path``'s first ``loaded_size`` bytes (whole
    batches), with marks, leaving out the batches ``hides`` (control batches, and
    those of aborted transactions or past the last stable offset); runs in a worker
    thread."""
    fd = os.open(path, os.O_RDONLY)
    try:
        total, offsets, positions, last_mark = 0, [], [], -MARK_BYTES
        position = 0
        while position < loaded_size:
            region, starts, headers = read_region(
                fd, position, loaded_size, REGION_BYTES, path=path
            )
            sizes = batch_lines(region, starts, headers, count_only=True, hides=hides)
            for header, size in zip(headers, sizes, strict=True):
                if total - last_mark >= MARK_BYTES:
                    offsets.append(header.base_offset)
                    positions.append(total)
                    last_mark = total
                total += size
                position += header.size
        return Counted(total, offsets, positions)
    finally:
        os.close(fd)
