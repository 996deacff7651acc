"""The mount's files, one class per kind: what each shows, its attributes,
and the open file it gives (the files room's generated.py, appendfile.py).
The files that show one record, ``offset/<n>`` and ``keys/<name>``, are in
records.py.

Caching: ``offset/<n>`` files are cached for a minute (a record never
changes; a deleted topic's paths get new inodes); ``keys/<name>``,
``segments/<name>`` for a second (the mount drops a key's attributes when
the key is appended to); ``stream``, ``from/<n>``, ``state``, ``config``,
``time/<ms>`` and the append files not at all, so ``tail -f``'s
once-a-second fstat sees the stream grow. The append files, ``state`` and
``config`` are opened with direct_io: every write() reaches the daemon as-is
(one write, one append) and reads are never served stale. ``stream`` and
``from/<n>`` are read through the page cache, which the kernel keeps only while
the lines it holds are where it read them (`Stream`).
"""

from __future__ import annotations

import errno
import os
import stat
import time
import weakref

from ...core.client import names
from ...core.config import TopicConfig
from ...core.errors import CorruptRecordError, OffsetOutOfRangeError
from ...core.format import max_record_bytes
from ...core.log import FromStream, Log
from ..errnos import fail
from ..files import (
    ATTR_TIMEOUT,
    AppendFile,
    BatchFramer,
    ConfigFile,
    LengthFramer,
    LineFramer,
    OpenFile,
    SnapshotFile,
    StreamFile,
    config_text,
    state_text,
)
from .lives import TopicLife
from .view import Node, Stat, View

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


class Link(Node):
    """A symlink whose target is found again on every lookup (`found`).

    The kernel keeps a link's target with its inode once it has read it
    (FUSE_CACHE_SYMLINKS, mount/fuse/_fuseinit.c) and never asks again: a
    path whose target moved (a ``time/<ms>`` whose first record retention or
    a cleaning removed) is another inode from then on (`moved`, `resolve`).
    """

    __slots__ = ("target",)
    in_partition = True
    timeout = 1.0

    def __init__(self, path: tuple[str, ...], life: TopicLife | None, inode: int) -> None:
        super().__init__(path, life, inode)
        self.target = ""

    def found(self, view: View) -> str:
        """The target now; ENOENT if there is none."""
        raise NotImplementedError

    def refresh(self, view: View) -> None:
        self.target = self.found(view)

    def moved(self, view: View) -> bool:
        """Refreshed: whether the target is no longer the one the kernel may hold."""
        held = self.target
        self.refresh(view)
        return self.target != held

    def stat(self, view: View) -> Stat:
        return Stat(LINK, len(self.target), timeout=self.timeout)

    def readlink(self) -> str:
        return self.target


class Time(Link):
    """``<topic>/<p>/time/<ms>``: a link to the first record at or after ms."""

    __slots__ = ()
    timeout = 0

    def found(self, view: View) -> str:
        offset = view.log(self).offset_for_time(int(self.path[3]), committed=True)
        if offset is None:
            raise fail(errno.ENOENT)
        return f"../{names.OFFSET}/{offset}"


class Segment(Link):
    """``<topic>/<p>/segments/<name>``: a link to a segment's file in DATA."""

    __slots__ = ()

    def found(self, view: View) -> str:
        target = view.log(self).segment_file(self.path[3])
        if target is None:
            raise fail(errno.ENOENT)
        return target


class Stream(Node):
    """``<topic>/<p>/stream``: every record's value as a line; its size needs
    the segments loaded from disk counted first.

    Read through the kernel's page cache, so a re-read is served without the
    daemon. The kernel keeps what it read only while the lines it holds are
    still where it read them. Lines are only ever added at the end, which
    changes the size, and the kernel drops its cache when the size it is told
    changes; they move when the log start moves or a cleaning swaps segments
    in, and an open after that starts with an empty cache (`opened`). The
    mtime changes with either (`stat`): where FUSE's ``auto_inval_data`` is on
    (the mount turns it off, mount/fuse/_fuseinit.c), the kernel asks before
    every read and drops its cache when the mtime changed.
    """

    __slots__ = ("shown", "opened_at")

    def __init__(self, path: tuple[str, ...], life: TopicLife | None, inode: int) -> None:
        super().__init__(path, life, inode)
        self.shown: tuple | None = None  # (positions, size, mtime) stat last told
        self.opened_at: tuple | None = None  # the positions at the last open

    def lines(self, view: View) -> FromStream | None:
        """The lines shown (None: the partition's whole stream)."""
        return None

    async def count(self, view: View) -> None:
        await view.count_streams(view.log(self), self.lines(view))
        if view.buffered is not None:  # the kernel keeps its own size (buffered.py)
            stream = self.lines(view) or view.log(self).stream
            view.buffered.push_size(self.inode, self.path, stream.size() or 0)

    def stat(self, view: View) -> Stat:
        """The mtime is when the daemon first showed these lines at these
        positions: a kernel that cached them keeps them while it stays."""
        size = (self.lines(view) or view.log(self).stream).size() or 0
        seen = (positions(view.log(self)), size)
        if self.shown is None or self.shown[:2] != seen:
            self.shown = (*seen, time.time_ns())
        return Stat(REGULAR, size, self.shown[2], timeout=0)

    def opened(self, view: View, flags: int) -> OpenFile:
        at = positions(view.log(self))
        cached, self.opened_at = at == self.opened_at, at
        return StreamFile(
            view, self.topic, self.partition, self.lines(view), cached=cached,
            direct=self.direct(view),
        )  # fmt: skip

    def direct(self, view: View) -> bool:
        """Whether every read must reach the daemon: in the buffered mode (the
        kernel keeps the size it is told, buffered.py), and while the lines end
        in lost records, whose reader at the end is told EIO where the page
        cache would answer the end of the file."""
        if view.buffered is not None:
            return True
        try:
            (self.lines(view) or view.log(self).stream).check_end()
        except CorruptRecordError:
            return True
        return False


def positions(log: Log) -> tuple:
    """What a stream's byte positions depend on besides appends: the log (a
    re-created one starts anew), its start, its cleanings swapped in."""
    return weakref.ref(log), log.log_start_offset, log.rewrites


class From(Stream):
    """``<topic>/<p>/from/<n>``: the lines of the records from offset n on."""

    __slots__ = ("stream",)

    def __init__(self, path: tuple[str, ...], life: TopicLife | None, inode: int) -> None:
        super().__init__(path, life, inode)
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
