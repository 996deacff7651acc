"""How bytes written to the mount's append files become records.

Three framings, all held per open file so that concurrent writers never
interleave inside a record:

``append`` — kafka-console-producer's: every ``\\n``-terminated line is one
record whose value is the line without the ``\\n``. With ``parse.key=true``
the line is split at the first ``key.separator``: key before, value after (a
line without the separator is an error, as in the console producer). Text
after the last newline is held until the file is closed (`finish`).

``append.bin`` — for binary values, newlines included. The written bytes are a
sequence of frames::

    length   4 bytes, unsigned big-endian: the value's length in bytes
    value    `length` bytes

A frame may be split over any number of write() calls; a file closed in the
middle of a frame is an error and the incomplete frame is dropped.

``append.batches`` — whole Kafka RecordBatch v2 batches, as a producer
builds them, cut by their length fields (`BatchFramer`, with
`split_batches` of core/format/validate.py); the log checks each and assigns
its offsets. A batch may be split over write() calls; a file closed inside one is an
error and the incomplete batch is dropped.

All three framers are transactional per write: `feed` returns the complete
records and the new ``pending`` tail without changing ``pending``; the caller
(`AppendFile.write`) commits the tail only after the records were appended,
so a write() that is rejected (by the framer or by the log) appends nothing and
leaves ``pending`` as it was. The one exception is `LineFramer`'s discarding of
a line too long to ever be a record: `feed` itself records that (see
``discarding``), so the rest of that line is dropped too.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core.errors import FramingError, TooLargeError
from ...core.format import frame_lengths, split_batches, unpacked

PACKED_BYTES = 4096  # writes of at least this much are cut into lines by the compiled codec


class Framed(NamedTuple):
    """Records cut out of a write: parallel keys (None when unkeyed) and values."""

    keys: list[bytes | None]
    values: list[bytes]


class Lines(NamedTuple):
    """Unkeyed lines of a write, handed on whole: ``data`` is the complete
    lines, each with its ``\\n``; ``head`` the start of the first line, written
    before ``data`` (the pending tail). The log finds the lines in the same
    compiled pass that encodes them (`Log.append_lines`), and refuses one longer
    than ``max_bytes``, its framer's limit, with nothing appended."""

    data: memoryview
    head: bytes
    max_bytes: int


class LineFramer:
    """Console-producer framing: one record per line.

    ``pending`` is the written text after the last newline, held for the next
    write; `feed` reads it and the caller replaces it (`AppendFile.write` after
    a successful append, `AppendFile.finish` with ``b""`` at close).
    ``discarding`` is set by `feed` when an unterminated line grows past
    ``max_bytes`` in a write that holds no newline (that write fails and the
    line's bytes so far are dropped); while it is set, `feed` drops everything
    up to and including the next newline (a write with none fails too), then
    clears it and frames what follows.
    """

    def __init__(
        self, *, max_bytes: int, parse_key: bool = False, separator: bytes = b"\t"
    ) -> None:
        self.max_bytes = max_bytes
        self.parse_key = parse_key
        self.separator = separator
        self.pending = b""
        # A line grew past max_bytes over several writes: its pieces are
        # dropped and so is the rest of it, up to its newline.
        self.discarding = False

    def feed(
        self, data: bytes | memoryview, end: int | None = None
    ) -> tuple[Framed | Lines, bytes]:
        """Cut complete lines from ``pending + data``.

        Returns the records (`Framed`, or `Lines` for many unkeyed lines) and
        the new pending tail; does not change ``pending`` (the caller commits
        the tail after a successful append). Changes ``discarding`` as
        described in the class docstring. ``end``: where the text after the last
        newline of ``data`` starts, when the caller found it; a read-only
        memoryview's lines are then handed on where they lie, not copied.

        Raises:
            TooLargeError: a line (or the unterminated tail) exceeds
                ``max_bytes`` (for `Lines`, a whole line is refused by the log).
            FramingError: with parse.key, a line without the key separator.
        """
        if self.discarding:
            newline = bytes(data).find(b"\n")
            if newline < 0:
                raise TooLargeError(f"a line longer than {self.max_bytes} bytes is dropped")
            self.discarding = False
            data, end = bytes(data)[newline + 1 :], None
        text, head = data, self.pending
        if end is None:
            text = bytes(text)
            end = text.rfind(b"\n") + 1
        if not (end >= PACKED_BYTES and not self.parse_key):  # few lines, or keyed
            text, end, head = head + text, (end + len(head) if end else 0), b""
        # else the pending tail starts the first line: handed on beside the write
        # (`Lines.head`) instead of joined to it, which would copy the write.
        tail = bytes(text[end:])
        if len(tail) > self.max_bytes:
            if end == 0:  # no complete line in this write: drop the whole long line
                self.pending, self.discarding = b"", True
            raise TooLargeError(
                f"an unterminated line of {len(tail)} bytes exceeds {self.max_bytes}"
            )
        if self.parse_key or end < PACKED_BYTES:  # few lines: numpy costs more than it saves
            return self._records(text[:end].split(b"\n")[:-1]), tail
        return Lines(memoryview(text)[:end], head, self.max_bytes), tail

    def restart(self) -> None:
        """Frame what follows anew: the pending tail and a line being discarded dropped."""
        self.pending, self.discarding = b"", False

    def single_line(self, data: bytes) -> bytes | None:
        """The value when ``data`` is exactly one whole unkeyed line, short
        enough, with nothing pending: what loggers write per write(); None
        for anything else (`feed` decides)."""
        if (
            self.pending
            or self.discarding
            or self.parse_key
            or len(data) > self.max_bytes
            or data[-1:] != b"\n"
            or data.count(b"\n") != 1
        ):
            return None
        return bytes(data[:-1])

    def finish(self) -> Framed:
        """The pending partial line as a record (on close); empty when none."""
        if not self.pending or self.discarding:
            return Framed([], [])
        return self._records([self.pending])

    def _records(self, lines: list[bytes]) -> Framed:
        keys: list[bytes | None] = []
        values: list[bytes] = []
        for line in lines:
            key = None
            if self.parse_key:
                key, sep, line = line.partition(self.separator)
                if not sep:
                    raise FramingError(f"no key separator {self.separator!r} in line {key[:40]!r}")
            if len(line) + len(key or b"") > self.max_bytes:
                raise TooLargeError(f"a record of {len(line)} bytes exceeds {self.max_bytes}")
            keys.append(key)
            values.append(line)
        return Framed(keys, values)


