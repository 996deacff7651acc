"""The mount's files, one class per kind: what each shows, its attributes,
and the open file it gives (files.py, appendfile.py).

Caching: ``offset/<n>`` files are cached for a minute (a record never
changes; a deleted topic's paths get new inodes); ``keys/<name>``,
``segments/<name>`` for a second (the mount drops a key's attributes when
the key is appended to); ``stream``, ``from/<n>``, ``state``, ``config``,
``time/<ms>`` and the append files not at all, so ``tail -f``'s
once-a-second fstat sees the stream grow. The append files, ``stream``,
``state`` and ``config`` are opened with direct_io: every write() reaches the
daemon as-is (one write, one append) and reads are never served stale.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time

from ..core.client import names
from ..core.config import TopicConfig
from ..core.errors import FileTooLargeError, OffsetOutOfRangeError
from ..core.format import Record, max_record_bytes
from ..core.log import FromStream, Log
from .appendfile import AppendFile
from .buffered import ATTR_TIMEOUT
from .errnos import fail
from .files import (
    ConfigFile,
    KeyFile,
    SnapshotFile,
    StreamFile,
    config_text,
    key_value_limit,
    state_text,
)
from .framing import BatchFramer, LengthFramer, LineFramer
from .view import Node, OpenFile, Stat, View

REGULAR = stat.S_IFREG | 0o444
WRITABLE = stat.S_IFREG | 0o644
LINK = stat.S_IFLNK | 0o777


def lines(config: TopicConfig) -> LineFramer:
    """kafka-console-producer's lines, keyed with ``parse.key``."""
    return LineFramer(
        max_bytes=max_record_bytes(config),
        parse_key=config.parse_key,
        separator=config.key_separator.encode(),
    )


def frames(config: TopicConfig) -> LengthFramer:
    """Length-prefixed binary values."""
    return LengthFramer(max_bytes=max_record_bytes(config))


def batches(config: TopicConfig) -> BatchFramer:
    """Whole RecordBatch v2 batches, each up to max.message.bytes."""
    return BatchFramer(max_bytes=config.max_message_bytes)


class TopicAppend(Node):
    """``<topic>/append``: lines, spread over the topic's partitions."""

    __slots__ = ()
    writable = True
    framing = staticmethod(lines)  # how written bytes become records (framing.py)

    def stat(self, view: View) -> Stat:
        if view.buffered is not None:  # the kernel owns the size (buffered.py)
            return Stat(WRITABLE, view.buffered.size(self.path), timeout=ATTR_TIMEOUT)
        return Stat(WRITABLE, timeout=0)

    def target(self) -> int | None:
        """The partition appended to; None: the topic's partitioner picks."""
        return None

    def opened(self, view: View, flags: int) -> OpenFile:
        framer = self.framing(view.store.topic_config(self.topic))
        if view.buffered is not None and flags & os.O_ACCMODE == os.O_WRONLY:
            # the buffered mode: through the page cache (buffered.py)
            return view.buffered.open(view, self.path, self.topic, self.target(), framer, flags)
        return AppendFile(view, self.topic, self.target(), framer, flags)

    def truncate(self, view: View, size: int, file: OpenFile | None) -> None:
        # `> file` and `truncate -s 0` on an append-only file: nothing to cut.
        if size != 0:
            raise fail(errno.EINVAL)
        if view.buffered is not None:
            view.buffered.truncate(self.path)


class TopicAppendBin(TopicAppend):
    """``<topic>/append.bin``: length-prefixed values, spread over the partitions."""

    __slots__ = ()
    framing = staticmethod(frames)


class Append(TopicAppend):
    """``<topic>/<p>/append``: lines appended to partition p."""

    __slots__ = ()
    in_partition = True

    def target(self) -> int | None:
        return self.partition


class AppendBin(Append):
    """``<topic>/<p>/append.bin``: length-prefixed values."""

    __slots__ = ()
    framing = staticmethod(frames)


class AppendBatches(Append):
    """``<topic>/<p>/append.batches``: whole RecordBatch v2 batches."""

    __slots__ = ()
    framing = staticmethod(batches)


class Config(Node):
    """``<topic>/config``: the effective configuration, edited by writing it."""

    __slots__ = ()
    writable = True

    def stat(self, view: View) -> Stat:
        return Stat(WRITABLE, len(config_text(view.store.topic_config(self.topic))), timeout=0)

    def opened(self, view: View, flags: int) -> OpenFile:
        return ConfigFile(view, self.topic, merge=bool(flags & os.O_APPEND))

    def truncate(self, view: View, size: int, file: OpenFile | None) -> None:
        # `> config`: the text written next replaces the configuration, so
        # truncating to nothing has nothing to do
        if size != 0:
            raise fail(errno.EINVAL)


