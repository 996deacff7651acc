"""What the mount keeps per open file, and the text of the generated files.

Each ``open()`` of a mount file gets one of these; the FUSE layer finds it by
file handle. They hold only per-open state (framing buffers, receipts, read
cursors, snapshots); the data is in the store.
"""

from __future__ import annotations

import json

from ..core import lines
from ..core.batching import max_record_bytes
from ..core.config import TopicConfig, read_properties, write_properties
from .framing import LengthFramer, LineFramer

# At most this many bytes of unread receipts are kept per open append file:
# a reader of receipts reads them as it goes, others never open for reading.
MAX_RECEIPT_BYTES = 1 << 20
# A stream is decoded this many bytes of log at a time, doubling while the
# reader reads on: numpy's per-call costs fade over big regions; a reader of
# one line (tail, head) still decodes little.
READ_AHEAD_MIN, READ_AHEAD_MAX = 1 << 20, 16 << 20


class AppendFile:
    """An open ``append`` / ``append.bin``: framing state and receipts.

    A receipt is one line ``<partition> <first offset> <last offset>\\n`` per
    append made through this open file; they are kept only when the file was
    opened for reading too (``O_RDWR``), and reading returns and consumes them.
    """

    def __init__(
        self,
        topic: str,
        partition: int | None,
        config: TopicConfig,
        *,
        binary: bool,
        receipts: bool,
    ):
        self.topic = topic
        self.partition = partition  # None: the topic's append file, records spread over partitions
        if binary:
            self.framer: LineFramer | LengthFramer = LengthFramer(
                max_bytes=max_record_bytes(config)
            )
        else:
            self.framer = LineFramer(
                max_bytes=max_record_bytes(config),
                parse_key=config.parse_key,
                separator=config.key_separator.encode(),
            )
        self.receipts = bytearray() if receipts else None

    def add_receipt(self, partition: int, first: int, count: int) -> None:
        if self.receipts is not None and len(self.receipts) < MAX_RECEIPT_BYTES:
            self.receipts += f"{partition} {first} {first + count - 1}\n".encode()

    def read_receipts(self, size: int) -> bytes:
        if not self.receipts:
            return b""
        out = bytes(self.receipts[:size])
        del self.receipts[:size]
        return out


class SnapshotFile:
    """A generated file (``state``, ``config``) read from the text it had at open."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


class ConfigFile(SnapshotFile):
    """An open ``<topic>/config``.

    Writes are ``key=value`` lines. Opened with ``O_APPEND`` (``>>``) they
    change only the keys written; otherwise (``>``, ``cp``, an editor saving)
    the text written becomes the topic's whole configuration and keys not
    mentioned go back to their defaults. Every write that completes a line is
    validated and applied at once, so a bad key or value fails that write()
    with EINVAL and changes nothing.
    """

    def __init__(self, topic: str, data: bytes, *, merge: bool) -> None:
        super().__init__(data)
        self.topic = topic
        self.merge = merge
        self.written = b""

    def overrides(
        self, written: bytes, current: dict[str, str], defaults: dict[str, str]
    ) -> dict[str, str]:
        """The topic's overrides after the complete lines in ``written``.

        Raises InvalidConfigError for an unknown key or a bad value. Keys
        whose value equals the mount-wide default are dropped, so writing back
        the whole effective configuration pins nothing.
        """
        lines = read_properties(written.decode("utf-8", "surrogateescape"))
        merged = {**current, **lines} if self.merge else lines
        effective = TopicConfig.from_properties(merged, defaults).to_properties()
        baseline = TopicConfig.from_properties(None, defaults).to_properties()
        return {k: effective[k] for k in merged if effective[k] != baseline[k]}


class StreamFile:
    """An open ``stream``: decoded lines read ahead of the reader.

    ``buf`` holds the stream's bytes from position ``pos``, ending just before
    record ``offset``; a sequential reader is served from it and it is refilled
    ``ahead`` bytes of log at a time, column-wise (`lines.lines_from`). A read
    elsewhere starts over from the mark before it (`lines.locate`).
    """

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.key: tuple | None = None
        self.buf = memoryview(b"")
        self.pos = 0
        self.offset = 0
        self.ahead = READ_AHEAD_MIN

    def read(self, log, position: int, size: int) -> bytes | memoryview:
        total = lines.size(log)
        if total is None or position >= total or size <= 0:
            return b""
        size = min(size, total - position)
        key = (log, log.log_start_offset)
        if key != self.key or not self.pos <= position <= self.pos + len(self.buf):
            self.key = key
            self.offset, self.pos = lines.locate(log, position)
            self.buf = memoryview(b"")
            self.ahead = READ_AHEAD_MIN
        parts = []
        while size > 0:
            start = position - self.pos
            if start < len(self.buf):
                part = self.buf[start : start + size]  # no copy: pyfuse3 takes any buffer
                parts.append(part)
                position += len(part)
                size -= len(part)
                continue
            if self.offset >= log.next_offset:
                break
            data, after = lines.lines_from(log.segment_for(self.offset), self.offset, self.ahead)
            if after <= self.offset:
                break
            self.pos += len(self.buf)
            self.buf = memoryview(data)
            self.offset = after
            self.ahead = min(2 * self.ahead, READ_AHEAD_MAX)  # a sequential reader: more
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)


def config_text(config: TopicConfig) -> bytes:
    """The effective configuration as sorted ``key=value`` lines."""
    return write_properties(config.to_properties()).encode()


def state_text(log) -> bytes:
    """The partition's state as one JSON object (a line)."""
    state = {
        "topic": log.topic,
        "partition": log.partition,
        "log_start_offset": log.log_start_offset,
        "next_offset": log.next_offset,
        "last_offset": log.next_offset - 1 if log.next_offset > log.log_start_offset else None,
        "records": log.next_offset - log.log_start_offset,
        "recovery_point": log.recovery_point,
        "unflushed_messages": log.unflushed_messages,
        "last_flush_ms": log.last_flush_ms,
        "segments": len(log.segments),
        "active_segment_base_offset": log.segments[-1].base_offset if log.segments else None,
        "size_bytes": log.size_bytes,
    }
    return (json.dumps(state) + "\n").encode()
