"""What the mount keeps per open file, and the text of the generated files.

Each ``open()`` of a mount file gets an `OpenFile` (openfile.py) of its kind;
the FUSE layer finds it by file handle and hands it every read, write, flush
and fsync. These hold only per-open state (snapshots, edited copies, read
cursors); the data is in the store, reached through the mount's state they
were opened with (`Shared`: the tree's `View`). The append files are in
appendfile.py.
"""

from __future__ import annotations

import json

from ...core.config import IGNORED, TopicConfig, read_properties, write_properties
from ...core.errors import FileTooLargeError
from ...core.format import max_record_bytes
from ...core.log import FromStream, Log
from .memory import Pool
from .openfile import OpenFile, Shared

# A stream is decoded this many bytes of log at a time, doubling while the
# reader reads on. The lines of uncompressed batches are made in one compiled
# pass (`columnar.region_lines`) whose per-call cost is small, so the region
# stays about the size of a request, 2 MiB: the log read, its lines and the
# reply to the kernel then stay in the CPU's caches, and the buffers are reused
# by the allocator instead of faulted in anew (16 MiB regions cost twice the CPU
# per MB, docs/benchmarks.md). A reader of one line (tail, head) still decodes
# little. What a reader holds beyond its request comes from the mount's shared
# read-ahead (memory.py); when that is spent, a read decodes what it asked for,
# at least READ_AHEAD_REQUEST.
READ_AHEAD_MIN, READ_AHEAD_MAX = 1 << 20, 2 << 20
READ_AHEAD_REQUEST = 128 << 10


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
    or for a new key), at any position as in a regular file, up to the
    largest value a record with this key may have (`limit`; beyond it
    EFBIG, before anything is allocated). The whole content is appended as
    one record with the key, to the partition Kafka's default partitioner
    picks for it, at the close (flush) of a descriptor when something was
    written since the last append, else at the last close (release) when
    the file was only truncated: ``echo v > keys/k`` (whose shell closes a
    duplicate of the descriptor before writing), ``cp``, and editors that
    save in place all append one record. Nothing is appended if nothing was
    written (or truncated).

    Held per open file: the copy being edited, at most ``limit()`` bytes.
    """

    def __init__(
        self,
        view: Shared,
        key: bytes,
        path: tuple[str, ...],
        data: bytes,
        *,
        writing: bool,
        changed: bool = False,
        direct: bool = False,
    ) -> None:
        self.view = view
        self.key, self.path = key, path
        self.buffer = bytearray(data)
        self.changed = changed  # the content differs from the value last appended
        self.written = False  # write() since the last append
        # Read-only opens go through the page cache, refreshed at each open so
        # that nothing is read past the end of a value that shrank; ``direct``
        # ones never do (the buffered mode, where the kernel keeps sizes).
        self.keep_cache = writing
        self.direct_io = writing or direct

    @property
    def topic(self) -> str:
        return self.path[0]

    def limit(self) -> int:
        """The largest value: a record with this key within max.message.bytes."""
        return key_value_limit(self.view, self.topic, self.key)

    async def read(self, offset: int, size: int) -> bytes:
        return bytes(self.buffer[offset : offset + size])

    async def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > self.limit():
            raise FileTooLargeError(f"a value of {end} bytes is over max.message.bytes")
        if offset > len(self.buffer):
            self.buffer.extend(bytes(offset - len(self.buffer)))
        self.buffer[offset:end] = data
        self.changed = self.written = True

    def truncate(self, size: int) -> None:
        if size > self.limit():
            raise FileTooLargeError(f"a value of {size} bytes is over max.message.bytes")
        del self.buffer[size:]
        self.buffer.extend(bytes(size - len(self.buffer)))
        self.changed = True

    async def flush(self) -> None:
        """close() of a descriptor: append what was written through the file."""
        if self.written:
            self._append()

    async def release(self) -> None:
        """The last close: a truncation nobody wrote after is appended now."""
        if self.changed:
            self._append()

    def _append(self) -> None:
        try:
            self.changed = self.written = False
            self.view.store.append_to_topic(self.topic, [bytes(self.buffer)], [self.key])
        finally:
            self.view.key_appended(self.path)


def key_value_limit(view: Shared, topic: str, key: bytes | None) -> int:
    """The largest value a record with ``key`` may have in ``topic``."""
    return max(0, max_record_bytes(view.store.topic_config(topic)) - len(key or b""))


# The most text one open of ``config`` may write: every key with a long value
# fits many times over; more is EFBIG before it is held.
CONFIG_MAX_BYTES = 16 << 10


class ConfigFile(SnapshotFile):
    """An open ``<topic>/config``.

    Writes are ``key=value`` lines. Opened with ``O_APPEND`` (``>>``) they
    change only the keys written; otherwise (``>``, ``cp``, an editor saving)
    the text written becomes the topic's whole configuration and keys not
    mentioned go back to their defaults. Each line is parsed once, when a
    write() completes it, and the lines so far are validated and applied
    then, so a bad key or value fails that write() with EINVAL and changes
    nothing. More than `CONFIG_MAX_BYTES` written is EFBIG, for that write(),
    later ones and the close, and the configuration goes back to what it was
    at open: none of the text written through this open takes effect.

    Held per open file: the text at open, the lines parsed so far and the
    unterminated last line.
    """

    def __init__(self, view: Shared, topic: str, *, merge: bool) -> None:
        super().__init__(config_text(view.store.topic_config(topic)))
        self.view = view
        self.topic = topic
        self.merge = merge
        self.original = view.store.topic_overrides(topic)
        self.size = 0  # bytes written
        self.lines: dict[str, str] = {}  # the complete lines parsed so far
        self.tail = b""  # the unterminated last line
        self.too_large = False  # a write() was refused with EFBIG: nothing applies

    async def write(self, offset: int, data: bytes) -> None:
        """Parse and check the lines ``data`` completes."""
        if self.too_large or self.size + len(data) > CONFIG_MAX_BYTES:
            self.too_large = True
            self.set(self.original)  # a cut-off configuration never stays
            raise FileTooLargeError(f"more than {CONFIG_MAX_BYTES} bytes written to config")
        text = self.tail + bytes(data)
        end = text.rfind(b"\n") + 1
        if end:
            lines = {**self.lines, **parse_lines(text[:end])}
            self.set(self.overrides(lines))  # raises for a bad key or value: nothing kept
            self.lines = lines
        self.tail = text[end:]
        self.size += len(data)

    async def flush(self) -> None:
        """close(): an unterminated last line counts as a line; the lines
        written become the configuration."""
        if self.too_large:  # a cut-off configuration is never applied
            raise FileTooLargeError(f"more than {CONFIG_MAX_BYTES} bytes written to config")
        if not self.size:
            return
        if self.tail:
            self.lines = {**self.lines, **parse_lines(self.tail)}
            self.tail = b""
            self.set(self.overrides(self.lines))

    def set(self, overrides: dict[str, str]) -> None:
        """Make ``overrides`` the topic's; the store is written only when
        something changed."""
        store = self.view.store
        if overrides != store.topic_overrides(self.topic):
            store.set_topic_config(self.topic, overrides)

    def overrides(self, lines: dict[str, str]) -> dict[str, str]:
        """The topic's overrides after ``lines``.

        Raises InvalidConfigError for an unknown key or a bad value. Keys
        whose value equals the mount-wide default are dropped, so writing back
        the whole effective configuration pins nothing.
        """
        store = self.view.store
        defaults = store.defaults
        merged = {**store.topic_overrides(self.topic), **lines} if self.merge else lines
        effective = TopicConfig.from_properties(merged, defaults).to_properties()
        baseline = TopicConfig.from_properties(None, defaults).to_properties()
        return {k: effective[k] for k in merged if effective[k] != baseline[k]}


def parse_lines(text: bytes) -> dict[str, str]:
    """``key=value`` lines (InvalidConfigError if malformed)."""
    return read_properties(text.decode("utf-8", "surrogateescape"))


class StreamFile(OpenFile):
    """An open ``stream`` or ``from/<n>`` (``source``): its lines, read ahead
    of the reader (`ReadAhead`)."""

    def __init__(
        self,
        view: Shared,
        topic: str,
        partition: int,
        source: FromStream | None = None,
        *,
        cached: bool = False,
        direct: bool = False,
    ) -> None:
        # through the kernel's page cache unless ``direct``; what it holds of
        # the file from earlier opens is kept if ``cached`` (nodes.py, `Stream`)
        self.direct_io, self.keep_cache = direct, cached
        self.view = view
        self.topic = topic
        self.partition = partition
        self.source = source  # from/<n>'s lines; None: the whole stream
        self.ahead = ReadAhead(source, view.read_ahead)

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        log = self.view.store.log(self.topic, self.partition)
        await self.view.count_streams(log, self.source)
        return self.ahead.read(log, offset, size)

    async def release(self) -> None:
        self.ahead.drop()

    def unmount(self) -> None:
        self.ahead.drop()


class ReadAhead:
    """Decoded lines of a log's stream (or of ``source``, a ``from/<n>``) read
    ahead of a reader.

    ``buf`` holds the stream's bytes from position ``pos``, ending just before
    record ``offset``; a sequential reader is served from it and it is refilled
    ``ahead`` bytes of log at a time, column-wise (`PartitionStream.lines`). A read
    elsewhere starts over from the mark before it (`PartitionStream.locate`).
    What the buffer holds beyond a request is taken from ``pool`` (``held``
    bytes of log) and given back as soon as the reader has read it all, so an
    idle reader holds at most the rest of its last region.
    """

    def __init__(self, source: FromStream | None = None, pool: Pool | None = None) -> None:
        self.source = source
        self.pool = pool or Pool()
        self.held = 0
        self.key: tuple | None = None
        self.buf = memoryview(b"")
        self.pos = 0
        self.offset = 0
        self.ahead = READ_AHEAD_MIN

    def read(self, log: Log, position: int, size: int) -> bytes | memoryview:
        stream = self.source or log.stream
        total = stream.size()
        if total is None or size <= 0:
            return b""
        if position >= total:
            stream.check_end()  # lost records at the end are not the end (EIO)
            return b""
        size = min(size, total - position)
        key = (log, log.log_start_offset, log.rewrites)  # positions move on both
        if key != self.key or not self.pos <= position <= self.pos + len(self.buf):
            self.key = key
            self.offset, self.pos = stream.locate(position)
            self.drop()
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
            self.pos += len(self.buf)
            self.drop()
            self.held = self.pool.take(self.ahead)
            data, after = stream.lines(self.offset, max(self.held, size, READ_AHEAD_REQUEST))
            if after <= self.offset:
                break
            self.buf = memoryview(data)
            self.offset = after
            self.ahead = min(2 * self.ahead, READ_AHEAD_MAX)  # a sequential reader: more
        if position >= self.pos + len(self.buf):  # all read: let it go
            self.pos += len(self.buf)
            self.drop()
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def drop(self) -> None:
        """Let the buffer go and give back its share of the pool."""
        self.buf = memoryview(b"")
        self.pool.give(self.held)
        self.held = 0


def config_text(config: TopicConfig) -> bytes:
    """The effective configuration as sorted ``key=value`` lines; the keys one node
    keeps without using them come last, after a comment saying so."""
    props = config.to_properties()
    used = {k: v for k, v in props.items() if k not in IGNORED}
    kept = {k: v for k, v in props.items() if k in IGNORED}
    note = "# kept and shown, not used by logfs (one node, no tiered storage, default levels):\n"
    return (write_properties(used) + note + write_properties(kept)).encode()


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
        "last_stable_offset": log.last_stable_offset,
        "open_transactions": [
            {"producer_id": pid, "producer_epoch": epoch, "first_offset": first}
            for pid, epoch, first in log.open_transactions()
        ],
        "unflushed_messages": log.unflushed_messages,
        "last_flush_ms": log.last_flush_ms,
        "segments": log.segment_count,
        "active_segment_base_offset": log.active_base_offset,
        "size_bytes": log.size_bytes,
        "status": "offline" if log.failure else "online",
        "failure": log.failure,
        "flush_failure": log.flush_failure,
        "follower": log.following.status(),  # a copy of a cluster's partition, or null
    }
    return (json.dumps(state) + "\n").encode()
