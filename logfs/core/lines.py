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
from typing import TYPE_CHECKING, NamedTuple

from . import compression
from .columnar import decode, decode_region, stream_bytes, value_lines
from .errors import OffsetOutOfRangeError
from .logfile import read_region
from .record import BatchHeader, decode_records

if TYPE_CHECKING:  # only for types: log.py and segment.py import this module
    from .log import Log
    from .segment import LogSegment

REGION_BYTES = 8 << 20  # decoding this much at a time amortizes numpy's per-call costs
MARK_BYTES = 64 * 1024  # stream bytes between the marks of a `SegmentStream`


class Counted(NamedTuple):
    """Stream bytes of a run of batches, and marks into it."""

    total: int
    offsets: list[int]
    positions: list[int]


class SegmentStream:
    """A segment's stream index (lines.py), in memory only: its stream bytes
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


def lines_from(
    segment: LogSegment, offset: int, max_bytes: int = REGION_BYTES
) -> tuple[bytes | memoryview, int]:
    """Lines of ``segment``'s records from ``offset`` on, about ``max_bytes`` of
    log at a time; returns them and the offset after the last one."""
    end_offset = segment.next_offset
    if offset >= end_offset:
        return b"", max(offset, end_offset)
    found = segment.find(offset)
    if found is None:
        return b"", end_offset
    region, positions, headers = read_region(
        segment.fileno(), found[0], segment.size, max_bytes, path=segment.log_path
    )
    lines = batch_lines(region, positions, headers, start=offset)
    return lines, headers[-1].next_offset


# ---------------------------------------------------------------- a partition's stream


def _origin(log: Log) -> int:
    """Stream bytes of the first segment's records below the log start offset
    (non-zero only when a checkpoint put the log start inside a segment)."""
    first = log.segments[0] if log.segments else None
    if first is None or log.log_start_offset <= first.base_offset:
        return 0
    if first.stream.origin is None or first.stream.origin[0] != log.log_start_offset:
        total = 0
        for _, header, batch in first.batches(0):
            if header.base_offset >= log.log_start_offset:
                break
            if not header.is_control:
                for record in decode_records(batch, header):
                    if record.offset < log.log_start_offset:
                        total += len(record.value or b"") + 1
        first.stream.origin = (log.log_start_offset, total)
    return first.stream.origin[1]


def uncounted(log: Log) -> list[LogSegment]:
    """The segments whose loaded part is still to be counted (`count_loaded`)."""
    return [s for s in list(log.segments) if s.stream.loaded is None]


def size(log: Log) -> int | None:
    """The size of ``log``'s stream; None while a segment is uncounted."""
    total = 0
    for segment in list(log.segments):
        part = segment.stream.size
        if part is None:
            return None
        total += part
    return total - _origin(log)


def locate(log: Log, position: int) -> tuple[int, int]:
    """A record at or before stream ``position``, at most about `MARK_BYTES`
    before it: ``(offset, its stream position)``; ``(next_offset, size)`` past
    the end. Every segment must be counted."""
    origin = _origin(log)
    target, start = position + origin, 0
    for segment in list(log.segments):
        part = segment.stream.size
        if target < start + part:
            offset, pos = segment.stream.mark_before(target - start)
            if offset < 0:
                offset = segment.base_offset
            if offset < log.log_start_offset or start + pos < origin:
                return log.log_start_offset, 0
            return offset, start + pos - origin
        start += part
    return log.next_offset, start - origin


def count_from(segment: LogSegment, start: int) -> int:
    """Stream bytes of ``segment``'s records from offset ``start`` to its end:
    the lines of the batch holding ``start``, then the others counted
    column-wise (no lines built)."""
    found = segment.find(start) if start < segment.next_offset else None
    if found is None:
        return 0
    position, header, _ = found
    total = len(lines_from(segment, start, header.size)[0])
    position += header.size
    while position < segment.size:
        region, starts, headers = read_region(
            segment.fileno(), position, segment.size, REGION_BYTES, path=segment.log_path
        )
        total += sum(batch_lines(region, starts, headers, count_only=True))
        position += sum(h.size for h in headers)
    return total


