"""The files that show one record: ``<topic>/<p>/offset/<n>``, record n's
value, and ``<topic>/keys/<name>`` of a compacted topic, a key's latest
value. A node keeps only where its record is, its size and its timestamp;
the record itself is in the mount's record cache (the files room's
memory.py), read again when it was dropped from it. Their extended
attributes are the record's offset, timestamp, key and headers.
"""

from __future__ import annotations

import errno
import json
import os

from ...core.client import names
from ...core.errors import FileTooLargeError
from ...core.format import Record
from ...core.log import Log
from ..errnos import fail
from ..files import KeyFile, OpenFile, SnapshotFile, key_value_limit
from .lives import TopicLife
from .nodes import REGULAR, WRITABLE
from .view import Node, Stat, View


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

    def __init__(self, path: tuple[str, ...], life: TopicLife | None, inode: int) -> None:
        super().__init__(path, life, inode)
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
        # in the buffered mode the kernel keeps a size it once knew: read direct
        direct = view.buffered is not None
        return KeyFile(view, key, self.path, data, writing=writing, changed=truncate, direct=direct)

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
    """``<topic>/<p>/offset/<n>``: record n's value (immutable; gone below the log start).
    The node keeps the value's size and timestamp; the record is in the
    mount's record cache, read again if it was dropped from it."""

    __slots__ = ("size", "timestamp")
    in_partition = True

    def __init__(self, path: tuple[str, ...], life: TopicLife | None, inode: int) -> None:
        super().__init__(path, life, inode)
        self.size, self.timestamp = 0, None

    def record(self, view: View) -> Record:
        log, offset = view.log(self), int(self.path[3])
        if offset < log.log_start_offset:  # deleted since: retention, DeleteRecords
            raise fail(errno.ENOENT)
        return cached_record(view, log, offset)

    def refresh(self, view: View) -> None:
        if self.timestamp is None or int(self.path[3]) < view.log(self).log_start_offset:
            record = self.record(view)  # ENOENT below the log start
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
