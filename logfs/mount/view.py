"""The mount's nodes as the store sees them: existence, listings, attributes.

`View` answers the questions every handler asks first — does this path exist
now, what is in this directory, what are this node's attributes and extended
attributes — from the store's current state, without opening anything. The
handlers in operations.py add the per-open-file behaviour.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Callable
from typing import NamedTuple

import pyfuse3
import trio

from ..core.errors import OffsetOutOfRangeError
from ..core.log import FromStream, Log, PartitionStream, Store, Uncounted, key_name, name_key
from .files import config_text, state_text
from .tree import (
    APPENDS,
    DIRECTORIES,
    PARTITION_CHILDREN,
    TOPIC_CHILDREN,
    InodeTable,
    Kind,
    Node,
    kind_of,
    number,
)

BLOCK_SIZE = 1 << 20  # tools size their writes by st_blksize: 1 MiB is max_write
OFFSET_LISTING = 100  # `ls offset/` shows the newest this many offsets
XATTR = "user.logfs."


class Ownership(NamedTuple):
    """The ``uid=``, ``gid=`` and ``umask=`` mount options (None: DATA's)."""

    uid: int | None = None
    gid: int | None = None
    umask: int | None = None


DATA_OWNER = Ownership()  # no options: DATA's owner, group and modes


def fail(code: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(code)


class View:
    """Nodes over ``store``: the inode table, stream indexes and attributes."""

    def __init__(self, store: Store, owner: Ownership = DATA_OWNER) -> None:
        self.store = store
        self.inodes = InodeTable()
        self._counting: dict[Uncounted, trio.Event] = {}
        # The mount shows DATA's owner, group and permission bits, so that with
        # -o allow_other,default_permissions the kernel lets other users do through
        # the mount what DATA lets them do, and no more (docs/operations.md);
        # uid=, gid= and umask= replace them, as for sshfs and ntfs-3g.
        data = os.stat(store.path)
        self._uid = data.st_uid if owner.uid is None else owner.uid
        self._gid = data.st_gid if owner.gid is None else owner.gid
        self._perm = stat.S_IMODE(data.st_mode) if owner.umask is None else 0o777 & ~owner.umask
        # chown and chmod of a path, remembered for the mount's life: (uid, gid, mode bits)
        self.changed_owner: dict[tuple[str, ...], tuple[int, int, int]] = {}
        self._started_ns = time.time_ns()
        self.pending: set[tuple[str, ...]] = set()  # keys/<name> created, not yet written
        self.keys_in_use: set[str] = set()  # topics whose keys/ the kernel may cache
        self.is_ready: Callable[[], bool] = lambda: True  # the store recovered (operations.py)

    def node(self, inode: int) -> Node:
        node = self.inodes.get(inode)
        if node is None:
            raise fail(errno.ENOENT)
        return node

    def log(self, node: Node) -> Log:
        return self.store.log(node.topic, node.partition)

    def resolve(self, path: tuple[str, ...]) -> Node:
        """The node at ``path`` if it exists in the store now; ENOENT if not."""
        kind = kind_of(path)
        if kind is None:
            raise fail(errno.ENOENT)
        if kind is not Kind.ROOT:
            topics = self.store.topics()
            if path[0] not in topics:
                raise fail(errno.ENOENT)
            in_partition = len(path) > 1 and kind not in (*TOPIC_CHILDREN.values(), Kind.KEY)
            if in_partition and number(path[1]) >= topics[path[0]]:
                raise fail(errno.ENOENT)
            if kind in (Kind.KEYS_DIR, Kind.KEY) and not self.store.topic_config(path[0]).compact:
                raise fail(errno.ENOENT)
        if kind is Kind.KEY:
            return self._resolve_key(path)
        node = self.inodes.node(path, kind)
        if kind is Kind.OFFSET and node.content is None:
            node.content = self.log(node).read(int(path[3]))
        elif kind is Kind.FROM:
            node.content = self._from_stream(node, int(path[3]))
        elif kind is Kind.TIME:
            offset = self.log(node).offset_for_time(int(path[3]))
            if offset is None:
                raise fail(errno.ENOENT)
            node.content = f"../offset/{offset}"
        elif kind is Kind.SEGMENT:
            target = self.log(node).segment_files().get(path[3])
            if target is None:
                raise fail(errno.ENOENT)
            node.content = target
        return node

    def _from_stream(self, node: Node, start: int) -> FromStream:
        """``from/<n>``'s lines (lines.py), made again when retention or a
        cleaning replaced the segment it started in; ENOENT below the log
        start and past the log end (the log end itself is an empty file)."""
        log = self.log(node)
        if not log.log_start_offset <= start <= log.next_offset:
            raise fail(errno.ENOENT)
        stream = node.content
        if stream is not None and stream.log is log:
            try:
                stream.size()
                return stream
            except OffsetOutOfRangeError:
                pass
        return FromStream(log, start)

    def _resolve_key(self, path: tuple[str, ...]) -> Node:
        """``keys/<name>``: the key's latest record, read now (values change);
        a key created but not yet written (`pending`) has none."""
        key = self.key_of(path[0], path[2])
        found = None if key is None else self.latest(path[0], key)
        if found is None and path not in self.pending:
            raise fail(errno.ENOENT)
        node = self.inodes.node(path, Kind.KEY)
        if found is None:
            node.content = None
        elif node.content is None or node.content.offset != found[1]:
            node.content = found[0].read(found[1])  # read again only when it changed
        return node

    def live_keys(self, topic: str) -> list[dict[bytes, int]]:
        """Each partition's live keys (`Log.live_keys`); from now on the logs
        note the keys appended to, for `changed_keys`."""
        out = []
        for p in range(self.store.topics().get(topic, 0)):
            out.append(self.store.log(topic, p).live_keys(watch=True))
        self.keys_in_use.add(topic)
        return out

    def changed_keys(self, topic: str) -> list[tuple[int, str]]:
        """(inode, name) of the ``keys/`` files the kernel may hold whose key
        was appended to since the last call."""
        if topic not in self.keys_in_use:
            return []
        out = []
        for p in range(self.store.topics().get(topic, 0)):
            for key in self.store.log(topic, p).take_changed_keys():
                name = key_name(key)
                inode = self.inodes.inode_of((topic, "keys", name))
                if inode is not None:
                    out.append((inode, name))
        return out

    def key_of(self, topic: str, name: str) -> bytes | None:
        """The key ``keys/<name>`` names, if any (core/keys.py)."""
        key = name_key(name)
        if key is None and "%~" in name:  # a long key's hashed name: look among the keys
            for live in self.live_keys(topic):
                for candidate in live:
                    if key_name(candidate) == name:
                        return candidate
        return key

    def latest(self, topic: str, key: bytes) -> tuple[Log, int] | None:
        """The log and offset of ``key``'s latest record in ``topic``, if live."""
        for p, live in enumerate(self.live_keys(topic)):
            offset = live.get(key)
            if offset is not None:
                return self.store.log(topic, p), offset
        return None

    def entries(self, node: Node) -> list[str]:
        """The names in a directory, in listing order."""
        if node.kind is Kind.ROOT:
            return list(self.store.topics())
        if node.kind is Kind.TOPIC:
            count = self.store.topics().get(node.topic, 0)
            children = list(TOPIC_CHILDREN)
            if not self.store.topic_config(node.topic).compact:
                children.remove("keys")
            return [str(p) for p in range(count)] + children
        if node.kind is Kind.KEYS_DIR:
            live = set()
            for keys in self.live_keys(node.topic):
                live.update(keys)
            return sorted(key_name(k) for k in live)
        if node.kind is Kind.PARTITION:
            return list(PARTITION_CHILDREN)
        if node.kind is Kind.OFFSET_DIR:
            log = self.log(node)
            first = max(log.log_start_offset, log.next_offset - OFFSET_LISTING)
            return [str(n) for n in range(first, log.next_offset)]
        if node.kind is Kind.SEGMENT_DIR:
            return sorted(self.log(node).segment_files())
        return []  # time/ and from/: every number is a name; none is listed

    # ------------------------------------------------------------ attributes

    def attrs(self, node: Node, *, listing: bool = False) -> pyfuse3.EntryAttributes:
        """stat(2) for ``node``; also how long the kernel may cache it.

        A stream's size needs its segments counted (`count_streams`); until
        then (only readdirplus, ``ls -l``, gets here first) it reads as 0.
        """
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = node.inode
        attrs.generation = 0
        attrs.st_uid, attrs.st_gid = self._uid, self._gid
        attrs.st_blksize = BLOCK_SIZE
        attrs.st_nlink = 1
        mtime = self._started_ns
        kind = node.kind
        size = 0
        timeout = 1.0
        if kind in DIRECTORIES:
            mode = stat.S_IFDIR | 0o755
            attrs.st_nlink = 2
        elif kind in (Kind.TIME, Kind.SEGMENT):
            mode = stat.S_IFLNK | 0o777
            size = len(node.content)
            timeout = 0 if kind is Kind.TIME else 1.0
        elif kind is Kind.OFFSET:
            mode = stat.S_IFREG | 0o444
            size = len(node.content.value or b"")
            mtime = max(node.content.timestamp, 0) * 1_000_000
            timeout = 60.0
        elif kind is Kind.KEY:  # its latest value: the mount invalidates it when it changes
            mode = stat.S_IFREG | 0o644
            if node.content is not None:
                size = len(node.content.value or b"")
                mtime = max(node.content.timestamp, 0) * 1_000_000
        elif kind in APPENDS:
            mode = stat.S_IFREG | 0o644
            timeout = 0
        elif kind is Kind.CONFIG:
            mode = stat.S_IFREG | 0o644
            size = len(config_text(self.store.topic_config(node.topic)))
            timeout = 0
        elif kind in (Kind.STREAM, Kind.FROM):
            mode = stat.S_IFREG | 0o444
            stream = node.content if kind is Kind.FROM else self.log(node).stream
            size = stream.size() or 0
            mtime = time.time_ns()
            timeout = 0
        else:  # STATE
            mode = stat.S_IFREG | 0o444
            size = len(state_text(self.log(node)))
            mtime = time.time_ns()
            timeout = 0
        if stat.S_ISDIR(mode):
            mode = stat.S_IFDIR | self._perm
        elif stat.S_ISREG(mode):
            mode = stat.S_IFREG | (self._perm & (0o666 if mode & 0o200 else 0o444))
        changed = self.changed_owner.get(node.path)
        if changed is not None:
            attrs.st_uid, attrs.st_gid = changed[0], changed[1]
            mode = stat.S_IFMT(mode) | changed[2]
        if self.store.read_only:
            mode &= ~0o222
        attrs.st_mode = mode
        attrs.st_size = size
        attrs.st_blocks = (size + 511) // 512
        attrs.st_atime_ns = attrs.st_ctime_ns = attrs.st_mtime_ns = mtime
        attrs.entry_timeout = attrs.attr_timeout = timeout
        return attrs

    def forget_topic(self, topic: str) -> None:
        """After a topic is deleted: fresh inodes next time."""
        self.inodes.unlink_prefix((topic,))

    async def count_streams(self, log: Log, stream: FromStream | None = None) -> None:
        """Count the stream bytes of ``log``'s segments loaded from disk (those
        ``stream`` needs, for a ``from/<n>``), each once, in a worker thread:
        the mount serves other requests meanwhile."""
        for uncounted in (stream or log.stream).uncounted():
            event = self._counting.get(uncounted)
            if event is not None:
                await event.wait()
                continue
            event = self._counting[uncounted] = trio.Event()
            try:
                counted = await trio.to_thread.run_sync(PartitionStream.count, uncounted)
                log.stream.set_counted(uncounted, counted)
            except FileNotFoundError:
                pass  # deleted by retention meanwhile
            finally:
                del self._counting[uncounted]
                event.set()

    def xattrs(self, node: Node) -> dict[str, bytes]:
        """The root's pid, data dir and health; a record's offset, timestamp, key, headers."""
        if node.kind is Kind.ROOT and not self.is_ready():
            return {
                XATTR + "pid": str(os.getpid()).encode(),
                XATTR + "data": os.fsencode(os.path.abspath(self.store.path)),
                XATTR + "health": b"recovering",
                XATTR + "failures": b"{}",
            }
        if node.kind is Kind.ROOT:
            offline = self.store.failures()
            failures = dict(offline)
            if self.store.checkpoint_failure:
                failures["checkpoints"] = f"writing failed: {self.store.checkpoint_failure}"
            health = "failed" if offline else "degraded" if failures else "ok"
            return {
                XATTR + "pid": str(os.getpid()).encode(),
                XATTR + "data": os.fsencode(os.path.abspath(self.store.path)),
                XATTR + "health": health.encode(),
                XATTR + "failures": json.dumps(failures, sort_keys=True).encode(),
            }
        if node.kind is Kind.KEY and node.content is not None:
            record = node.content
            found = self.latest(node.topic, record.key)
            return {
                XATTR + "offset": str(record.offset).encode(),
                XATTR + "timestamp": str(record.timestamp).encode(),
                XATTR + "partition": str(found[0].partition if found else "").encode(),
                XATTR + "key": record.key,
            }
        if node.kind is not Kind.OFFSET:
            return {}
        record = node.content
        out = {
            XATTR + "offset": str(record.offset).encode(),
            XATTR + "timestamp": str(record.timestamp).encode(),
            XATTR + "headers": json.dumps(
                [
                    [k, None if v is None else v.decode("utf-8", "backslashreplace")]
                    for k, v in record.headers
                ]
            ).encode(),
        }
        if record.key is not None:
            out[XATTR + "key"] = record.key
        for name, value in record.headers:
            out.setdefault(f"{XATTR}header.{name}", value or b"")
        return out