LENGTH_BYTES = 4


class _WholeUnits:
    """Framing of whole units (frames, batches) by a length field: ``pending``
    is an incomplete unit carried to the next write; as for `LineFramer`,
    `feed` never changes it and the caller commits the tail."""

    unit = "frame"

    def __init__(self, *, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.pending = b""

    def _buffer(self, data: bytes | memoryview) -> memoryview:
        """``pending + data``: a read-only memoryview of ``data`` as it lies when
        nothing is pending (the daemon's request), else a joined copy."""
        if self.pending:
            return memoryview(self.pending + data)
        return memoryview(data if isinstance(data, memoryview) else bytes(data))

    def _check_finished(self) -> None:
        """Nothing may be pending at close: an incomplete unit is an error."""
        if self.pending:
            raise FramingError(
                f"file closed inside a {self.unit} ({len(self.pending)} bytes pending)"
            )


class Frames(NamedTuple):
    """Whole ``append.bin`` frames cut out of a write, for `Log.append_packed`:
    ``packed`` is their bytes from the first value on (each value followed by the
    next frame's length), ``lengths`` the values' (int64)."""

    packed: memoryview
    lengths: np.ndarray

    @property
    def values(self) -> list[bytes]:
        """The values as bytes (the topic's ``append.bin``, spread over partitions)."""
        return unpacked(self.packed, self.lengths, LENGTH_BYTES)


class LengthFramer(_WholeUnits):
    """Binary framing: 4-byte big-endian length, then the value."""

    def feed(self, data: bytes | memoryview) -> tuple[Frames, bytes]:
        """Cut complete frames from ``pending + data``, in one compiled pass over
        their length fields (`frame_lengths`): the frames and the new pending tail;
        ``pending`` is left to the caller (see `LineFramer.feed`). A memoryview's
        frames are handed on where they lie (read-only: the daemon's request).

        Raises:
            TooLargeError: a frame's length exceeds ``max_bytes``.
        """
        buf = self._buffer(data)
        lengths, used = frame_lengths(buf, self.max_bytes)
        return Frames(buf[LENGTH_BYTES:used], lengths), bytes(buf[used:])

    def finish(self) -> Frames:
        self._check_finished()
        return Frames(memoryview(b""), np.empty(0, np.int64))


def frame(value: bytes) -> bytes:
    """One ``append.bin`` frame (for writers and tests)."""
    return len(value).to_bytes(LENGTH_BYTES, "big") + value


class Batches(NamedTuple):
    """Whole RecordBatch v2 batches cut out of a write, for `Log.append_batches`;
    ``data``, the bytes they cover (read-only: written from there as they are)."""

    batches: list[memoryview]
    data: memoryview | None = None


class BatchFramer(_WholeUnits):
    """``append.batches`` framing: whole batches by their length fields."""

    unit = "batch"

    def feed(self, data: bytes | memoryview) -> tuple[Batches, bytes]:
        """Cut whole batches from ``pending + data``: the batches and the new
        pending tail (see `LineFramer.feed` for who commits it). A memoryview's
        batches are handed on where they lie (read-only: the daemon's request).

        Raises:
            InvalidBatchError: a length field below a batch header's size, a
                magic other than 2 or a batch over ``max_bytes``
                (max.message.bytes), seen as soon as its first bytes arrive.
        """
        buf = self._buffer(data)
        batches, used = split_batches(buf, self.max_bytes)
        return Batches(batches, buf[:used]), bytes(buf[used:])

    def finish(self) -> Batches:
        self._check_finished()
        return Batches([])
