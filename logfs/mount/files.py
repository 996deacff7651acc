"""What the mount keeps per open file, and the text of the generated files.

Each ``open()`` of a mount file gets one of these; the FUSE layer finds it by
file handle. They hold only per-open state (framing buffers, receipts, read
cursors, snapshots); the data is in the store, which their methods are handed
(`AppendFile.write` routes records to partitions, `ConfigFile.write` applies
settings, `StreamFile.read` reads a `Log`'s stream).
"""

from __future__ import annotations

import json

from ..core.config import TopicConfig, read_properties, write_properties
from ..core.format import max_record_bytes
from ..core.log import FromStream, Log, Store
from .framing import Batches, BatchFramer, Framed, LengthFramer, LineFramer, Packed, TooLargeError

# At most this many bytes of unread receipts are kept per open append file:
# a reader of receipts reads them as it goes, others never open for reading.
MAX_RECEIPT_BYTES = 1 << 20
# A stream is decoded this many bytes of log at a time, doubling while the
# reader reads on: numpy's per-call costs fade over big regions; a reader of
# one line (tail, head) still decodes little.
READ_AHEAD_MIN, READ_AHEAD_MAX = 1 << 20, 16 << 20


class AppendFile:
    """An open ``append`` / ``append.bin`` / ``append.batches``: framing state
    and receipts.

    ``framing`` is ``"lines"`` (console-producer lines), ``"frames"``
    (length-prefixed binary values) or ``"batches"`` (whole RecordBatch v2
    batches; partition files only). A receipt is one line
    ``<partition> <first offset> <last offset>\\n`` per append made through
    this open file; they are kept only when the file was opened for reading
    too (``O_RDWR``), and reading returns and consumes them.
    """

    def __init__(
        self,
        topic: str,
        partition: int | None,
        config: TopicConfig,
        *,
        framing: str,
        receipts: bool,
    ):
        self.topic = topic
        self.partition = partition  # None: the topic's append file, records spread over partitions
        self.framer: LineFramer | LengthFramer | BatchFramer
        if framing == "batches":
            self.framer = BatchFramer(max_bytes=config.max_message_bytes)
        elif framing == "frames":
            self.framer = LengthFramer(max_bytes=max_record_bytes(config))
        else:
            self.framer = LineFramer(
                max_bytes=max_record_bytes(config),
                parse_key=config.parse_key,
                separator=config.key_separator.encode(),
            )
        self.receipts = bytearray() if receipts else None

    def write(self, store: Store, data: bytes) -> None:
        """Append the records ``data`` completes. The framer's new pending tail
        is committed only once they are in the log: a rejected write() leaves
        the file as it was."""
        framed, tail = self.framer.feed(data)
        self.append(store, framed)
        self.framer.pending = tail

    def finish(self, store: Store) -> None:
        """close(): the pending partial line becomes a record. The tail is
        dropped even when that fails (the error reaches close())."""
        try:
            self.append(store, self.framer.finish())
        finally:
            self.framer.pending = b""

    def append(self, store: Store, framed: Framed | Packed | Batches) -> None:
        """Append ``framed`` to this file's partition, or spread it over the
        topic's partitions as Kafka's default partitioner does; one receipt
        per partition appended to."""
        if isinstance(framed, Packed):
            self._append_packed(store, framed)
            return
        if isinstance(framed, Batches):
            if framed.batches:  # whole batches: checked and given offsets by the log
                log = store.log(self.topic, self.partition)
                first = log.append_batches(framed.batches)
                self.add_receipt(self.partition, first, log.next_offset - first)
            return
        if not framed.values:
            return
        if self.partition is not None:
            log = store.log(self.topic, self.partition)
            keys = framed.keys if any(k is not None for k in framed.keys) else None
            first = log.append(framed.values, keys=keys)
            self.add_receipt(self.partition, first, len(framed.values))
            return
        for partition, first, count in store.append_to_topic(
            self.topic, framed.values, framed.keys
        ):
            self.add_receipt(partition, first, count)

    def _append_packed(self, store: Store, packed: Packed) -> None:
        """Unkeyed lines: one partition (the topic's append: the sticky one)."""
        count = len(packed.lengths)
        if not count:
            return
        if self.partition is None:
            receipt = store.append_packed_to_topic(self.topic, packed.data, packed.lengths)
        else:
            log = store.log(self.topic, self.partition)
            receipt = self.partition, log.append_packed(packed.data, packed.lengths), count
        self.add_receipt(*receipt)

    def logs(self, store: Store) -> list[Log]:
        """The logs this file appends to: its partition's, or all of its topic's."""
        if self.partition is not None:
            return [store.log(self.topic, self.partition)]
        return [store.log(self.topic, p) for p in range(store.topics().get(self.topic, 0))]

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
    """A file read from the bytes it had at open: ``state`` and ``config``
    (generated text) and ``offset/<n>`` (a record's value, immutable)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


class KeyFile(SnapshotFile):
    """An open ``<topic>/keys/<name>`` of a compacted topic.

    Reads see the value at open; writes edit a copy (empty with ``O_TRUNC``
    or for a new key), at any position as in a regular file, and closing the
    file appends the whole content as one record with the key, to the
    partition Kafka's default partitioner picks for it: ``echo v > keys/k``,
    ``cp``, and editors that save in place all work. Nothing is appended if
    nothing was written (or truncated).
    """

    def __init__(
        self, topic: str, key: bytes, path: tuple, data: bytes, *, changed: bool = False
    ) -> None:
        super().__init__(data)
        self.topic, self.key, self.path = topic, key, path
        self.buffer = bytearray(data)
        self.changed = changed

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.buffer[offset : offset + size])

    def write(self, offset: int, data: bytes, limit: int) -> None:
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

    def finish(self, store: Store) -> None:
        """close(): append the content as the key's new value, once per change."""
        if self.changed:
            self.changed = False
            store.append_to_topic(self.topic, [bytes(self.buffer)], [self.key])


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

    def write(self, store: Store, data: bytes) -> None:
        """Apply the lines written so far once ``data`` completes one or more."""
        written = self.written + bytes(data)
        complete = written[: written.rfind(b"\n") + 1]
        if complete:
            self.apply(store, complete)
        self.written = written

    def finish(self, store: Store) -> None:
        """close(): an unterminated last line counts as a line."""
        if self.written and not self.written.endswith(b"\n"):
            self.written += b"\n"
            self.apply(store, self.written)

    def apply(self, store: Store, written: bytes) -> None:
        """Make the complete lines in ``written`` the topic's configuration
        (see `overrides`); the store is written only when something changed."""
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


class StreamFile:
    """An open ``stream`` or ``from/<n>`` (``source``): decoded lines read ahead of the reader.

    ``buf`` holds the stream's bytes from position ``pos``, ending just before
    record ``offset``; a sequential reader is served from it and it is refilled
    ``ahead`` bytes of log at a time, column-wise (`PartitionStream.lines`). A read
    elsewhere starts over from the mark before it (`PartitionStream.locate`).
    """

    def __init__(self, topic: str, partition: int, source: FromStream | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.source = source  # from/<n>'s lines; None: the whole stream
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