def record_xattrs(record: Record) -> dict[str, bytes]:
    """A record's offset and timestamp."""
    return {
        names.OFFSET_XATTR: str(record.offset).encode(),
        names.TIMESTAMP_XATTR: str(record.timestamp).encode(),
    }


def record_stat(mode: int, size: int, timestamp: int | None, timeout: float) -> Stat:
    """A file whose content is a record's value of ``size`` bytes, stamped
    with its ``timestamp`` (None: no record)."""
    if timestamp is None:
        return Stat(mode, timeout=timeout)
    return Stat(mode, size, max(timestamp, 0) * 1_000_000, timeout)


def cached_record(view: View, log: Log, offset: int) -> Record:
    """Record ``offset`` of ``log``, from the mount's record cache (memory.py)
    or read and put there."""
    record = view.records.get((log, offset))
    if record is None:
        record = log.read(offset, committed=True)  # what a read_committed consumer sees
        view.records.put((log, offset), record)
    return record


class Key(Node):
    """``<topic>/keys/<name>`` of a compacted topic: the key's latest value,
    looked up on every lookup (values change); a key created but not yet
    written (`Keys.pending`) has none. The node keeps where the value is and
    its size and timestamp; the record itself is in the mount's record cache."""

    __slots__ = ("found", "size", "timestamp")
    compacted_only = True
    writable = True

    def __init__(self, path: tuple[str, ...]) -> None:
        super().__init__(path)
        self.found: tuple[Log, int] | None = None  # the latest record's log and offset
        self.size, self.timestamp = 0, None

    def refresh(self, view: View) -> None:
        key = view.keys.key_of(self.topic, self.path[2])
        found = None if key is None else view.keys.latest(self.topic, key)
        if found is None:
            if self.path not in view.keys.pending:
                raise fail(errno.ENOENT)
            self.found, self.size, self.timestamp = None, 0, None
        elif self.found is None or self.found[0] is not found[0] or self.found[1] != found[1]:
            record = cached_record(view, *found)  # read again only when it changed
            self.found = found
            self.size, self.timestamp = len(record.value or b""), record.timestamp

    def record(self, view: View) -> Record | None:
        return None if self.found is None else cached_record(view, *self.found)

    def value(self, view: View) -> bytes:
        record = self.record(view)
        return b"" if record is None else record.value or b""

    def stat(self, view: View) -> Stat:
        # the mount drops the cached attributes when the key is appended to
        return record_stat(WRITABLE, self.size, self.timestamp, 1.0)

    def opened(self, view: View, flags: int) -> OpenFile:
        self.placed(view, self.path)
        self.refresh(view)  # its value now (attributes are cached)
        writing = flags & os.O_ACCMODE != os.O_RDONLY
        truncate = writing and bool(flags & os.O_TRUNC)
        key = view.keys.key_of(self.topic, self.path[2])
        data = b"" if truncate else self.value(view)
        file = KeyFile(view, key, self.path, data, writing=writing, changed=truncate)
        if view.buffered is not None:  # the kernel keeps a size it once knew: read direct
            file.direct_io = True
        return file

    def truncate(self, view: View, size: int, file: OpenFile | None) -> None:
        """An open file's copy, else a new value now."""
        if view.store.read_only:
            raise fail(errno.EROFS)
        if file is not None:
            file.truncate(size)
            return
        key = view.keys.key_of(self.topic, self.path[2])
        if size > key_value_limit(view, self.topic, key):
            raise FileTooLargeError(f"a value of {size} bytes is over max.message.bytes")
        value = self.value(view)
        value = value[:size] + bytes(max(0, size - len(value)))
        view.store.append_to_topic(self.topic, [value], [key])
        view.refresh_keys(self.topic)
        self.refresh(view)

    def xattrs(self, view: View) -> dict[str, bytes]:
        record = self.record(view)
        if record is None:
            return {}
        found = view.keys.latest(self.topic, record.key)
        return {
            **record_xattrs(record),
            names.PARTITION_XATTR: str(found[0].partition if found else "").encode(),
            names.KEY_XATTR: record.key,
        }


