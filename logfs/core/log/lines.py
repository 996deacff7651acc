"""A partition's records as lines (the mount's ``stream`` and ``from/<n>``,
`Log.stream`): a partition's stream is its segments' streams one after
another (`logfs.core.storage.stream`), less what lies below the log start
offset. It shows what a ``read_committed`` reader sees (isolation.py): no
record of an aborted transaction, nothing past the last stable offset.

Offsets handed out whose records were lost (a segment marked as ending past its
records, `LogSegment.mark_missing`) are never read as the stream's end: lines
at the gap fail with `CorruptRecordError`, and so does a read at the stream's
last byte when the gap is the log's end (`check_end`)."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..errors import CorruptRecordError, OffsetOutOfRangeError
from ..format.decoding import decode_records
from ..storage.logfile import read_region
from ..storage.segment import LogSegment
from ..storage.stream import REGION_BYTES, Counted, batch_lines, count_loaded, read_lines
from .isolation import Visibility


def lines_from(
    segment: LogSegment, offset: int, max_bytes: int = REGION_BYTES, view: Visibility | None = None
) -> tuple[bytes | memoryview, int]:
    """Lines of ``segment``'s records from ``offset`` on (those ``view`` shows),
    about ``max_bytes`` of log at a time; returns them and the offset after the
    last one. Uncompressed batches go through one compiled pass (`read_lines`);
    from a batch it leaves (compressed, maybe aborted, bad) the column-wise
    path reads on."""
    end_offset = segment.next_offset if view is None else min(segment.next_offset, view.end)
    if offset >= end_offset:
        return b"", max(offset, end_offset)
    found = segment.find(offset)
    if found is None:
        return b"", end_offset
    shown = view is None or view.plain or not view.committed  # no aborted transaction
    fast = read_lines(
        segment.fileno(), found.position, found.header, segment.size, max_bytes, offset,
        end_offset, transactions_shown=shown,
    )  # fmt: skip
    if fast is not None:
        return fast[0], min(fast[1], end_offset)
    region, positions, headers = read_region(
        segment.fileno(), found.position, segment.size, max_bytes, path=segment.log_path
    )
    hides = None if view is None else view.hides
    lines = batch_lines(region, positions, headers, start=offset, hides=hides)
    return lines, min(headers[-1].next_offset, end_offset)


def count_from(segment: LogSegment, start: int, view: Visibility | None = None) -> int:
    """Stream bytes of ``segment``'s records from offset ``start`` to its end (those
    ``view`` shows): the lines of the batch holding ``start``, then the others
    counted column-wise (no lines built)."""
    found = segment.find(start) if start < segment.next_offset else None
    if found is None:
        return 0
    total = len(lines_from(segment, start, found.header.size, view)[0])
    position = found.position + found.header.size
    hides = None if view is None else view.hides
    while position < segment.size:
        region, starts, headers = read_region(
            segment.fileno(), position, segment.size, REGION_BYTES, path=segment.log_path
        )
        total += sum(batch_lines(region, starts, headers, count_only=True, hides=hides))
        position += sum(h.size for h in headers)
    return total


class Partition(Protocol):
    """What a partition's stream reads of its log (`Log` is one)."""

    topic: str
    partition: int
    segments: list[LogSegment]
    log_start_offset: int

    @property
    def next_offset(self) -> int: ...

    @property
    def active_segment(self) -> LogSegment: ...

    @property
    def stream(self) -> PartitionStream: ...

    def segment_for(self, offset: int) -> LogSegment | None: ...

    @property
    def loaded_stable_offset(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def visibility(self, start: int | None, end: int | None = None) -> Visibility: ...


def _origin(log: Partition) -> int:
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


def uncounted(log: Partition) -> list[LogSegment]:
    """The segments whose loaded part is still to be counted (`count_loaded`)."""
    return [s for s in list(log.segments) if s.stream.loaded is None]


def size(log: Partition) -> int | None:
    """The size of ``log``'s stream; None while a segment is uncounted."""
    total = 0
    for segment in list(log.segments):
        part = segment.stream.size
        if part is None:
            return None
        total += part
    return total - _origin(log)


def locate(log: Partition, position: int) -> tuple[int, int]:
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


def check_end(log: Partition, start: int) -> None:
    """Raise `CorruptRecordError` if ``log``'s records after ``start`` end in a gap:
    the last segment holding any ends in offsets handed out and lost (its end
    unknown), so that a reader at the stream's last byte is not told the log ends
    there. Looks at the segments from the last back to one that holds records:
    one or two. While a transaction is open the stream ends at its first offset
    (a ``read_committed`` Fetch's end too), before what a cut took: its end for now.
    """
    if log.last_stable_offset < log.next_offset:
        return
    segments = log.segments
    i = len(segments) - 1
    while i >= 0 and not segments[i].size:
        i -= 1
    last = segments[i] if i >= 0 else None
    if last is not None and last.end_unknown and last.next_offset > start:
        raise CorruptRecordError(f"{log.topic}-{log.partition}: {last.damage}")


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

    def __init__(self, log: Partition, start: int) -> None:
        self.log = log
        self.start = start
        self.first = log.segment_for(start) if start < log.next_offset else log.active_segment
        self.head = count_from(self.first, start, log.visibility(start))
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

    def check_end(self) -> None:
        """For a reader at the last byte: `CorruptRecordError` if the records
        from ``start`` end in a gap of lost ones (`check_end`)."""
        check_end(self.log, self.start)

    def uncounted(self) -> list[Uncounted]:
        """The later segments still to be counted (those before need not be)."""
        later = set(map(id, self._later()))
        return [u for u in self.log.stream.uncounted() if id(u.segment) in later]


class Uncounted(NamedTuple):
    """A segment whose part loaded from disk has no stream count yet: the path
    and size a worker thread needs to count it (`PartitionStream.count`), what
    it hides (``view``: from the last stable offset at open, and aborted
    transactions) and the segment to give the count to
    (`PartitionStream.set_counted`). Equal for one segment (segments compare by
    identity), so it can key "being counted"."""

    segment: LogSegment
    log_path: str
    loaded_size: int
    view: Visibility | None = None


class PartitionStream:
    """A partition's records as lines (`Log.stream`): what the mount's ``stream``
    file needs, without reaching into segments."""

    def __init__(self, log: Partition) -> None:
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
        return lines_from(segment, offset, max_bytes, self.log.visibility(offset))

    def check_end(self) -> None:
        """For a reader at the last byte: `CorruptRecordError` if the log's records
        end in a gap of lost ones (`check_end`)."""
        check_end(self.log, self.log.log_start_offset)

    def uncounted(self) -> list[Uncounted]:
        """The segments whose stream bytes loaded from disk are still to be counted."""
        out = []
        for segment in uncounted(self.log):
            view = self.log.visibility(segment.base_offset, segment.next_offset)
            held = self.log.loaded_stable_offset  # later batches are noted as decided
            if held >= 0:
                view = Visibility(held, view.aborted_list)
            out.append(Uncounted(segment, segment.log_path, segment.stream.loaded_size, view))
        return out

    @staticmethod
    def count(segment: Uncounted) -> Counted:
        """Count a segment's loaded stream bytes. Touches no shared state (it
        reads the file through its own fd), so it may run in a worker thread.

        Raises:
            FileNotFoundError: the segment was deleted meanwhile.
        """
        hides = None if segment.view is None or segment.view.plain else segment.view.hides
        if segment.view is not None and segment.view.end < segment.segment.next_offset:
            hides = segment.view.hides
        return count_loaded(segment.log_path, segment.loaded_size, hides)

    def set_counted(self, segment: Uncounted, counted: Counted) -> None:
        """Record what `count` found (on the thread that owns the log)."""
        segment.segment.stream.loaded = counted
