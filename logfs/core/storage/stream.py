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
mark interval. Control batches add nothing (readers skip them).
"""

from __future__ import annotations

import bisect
import os
from typing import NamedTuple

from ..format import compression
from ..format.columnar import decode, decode_region, stream_bytes, value_lines
from ..format.record import BatchHeader
from .logfile import read_region

REGION_BYTES = 8 << 20  # decoding this much at a time amortizes numpy's per-call costs
MARK_BYTES = 64 * 1024  # stream bytes between the marks of a `SegmentStream`


class Counted(NamedTuple):
    """Stream bytes of a run of batches, and marks into it."""

    total: int
    offsets: list[int]
    positions: list[int]


class SegmentStream:
    """A segment's stream index (this module), in memory only: its stream bytes
    (the loaded part, counted lazily, then appends) and marks into them.

    Marks ``(offset, stream position)`` are taken at batch boundaries at
    least every `MARK_BYTES` of stream; its one query, `mark_before`, is
    "largest lower bound" too.
    """

    def __init__(self, loaded_size: int) -> None:
        self.loaded_size = loaded_size
        self.loaded: Counted | None = None if loaded_size else Counted(0, [], [])
        self.appended = 0
        self._offsets: list[int] = []
        self._positions: list[int] = []
        self.origin: tuple[int, int] | None = None  # (log start offset, its stream position)

    def on_append(self, next_offset: int, stream_bytes: list[int], last_offsets: list[int]):
        """Batches appended at ``next_offset``: their stream bytes and last offsets."""
        first = next_offset
        for size, last in zip(stream_bytes, last_offsets, strict=True):
            if not self._positions or self.appended - self._positions[-1] >= MARK_BYTES:
                self._offsets.append(first)
                self._positions.append(self.appended)
            self.appended += size
            first = last + 1

    @property
    def size(self) -> int | None:
        """Stream bytes of the whole segment; None until the loaded part is counted."""
        return None if self.loaded is None else self.loaded.total + self.appended

    def mark_before(self, position: int) -> tuple[int, int]:
        """The last mark at or before stream ``position`` (of this segment):
        ``(offset, position)``; needs the loaded part counted."""
        loaded = self.loaded
        if position >= loaded.total and self._positions:
            i = max(0, bisect.bisect_right(self._positions, position - loaded.total) - 1)
            return self._offsets[i], loaded.total + self._positions[i]
        i = bisect.bisect_right(loaded.positions, position) - 1
        if i < 0:
            return -1, 0  # the segment's first offset
        return loaded.offsets[i], loaded.positions[i]


def batch_lines(
    region: bytes,
    positions: list[int],
    headers: list[BatchHeader],
    *,
    start: int = -1,
    count_only: bool = False,
):
    """The stream lines (or per-batch stream byte counts) of a region's data batches,
    leaving out records below ``start``."""
    data = [(p, h) for p, h in zip(positions, headers, strict=True) if not h.is_control]
    if not data:
        return [0] * len(headers) if count_only else b""
    if all(h.codec == compression.NONE for _, h in data):
        cols = decode_region(region, [p for p, _ in data], [h for _, h in data], False)
    else:
        cols = decode([(h, memoryview(region)[p : p + h.size]) for p, h in data])
    if count_only:
        counts = iter(stream_bytes(cols, len(data)).tolist())
        return [0 if h.is_control else next(counts) for h in headers]
    keep = cols.offset >= start if start > data[0][1].base_offset else None
    return value_lines(cols, keep)


def count_loaded(path: str, loaded_size: int) -> Counted:
    """Count the stream bytes of ``path``'s first ``loaded_size`` bytes (whole
    batches), with marks; runs in a worker thread."""
    fd = os.open(path, os.O_RDONLY)
    try:
        total, offsets, positions, last_mark = 0, [], [], -MARK_BYTES
        position = 0
        while position < loaded_size:
            region, starts, headers = read_region(
                fd, position, loaded_size, REGION_BYTES, path=path
            )
            sizes = batch_lines(region, starts, headers, count_only=True)
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
