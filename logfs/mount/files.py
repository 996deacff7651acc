"""What the mount keeps per open file, and the text of the generated files.

Each ``open()`` of a mount file gets an `OpenFile` (view.py) of its kind; the
FUSE layer finds it by file handle and hands it every read, write, flush and
fsync. These hold only per-open state (snapshots, edited copies, read
cursors); the data is in the store, reached through the `View` they were
opened with. The append files are in appendfile.py.
"""

from __future__ import annotations

import json

from ..core.config import TopicConfig, read_properties, write_properties
from ..core.format import max_record_bytes
from ..core.log import FromStream, Log
from .framing import TooLargeError
from .view import OpenFile, View

# A stream is decoded this many bytes of log at a time, doubling while the
# reader reads on: numpy's per-call costs fade over big regions; a reader of
# one line (tail, head) still decodes little.
READ_AHEAD_MIN, READ_AHEAD_MAX = 1 << 20, 16 << 20


class SnapshotFile(OpenFile):
    """A file read from the bytes it had at open: ``state`` and ``config``
    (generated text) and ``offset/<n>`` (a record's value). An ``immutable``
    one may stay in the page cache across opens (a record never changes)."""

    def __init__(self, data: bytes, *, immutable: bool = False) -> None:
        self.data = data
        if immutable:
            self.direct_io = False

    async def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


class KeyFile(OpenFile):
    """An open ``<topic>/keys/<name>`` of a compacted topic.

    Reads see the value at open; writes edit a copy (empty with ``O_TRUNC``
    or for a new key), at any position as in a regular file, and closing the
    file appends the whole content as one record with the key, to the
    partition Kafka's default partitioner picks for it: ``echo v > keys/k``,
    ``cp``, and editors that save in place all work. Nothing is appended if
    nothing was written (or truncated).

    Held per open file: the copy being edited.
    """

    def __init__(
        self,
        view: View,
        key: bytes,
        path: tuple[str, ...],
        data: bytes,
        *,
        writing: bool,
        changed: bool = False,
    ) -> None:
        self.view = view
        self.key, self.path = key, path
        self.buffer = bytearray(data)
        self.changed = changed
        # Read-only opens go through the page cache, refreshed at each open so
        # that nothing is read past the end of a value that shrank.
        self.direct_io = self.keep_cache = writing

    @property
    def topic(self) -> str:
        return self.path[0]

    async def read(self, offset: int, size: int) -> bytes:
        return bytes(self.buffer[offset : offset + size])

    async def write(self, offset: int, data: bytes) -> None:
        limit = max_record_bytes(self.view.store.topic_config(self.topic)) - len(self.key)
        end = offset + len(data)
        if end > limit:
            raise TooLargeError(f"a value of {end} bytes is over max.message.bytes")
        if offset > len(self.buffer):
            self.buffer.extend(bytes(offset - len(self.buffer)))
        self.buffer[offset:end] = data
        self.changed = True

    def truncate(self, size: int) -> None:
        del self.buffer[size:]
        self.buffer.extend(bytes(size - len(self.buffer)))
        self.changed = True

    async def flush(self) -> None:
        """close(): append the content as the key's new value, once per change."""
        try:
            if self.changed:
                self.changed = False
                self.view.store.append_to_topic(self.topic, [bytes(self.buffer)], [self.key])
        finally:
            self.view.keys.pending.discard(self.path)
            self.view.refresh_keys(self.topic)


class ConfigFile(SnapshotFile):
    """An open ``<topic>/config``.

    Writes are ``key=value`` lines. Opened with ``O_APPEND`` (``>>``) they
    change only the keys written; otherwise (``>``, ``cp``, an editor saving)
    the text written becomes the topic's whole configuration and keys not
    mentioned go back to their defaults. Every write that completes a line is
    validated and applied at once, so a bad key or value fails that write()
    with EINVAL and changes nothing.

    Held per open file: the text at open and the text written.
    """

    def __init__(self, view: View, topic: str, *, merge: bool) -> None:
        super().__init__(config_text(view.store.topic_config(topic)))
        self.view = view
        self.topic = topic
        self.merge = merge
        self.written = b""

    async def write(self, offset: int, data: bytes) -> None:
        """Apply the lines written so far once ``data`` completes one or more."""
        written = self.written + bytes(data)
        complete = written[: written.rfind(b"\n") + 1]
        if complete:
            self.apply(complete)
        self.written = written

    async def flush(self) -> None:
        """close(): an unterminated last line counts as a line."""
        if self.written and not self.written.endswith(b"\n"):
            self.written += b"\n"
            self.apply(self.written)

    def apply(self, written: bytes) -> None:
        """Make the complete lines in ``written`` the topic's configuration
        (see `overrides`); the store is written only when something changed."""
        store = self.view.store
        current = store.topic_overrides(self.topic)
        overrides = self.overrides(written, current, store.defaults)
        if overrides != current:
            store.set_topic_config(self.topic, overrides)

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


class StreamFile(OpenFile):
    """An open ``stream`` or ``from/<n>`` (``source``): its lines, read ahead
    of the reader (`ReadAhead`)."""

    def __init__(
        self, view: View, topic: str, partition: int, source: FromStream | None = None
    ) -> None:
        self.view = view
        self.topic = topic
        self.partition = partition
        self.source = source  # from/<n>'s lines; None: the whole stream
        self.ahead = ReadAhead(source)

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        log = self.view.store.log(self.topic, self.partition)
        await self.view.count_streams(log, self.source)
        return self.ahead.read(log, offset, size)


class ReadAhead:
    """Decoded lines of a log's stream (or of ``source``, a ``from/<n>``) read
    ahead of a reader.

    ``buf`` holds the stream's bytes from position ``pos``, ending just before
    record ``offset``; a sequential reader is served from it and it is refilled
    ``ahead`` bytes of log at a time, column-wise (`PartitionStream.lines`). A read
    elsewhere starts over from the mark before it (`PartitionStream.locate`).
    """

    def __init__(self, source: FromStream | None = None) -> None:
        self.source = source
        self.key: tuple | None = None
        self.buf = memoryview(b"")
        self.pos = 0
        self.offset = 0
        self.ahead = READ_AHEAD_MIN

    def read(self, log: Log, position: int, size: int) -> bytes | memoryview:
        stream = self.source or log.stream
        total = stream.size()
        if total is None or position >= total or size <= 0:
            return b""
        size = min(size, total - position)
        key = (log, log.log_start_offset, log.rewrites)  # positions move on both
        if key != self.key or not self.pos <= position <= self.pos + len(self.buf):
            self.key = key
            self.offset, self.pos = stream.locate(position)
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
            log.check_readable(self.offset)
            data, after = stream.lines(self.offset, self.ahead)
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


def state_text(log: Log) -> bytes:
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
        "segments": log.segment_count,
        "active_segment_base_offset": log.active_base_offset,
        "size_bytes": log.size_bytes,
        "status": "offline" if log.failure else "online",
        "failure": log.failure,
    }
    return (json.dumps(state) + "\n").encode()