class FromStream:
    """The lines of a partition's records from offset ``start`` on (the mount's
    ``from/<n>``), with the same three questions as `PartitionStream` (size,
    locate, lines) and nothing before ``start`` counted: its size is the
    stream bytes of the records from ``start`` in the segment holding it (one
    walk from that batch to the segment's end, at creation), what was appended
    to that segment since, and the later segments' stream sizes. A reader
    positioned inside the first segment's part starts over from ``start``.

    Raises (any method): `OffsetOutOfRangeError` once retention deleted (or a
    cleaning replaced) the segment holding ``start``: open the file again.
    """

    def __init__(self, log: Log, start: int) -> None:
        self.log = log
        self.start = start
        self.first = log.segment_for(start) if start < log.next_offset else log.active_segment
        self.head = count_from(self.first, start)
        self.head_appended = self.first.stream.appended

    def _later(self) -> list[LogSegment]:
        segments = list(self.log.segments)
        if self.first not in segments:
            raise OffsetOutOfRangeError(
                f"the segment holding offset {self.start} of "
                f"{self.log.topic}-{self.log.partition} is gone; open from/{self.start} again"
            )
        return [s for s in segments if s.base_offset > self.first.base_offset]

    def _first_size(self) -> int:
        return self.head + self.first.stream.appended - self.head_appended

    def size(self) -> int | None:
        total = self._first_size()
        for segment in self._later():
            part = segment.stream.size
            if part is None:
                return None
            total += part
        return total

    def locate(self, position: int) -> tuple[int, int]:
        """``(offset, position)`` of a record at or before ``position``."""
        start = self._first_size()
        if position < start:
            return self.start, 0
        for segment in self._later():
            part = segment.stream.size
            if position < start + part:
                offset, pos = segment.stream.mark_before(position - start)
                return (segment.base_offset, start) if offset < 0 else (offset, start + pos)
            start += part
        return self.log.next_offset, start

    def lines(self, offset: int, max_bytes: int) -> tuple[bytes | memoryview, int]:
        return self.log.stream.lines(max(offset, self.start), max_bytes)

    def uncounted(self) -> list[Uncounted]:
        """The later segments still to be counted (those before need not be)."""
        later = set(map(id, self._later()))
        return [u for u in self.log.stream.uncounted() if id(u.segment) in later]


class Uncounted(NamedTuple):
    """A segment whose part loaded from disk has no stream count yet: the path
    and size a worker thread needs to count it (`PartitionStream.count`) and the
    segment to give the count to (`PartitionStream.set_counted`). Equal for one
    segment (segments compare by identity), so it can key "being counted"."""

    segment: LogSegment
    log_path: str
    loaded_size: int


class PartitionStream:
    """A partition's records as lines (`Log.stream`): what the mount's ``stream``
    file needs, without reaching into segments."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def size(self) -> int | None:
        """Bytes of the stream; None while a segment is uncounted."""
        return size(self.log)

    def locate(self, position: int) -> tuple[int, int]:
        """``(offset, stream position)`` of a record at or shortly before stream
        ``position``; every segment must be counted (see `locate`)."""
        return locate(self.log, position)

    def lines(self, offset: int, max_bytes: int) -> tuple[bytes | memoryview, int]:
        """The lines of the records from ``offset`` on, about ``max_bytes`` of
        log from the segment holding it, and the offset after the last one.

        Raises:
            OffsetOutOfRangeError: ``offset`` is below the first segment.
        """
        segment = self.log.segment_for(offset)
        if segment is None:
            raise OffsetOutOfRangeError(
                f"offset {offset} is below the first segment of "
                f"{self.log.topic}-{self.log.partition}"
            )
        return lines_from(segment, offset, max_bytes)

    def uncounted(self) -> list[Uncounted]:
        """The segments whose stream bytes loaded from disk are still to be counted."""
        return [
            Uncounted(segment, segment.log_path, segment.stream.loaded_size)
            for segment in uncounted(self.log)
        ]

    @staticmethod
    def count(segment: Uncounted) -> Counted:
        """Count a segment's loaded stream bytes. Touches no shared state (it
        reads the file through its own fd), so it may run in a worker thread.

        Raises:
            FileNotFoundError: the segment was deleted meanwhile.
        """
        return count_loaded(segment.log_path, segment.loaded_size)

    def set_counted(self, segment: Uncounted, counted: Counted) -> None:
        """Record what `count` found (on the thread that owns the log)."""
        segment.segment.stream.loaded = counted