class Offset(Node):
    """``<topic>/<p>/offset/<n>``: record n's value (records are immutable).
    The node keeps the value's size and timestamp; the record is in the
    mount's record cache, read again if it was dropped from it."""

    __slots__ = ("size", "timestamp")
    in_partition = True

    def __init__(self, path: tuple[str, ...]) -> None:
        super().__init__(path)
        self.size, self.timestamp = 0, None

    def record(self, view: View) -> Record:
        return cached_record(view, view.log(self), int(self.path[3]))

    def refresh(self, view: View) -> None:
        if self.timestamp is None:
            record = self.record(view)
            self.size, self.timestamp = len(record.value or b""), record.timestamp

    def stat(self, view: View) -> Stat:
        return record_stat(REGULAR, self.size, self.timestamp, 60.0)

    def opened(self, view: View, flags: int) -> OpenFile:
        return SnapshotFile(self.record(view).value or b"", immutable=True)

    def xattrs(self, view: View) -> dict[str, bytes]:
        record = self.record(view)
        out = record_xattrs(record)
        headers = [
            [k, None if v is None else v.decode("utf-8", "backslashreplace")]
            for k, v in record.headers
        ]
        out[names.HEADERS_XATTR] = json.dumps(headers).encode()
        if record.key is not None:
            out[names.KEY_XATTR] = record.key
        for name, value in record.headers:
            out.setdefault(names.HEADER_XATTR_PREFIX + name, value or b"")
        return out


class Link(Node):
    """A symlink whose target is found again on every lookup."""

    __slots__ = ("target",)
    in_partition = True
    timeout = 1.0

    def __init__(self, path: tuple[str, ...]) -> None:
        super().__init__(path)
        self.target = ""

    def stat(self, view: View) -> Stat:
        return Stat(LINK, len(self.target), timeout=self.timeout)

    def readlink(self) -> str:
        return self.target


class Time(Link):
    """``<topic>/<p>/time/<ms>``: a link to the first record at or after ms."""

    __slots__ = ()
    timeout = 0

    def refresh(self, view: View) -> None:
        offset = view.log(self).offset_for_time(int(self.path[3]), committed=True)
        if offset is None:
            raise fail(errno.ENOENT)
        self.target = f"../{names.OFFSET}/{offset}"


class Segment(Link):
    """``<topic>/<p>/segments/<name>``: a link to a segment's file in DATA."""

    __slots__ = ()

    def refresh(self, view: View) -> None:
        target = view.log(self).segment_files().get(self.path[3])
        if target is None:
            raise fail(errno.ENOENT)
        self.target = target


class Stream(Node):
    """``<topic>/<p>/stream``: every record's value as a line; its size needs
    the segments loaded from disk counted first."""

    __slots__ = ()
    in_partition = True

    def lines(self, view: View) -> FromStream | None:
        """The lines shown (None: the partition's whole stream)."""
        return None

    async def count(self, view: View) -> None:
        await view.count_streams(view.log(self), self.lines(view))
        if view.buffered is not None:  # the kernel keeps its own size (buffered.py)
            stream = self.lines(view) or view.log(self).stream
            view.buffered.push_size(self.inode, self.path, stream.size() or 0)

    def stat(self, view: View) -> Stat:
        stream = self.lines(view) or view.log(self).stream
        return Stat(REGULAR, stream.size() or 0, time.time_ns(), timeout=0)

    def opened(self, view: View, flags: int) -> OpenFile:
        return StreamFile(view, self.topic, self.partition, self.lines(view))


class From(Stream):
    """``<topic>/<p>/from/<n>``: the lines of the records from offset n on."""

    __slots__ = ("stream",)

    def __init__(self, path: tuple[str, ...]) -> None:
        super().__init__(path)
        self.stream: FromStream | None = None

    def lines(self, view: View) -> FromStream | None:
        return self.stream

    def refresh(self, view: View) -> None:
        """Made again when retention or a cleaning replaced the segment it
        started in; ENOENT below the log start and past the log end (the log
        end itself is an empty file)."""
        log = view.log(self)
        start = int(self.path[3])
        if not log.log_start_offset <= start <= log.next_offset:
            raise fail(errno.ENOENT)
        if self.stream is not None and self.stream.log is log:
            try:
                self.stream.size()
                return
            except OffsetOutOfRangeError:
                pass
        self.stream = FromStream(log, start)


class State(Node):
    """``<topic>/<p>/state``: the partition's state as a JSON line."""

    __slots__ = ()
    in_partition = True

    def stat(self, view: View) -> Stat:
        return Stat(REGULAR, len(state_text(view.log(self))), time.time_ns(), timeout=0)

    def opened(self, view: View, flags: int) -> OpenFile:
        return SnapshotFile(state_text(view.log(self)))
