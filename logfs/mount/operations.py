"""pyfuse3 Operations: the mount's tree over a Store (see docs/mount.md).

Handlers resolve the inode, call the store (or an open file's method) and
build attributes; the tree's shape and the inode table are in tree.py,
existence, listings and attributes in view.py, per-open-file state (append
routing, config merging, stream read-ahead) in files.py, the line, binary
and batch framing in framing.py. Every error becomes an errno through the
one table `ERRNOS` (errnos.py); only `FUSEError` leaves a handler.

Caching: directories and static files are cached for a second; ``offset/<n>``
files for a minute (a record never changes; a deleted topic's paths get new
inodes); ``stream``, ``state`` and ``append`` not at all, so ``tail -f``'s
once-a-second fstat sees the stream grow. ``append``, ``stream``, ``state``
and ``config`` are opened with direct_io: every write() reaches the daemon
as-is (one write, one append) and reads are never served stale.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import pwd
import stat

import pyfuse3
import trio

from ..core.config import flush_messages_reached
from ..core.format import max_record_bytes
from ..core.log import Log, Store
from .errnos import fuse_errors
from .files import (
    AppendFile,
    ConfigFile,
    KeyFile,
    SnapshotFile,
    StreamFile,
    config_text,
    state_text,
)
from .flusher import Flusher
from .tree import APPENDS, DIRECTORIES, FRAMINGS, TOPIC_APPENDS, Kind, number
from .view import DATA_OWNER, Ownership, View, fail

logger = logging.getLogger(__name__)


def pwd_name(uid: int) -> str:
    """The user name of ``uid`` (for getgrouplist), or its number."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class Operations(pyfuse3.Operations):
    """The mount over ``store``; ``flusher`` (optional) runs fsyncs off the loop."""

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(
        self,
        store: Store,
        *,
        flusher: Flusher | None = None,
        partitions: int = 1,
        owner: Ownership = DATA_OWNER,
    ) -> None:
        super().__init__()
        self.store = store
        self.flusher = flusher
        self.partitions = partitions
        self.view = View(store, owner)
        self.inodes = self.view.inodes
        # Set once the store's partitions are recovered (daemon.py); a store opened
        # the usual way (recovered already, or read-only) is ready at once.
        self.ready = trio.Event()
        self.failed_to_recover = False
        if store.read_only or not store.has_unopened():
            self.ready.set()
        self.view.is_ready = self.ready.is_set
        self.files: dict[int, AppendFile | StreamFile | SnapshotFile] = {}
        self._fh = itertools.count(1)

    @fuse_errors
    async def lookup(self, parent_inode, name, ctx=None):
        parent = self.view.node(parent_inode)
        text = os.fsdecode(name)
        if text == ".":
            path = parent.path
        elif text == "..":
            path = parent.path[:-1]
        else:
            path = (*parent.path, text)
        node = self.view.resolve(path)
        await self._count(node)
        attrs = self.view.attrs(node)
        node.lookups += 1
        return attrs

    async def _count(self, node) -> None:
        """A stream's size needs its segments counted (in a worker thread)."""
        if node.kind is Kind.STREAM:
            await self.view.count_streams(self.view.log(node))
        elif node.kind is Kind.FROM:
            await self.view.count_streams(self.view.log(node), node.content)

    async def forget(self, inode_list):
        for inode, count in inode_list:
            self.inodes.forget(inode, count)

    @fuse_errors
    async def getattr(self, inode, ctx=None):
        node = self.view.node(inode)
        if node.kind is not Kind.ROOT:
            self.view.resolve(node.path)  # still there? (a deleted topic answers ENOENT)
        await self._count(node)
        return self.view.attrs(node)

    @fuse_errors
    async def setattr(self, inode, attr, fields, fh, ctx=None):
        node = self.view.node(inode)
        if fields.update_mode or fields.update_uid or fields.update_gid:
            self._change_owner(node, attr, fields, ctx)
        if fields.update_size and node.kind is Kind.KEY:
            self._truncate_key(node, attr.st_size, self.files.get(fh))
        elif fields.update_size:
            # `> file` and `truncate -s 0` on an append-only file: nothing to cut.
            if node.kind not in APPENDS and node.kind is not Kind.CONFIG:
                raise fail(errno.EACCES)
            if attr.st_size != 0:
                raise fail(errno.EINVAL)
        return self.view.attrs(node)  # times (touch) are accepted and not stored

    def _change_owner(self, node, attr, fields, ctx) -> None:
        """chown and chmod: remembered for the mount's life (the files are
        virtual: nothing on disk changes), so that services that chown their
        logs to a worker user (nginx's reopen, logrotate's ``create``,
        ``install -m``) work; the kernel then checks access by them with
        ``default_permissions``. As in Unix: only root gives a file away,
        its owner may chmod it and give it to a group of theirs."""
        if self.store.read_only:
            raise fail(errno.EROFS)
        current = self.view.attrs(node)
        uid = attr.st_uid if fields.update_uid else current.st_uid
        gid = attr.st_gid if fields.update_gid else current.st_gid
        mode = stat.S_IMODE(attr.st_mode if fields.update_mode else current.st_mode)
        caller = ctx.uid if ctx is not None else 0
        if caller != 0:
            if caller != current.st_uid or uid != current.st_uid:
                raise fail(errno.EPERM)
            if gid != current.st_gid and gid not in os.getgrouplist(pwd_name(caller), ctx.gid):
                raise fail(errno.EPERM)
        self.view.changed_owner[node.path] = (uid, gid, mode)

    def _truncate_key(self, node, size: int, file) -> None:
        """truncate(2) of ``keys/<k>``: an open file's copy, else a new value now."""
        if self.store.read_only:
            raise fail(errno.EROFS)
        if isinstance(file, KeyFile):
            file.truncate(size)
            return
        value = b"" if node.content is None else node.content.value or b""
        key = self.view.key_of(node.topic, node.path[2])
        value = value[:size] + bytes(max(0, size - len(value)))
        self.store.append_to_topic(node.topic, [value], [key])
        self._refresh_keys(node.topic)
        self.view.resolve(node.path)

    @fuse_errors
    async def readlink(self, inode, ctx=None):
        node = self.view.node(inode)
        if node.kind not in (Kind.TIME, Kind.SEGMENT):
            raise fail(errno.EINVAL)
        return os.fsencode(node.content)

    # ------------------------------------------------------------ directories

    @fuse_errors
    async def opendir(self, inode, ctx=None):
        node = self.view.node(inode)
        if node.kind not in DIRECTORIES:
            raise fail(errno.ENOTDIR)
        return inode

    @fuse_errors
    async def readdir(self, fh, start_id, token):
        node = self.view.node(fh)
        entries = self.view.entries(node)
        for i in range(start_id, len(entries)):
            try:
                child = self.view.resolve((*node.path, entries[i]))
            except pyfuse3.FUSEError:
                continue  # gone since the listing was made
            if not pyfuse3.readdir_reply(
                token, os.fsencode(entries[i]), self.view.attrs(child, listing=True), i + 1
            ):
                break
            child.lookups += 1

    async def releasedir(self, fh):
        pass

    @fuse_errors
    async def mkdir(self, parent_inode, name, mode, ctx=None):
        parent = self.view.node(parent_inode)
        text = os.fsdecode(name)
        if parent.kind is Kind.ROOT:
            self.store.create_topic(text, partitions=self.partitions)
        elif parent.kind is Kind.TOPIC:
            n = number(text)
            if n is None:
                raise fail(errno.EINVAL)
            count = self.store.topics().get(parent.topic, 0)
            if n < count:
                raise fail(errno.EEXIST)
            self.store.add_partitions(parent.topic, n + 1)
        else:
            raise fail(errno.EPERM)
        return await self.lookup(parent_inode, name, ctx)

    @fuse_errors
    async def rmdir(self, parent_inode, name, ctx=None):
        parent = self.view.node(parent_inode)
        text = os.fsdecode(name)
        if parent.kind is not Kind.ROOT:
            raise fail(errno.EPERM)  # partitions cannot be removed, as in Kafka
        self.store.delete_topic(text)
        self.view.forget_topic(text)

    @fuse_errors
    async def create(self, parent_inode, name, mode, flags, ctx=None):
        """Only ``keys/<k>`` of a compacted topic can be created (a new key,
        written at close); the rest of the tree is fixed."""
        parent = self.view.node(parent_inode)
        if parent.kind is not Kind.KEYS_DIR:
            raise fail(errno.EPERM)
        if self.store.read_only:
            raise fail(errno.EROFS)
        path = (*parent.path, os.fsdecode(name))
        key = self.view.key_of(parent.topic, path[2])
        if key is None:
            raise fail(errno.EINVAL)  # a name no key has (see docs/compaction.md)
        self.view.pending.add(path)
        node = self.view.resolve(path)
        node.lookups += 1
        fh = next(self._fh)
        self.files[fh] = KeyFile(parent.topic, key, path, b"", changed=True)
        return pyfuse3.FileInfo(fh=fh, direct_io=True), self.view.attrs(node)

    @fuse_errors
    async def unlink(self, parent_inode, name, ctx=None):
        """``rm keys/<k>`` appends a tombstone for the key; nothing else unlinks."""
        parent = self.view.node(parent_inode)
        if parent.kind is not Kind.KEYS_DIR:
            raise fail(errno.EPERM)
        if self.store.read_only:
            raise fail(errno.EROFS)
        key = self.view.key_of(parent.topic, os.fsdecode(name))
        if key is None or self.view.latest(parent.topic, key) is None:
            raise fail(errno.ENOENT)
        self.store.append_to_topic(parent.topic, [None], [key])
        self._refresh_keys(parent.topic)

    def _refresh_keys(self, topic: str) -> None:
        """The kernel keeps a ``keys/`` file's attributes for a second: after
        appends to a compacted topic, forget those of the keys written."""
        for inode, _ in self.view.changed_keys(topic):
            with contextlib.suppress(OSError):  # the kernel no longer holds it
                pyfuse3.invalidate_inode(inode, attr_only=True)

    async def _refuse(self, *args):
        raise fail(errno.EPERM)

    rename = symlink = link = mknod = _refuse

    @fuse_errors
    async def statfs(self, ctx=None):
        st = os.statvfs(self.store.path)
        data = pyfuse3.StatvfsData()
        for field in (
            "f_bsize",
            "f_frsize",
            "f_blocks",
            "f_bfree",
            "f_bavail",
            "f_files",
            "f_ffree",
            "f_favail",
        ):
            setattr(data, field, getattr(st, field))
        data.f_namemax = 255
        return data

    # ------------------------------------------------------------ files

    @fuse_errors
    async def open(self, inode, flags, ctx=None):
        node = self.view.node(inode)
        kind = node.kind
        writing = flags & os.O_ACCMODE != os.O_RDONLY
        if kind in DIRECTORIES:
            raise fail(errno.EISDIR)
        if writing and kind not in APPENDS and kind not in (Kind.CONFIG, Kind.KEY):
            raise fail(errno.EACCES)
        if writing and self.store.read_only:
            raise fail(errno.EROFS)
        fh = next(self._fh)
        if kind in APPENDS:
            config = self.store.topic_config(node.topic)
            partition = None if kind in TOPIC_APPENDS else node.partition
            reading = flags & os.O_ACCMODE != os.O_WRONLY
            self.files[fh] = AppendFile(
                node.topic, partition, config, framing=FRAMINGS[kind], receipts=reading
            )
            # Receipts are a stream, not a file: without lseek, bash's `read`
            # (on `exec 3<>append`) takes one byte at a time instead of reading
            # ahead and seeking back. O_APPEND opens (Python "a+") stay seekable:
            # Python's buffered "+" modes refuse a file that cannot seek.
            nonseekable = reading and not flags & os.O_APPEND
            return pyfuse3.FileInfo(fh=fh, direct_io=True, nonseekable=nonseekable)
        elif kind is Kind.KEY:
            node = self.view.resolve(node.path)  # its value now (attributes are cached)
            value = b"" if node.content is None else node.content.value or b""
            truncate = writing and bool(flags & os.O_TRUNC)
            key = self.view.key_of(node.topic, node.path[2])
            self.files[fh] = KeyFile(
                node.topic, key, node.path, b"" if truncate else value, changed=truncate
            )
            if not writing:  # the page cache, refreshed at each open: no read past the end
                return pyfuse3.FileInfo(fh=fh, keep_cache=False)
        elif kind in (Kind.STREAM, Kind.FROM):
            source = node.content if kind is Kind.FROM else None
            self.files[fh] = StreamFile(node.topic, node.partition, source)
        elif kind is Kind.STATE:
            self.files[fh] = SnapshotFile(state_text(self.view.log(node)))
        elif kind is Kind.CONFIG:
            text = config_text(self.store.topic_config(node.topic))
            self.files[fh] = ConfigFile(node.topic, text, merge=bool(flags & os.O_APPEND))
        else:  # OFFSET: immutable, so the page cache may keep it across opens
            self.files[fh] = SnapshotFile(node.content.value or b"")
            return pyfuse3.FileInfo(fh=fh, keep_cache=True)
        return pyfuse3.FileInfo(fh=fh, direct_io=True)

    def _file(self, fh: int) -> AppendFile | StreamFile | SnapshotFile:
        file = self.files.get(fh)
        if file is None:
            raise fail(errno.EBADF)
        return file

    @fuse_errors
    async def read(self, fh, off, size):
        file = self._file(fh)
        if isinstance(file, AppendFile):
            return file.read_receipts(size)
        if isinstance(file, StreamFile):
            log = self.store.log(file.topic, file.partition)
            await self.view.count_streams(log, file.source)
            return file.read(log, off, size)
        return file.read(off, size)

    @fuse_errors
    async def write(self, fh, off, buf):
        file = self._file(fh)
        if isinstance(file, AppendFile):
            file.write(self.store, buf)
            self._refresh_keys(file.topic)
            await self._sync_if_due(file)
        elif isinstance(file, KeyFile):
            config = self.store.topic_config(file.topic)
            file.write(off, buf, max_record_bytes(config) - len(file.key))
        elif isinstance(file, ConfigFile):
            file.write(self.store, buf)
        else:
            raise fail(errno.EBADF)
        return len(buf)

    @fuse_errors
    async def flush(self, fh):
        """close(): a trailing partial line becomes a record; errors reach close()."""
        file = self._file(fh)
        if isinstance(file, AppendFile) and file.framer.pending:
            file.finish(self.store)
            self._refresh_keys(file.topic)
            await self._sync_if_due(file)
        elif isinstance(file, ConfigFile):
            file.finish(self.store)
        elif isinstance(file, KeyFile):
            try:
                file.finish(self.store)
            finally:
                self.view.pending.discard(file.path)
                self._refresh_keys(file.topic)

    async def release(self, fh):
        try:
            await self.flush(fh)
        except pyfuse3.FUSEError as e:
            logger.warning("closing an append file lost its unterminated tail: errno %d", e.errno)
        self.files.pop(fh, None)

    @fuse_errors
    async def fsync(self, fh, datasync):
        """fsync on an append file returns once its partition(s) are durable."""
        file = self._file(fh)
        if not isinstance(file, AppendFile):
            return
        for log in file.logs(self.store):
            await self._sync(log)

    async def _sync(self, log: Log) -> None:
        if self.flusher is not None:
            await self.flusher.flush_log(log)  # fsync in a worker thread
        else:
            log.flush()

    async def _sync_if_due(self, file: AppendFile) -> None:
        """flush.messages: a write() that leaves a partition with at least that
        many unflushed records (`flush_messages_reached`) returns once they are
        durable, as Kafka flushes in its append path; leaving it to the
        flusher's next tick would acknowledge records a power failure can still
        take."""
        for log in file.logs(self.store):
            if flush_messages_reached(log.config, unflushed=log.unflushed_messages):
                await self._sync(log)

    # ------------------------------------------------------------ extended attributes

    @fuse_errors
    async def getxattr(self, inode, name, ctx=None):
        value = self.view.xattrs(self.view.node(inode)).get(os.fsdecode(name))
        if value is None:
            raise fail(pyfuse3.ENOATTR)
        return value

    @fuse_errors
    async def listxattr(self, inode, ctx=None):
        return [os.fsencode(name) for name in self.view.xattrs(self.view.node(inode))]

    @fuse_errors
    async def setxattr(self, inode, name, value, ctx=None):
        raise fail(errno.ENOTSUP)

    @fuse_errors
    async def removexattr(self, inode, name, ctx=None):
        raise fail(errno.ENOTSUP)

    # ------------------------------------------------------------ shutdown

    def close_files(self) -> None:
        """At unmount: every open append file's partial line becomes a record."""
        for fh, file in list(self.files.items()):
            if isinstance(file, AppendFile) and file.framer.pending:
                try:
                    file.finish(self.store)
                except Exception as e:  # noqa: BLE001 - shutdown goes on
                    logger.warning("unterminated tail of an append file lost at unmount: %s", e)
            self.files.pop(fh, None)
