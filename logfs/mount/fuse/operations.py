"""pyfuse3 Operations: the mount's tree over a Store (see docs/mount.md).

Handlers resolve the inode and hand the request to its node or open file: what
each kind of node is and does is in the tree room (tree/directories.py, nodes.py),
what an open file holds and does in the files room (files/generated.py,
appendfile.py), the state they share in tree/view.py, the framing in
files/framing.py. Every error becomes the errno of the one table of errors
(core/errors.py, read by mount/errnos.py); only `FUSEError` leaves a handler.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Awaitable, Callable

import pyfuse3
import trio

from ...core.access import in_group, new_group_owner
from ...core.log import Log, Owner, Store
from ...groups import Coordinator
from ..errnos import Metrics, fail, fuse_errors, log_rejected
from ..files import AppendFile, BufferedAppends, OpenFile
from ..tree import DATA_OWNER, Caller, Ownership, Root, View, resolve
from .handles import Handles, gone_attrs
from .listings import Listings

logger = logging.getLogger(__name__)

# The requests about an open file (by its handle); the rest name an inode.
FILE_REQUESTS = {"read", "write", "flush", "_release", "fsync"}


class Operations(pyfuse3.Operations):
    """The mount over ``store``.

    Args:
        store: the data directory's store.
        groups: the group coordinator the ``groups/`` files show (the daemon's).
        sync: ``sync(log)`` makes a log durable off the loop (the flusher's; else in line).
        partitions: partitions of a topic made by mkdir.
        owner: the owner, group and modes the mount shows (``uid=`` and friends).
        buffered: the buffered mode (``acks=0``), whose write-backs open the append
            files below ``mountpoint``.
        ready: set once the store's partitions are recovered (default: at once if none).
        metrics: the daemon's metrics (logfs/metrics), told of every request, or None.
        recovery: how far the recovery at the start went (the daemon's; a JSON object).
    """

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(
        self,
        store: Store,
        *,
        groups: Coordinator | None = None,
        sync: Callable[[Log], Awaitable[None]] | None = None,
        partitions: int = 1,
        owner: Ownership = DATA_OWNER,
        buffered: bool = False,
        mountpoint: str | None = None,
        ready: trio.Event | None = None,
        metrics: Metrics | None = None,
        recovery: Callable[[], dict] = dict,
    ) -> None:
        super().__init__()
        self.metrics = metrics
        self.enable_writeback_cache = buffered
        self.store = store
        self.partitions = partitions  # of a topic made by mkdir
        if ready is None:  # a store opened the usual way (recovered, or read-only) is ready
            ready = trio.Event()
            if store.read_only or not store.has_unopened():
                ready.set()
        self.ready = ready
        self.buffered = BufferedAppends(mountpoint) if buffered else None
        self.view = View(
            store,
            Root(),
            groups or Coordinator(store),
            owner,
            sync,
            buffered=self.buffered,
            is_ready=ready.is_set,
            recovery=recovery,
            metrics=metrics,
        )
        self.inodes = self.view.inodes
        self.handles = Handles()
        self.files = self.handles.files
        self.listings = Listings(self.view, self.handles.numbers)

    def kind_of(self, name: str, args: tuple) -> str:
        """For the metrics: the class of the open file or node a request is about."""
        if not args or name == "statfs":
            return "Root"
        if name in FILE_REQUESTS:
            found = self.files.get(args[0])
        elif name == "readdir":
            found = self.inodes.get(self.listings.inode_of(args[0]))
        else:  # an inode, or the parent's for lookup, mkdir, rmdir, create, unlink
            found = self.inodes.get(args[0])
        return "Unknown" if found is None else type(found).__name__

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
        node = resolve(self.view, path)
        await node.count(self.view)
        attrs = self.view.attrs(node)
        self.inodes.looked_up(node)
        return attrs

    async def forget(self, inode_list):
        for inode, count in inode_list:
            self.inodes.forget(inode, count)
            if self.inodes.get(inode) is None:
                self.listings.forget(inode)

    @fuse_errors
    async def getattr(self, inode, ctx=None):
        if self.handles.is_open(inode):  # fstat, or a read past what the kernel holds
            gone = self.inodes.get(inode)
            if gone is not None and gone.life is not None and gone.life.deleted:
                return gone_attrs(gone, self.view.root_owner(), self.view.started_ns)
        node = self.view.node(inode)
        resolve(self.view, node.path)  # still there? (a deleted topic answers ENOENT)
        await node.count(self.view)
        return self.view.attrs(node)

    @fuse_errors
    async def setattr(self, inode, attr, fields, fh, ctx=None):
        node = self.view.node(inode)
        if fields.update_mode or fields.update_uid or fields.update_gid:
            self._change_owner(node, attr, fields, ctx)
        if fields.update_size:
            node.truncate(self.view, attr.st_size, self.files.get(fh))
        return self.view.attrs(node)  # times (touch) are accepted and not stored

    def _change_owner(self, node, attr, fields, ctx) -> None:
        """chown and chmod, so that services that chown their logs to a worker user
        (nginx's reopen, logrotate's ``create``, ``install -m``) work; the kernel then
        checks access by them (``default_permissions``). A topic's and a group's are
        kept in DATA, where the listener decides from them too (`View.keep_owner`);
        other paths' for the mount's life. As in Unix: only root gives a file away, its
        owner may chmod it and give it to a group of theirs; no set-user/group-ID bits."""
        if self.store.read_only:
            raise fail(errno.EROFS)
        current = self.view.attrs(node)
        uid = attr.st_uid if fields.update_uid else current.st_uid
        gid = attr.st_gid if fields.update_gid else current.st_gid
        mode = stat.S_IMODE(attr.st_mode if fields.update_mode else current.st_mode)
        if not node.directory:
            # Never kept on files: no file here is a program, and the kernel leaves
            # dropping them at a write to the file system (fuseinit.py).
            mode &= ~(stat.S_ISUID | stat.S_ISGID)
        caller = Caller.of(ctx)
        if not caller.is_root:
            if caller.uid != current.st_uid or uid != current.st_uid:
                raise fail(errno.EPERM)
            if gid != current.st_gid and not in_group(caller, gid):
                raise fail(errno.EPERM)
        self.view.keep_owner(node, Owner(uid, gid, mode))

    @fuse_errors
    async def readlink(self, inode, ctx=None):
        return os.fsencode(self.view.node(inode).readlink())

    # ------------------------------------------------------------ directories

    @fuse_errors
    async def opendir(self, inode, ctx=None):
        node = self.view.node(inode)
        if not node.directory:
            raise fail(errno.ENOTDIR)
        return self.listings.open(node)

    @fuse_errors
    async def readdir(self, fh, start_id, token):
        self.listings.read(fh, start_id, token)

    async def releasedir(self, fh):
        self.listings.close(fh)

    @fuse_errors
    async def mkdir(self, parent_inode, name, mode, ctx=None):
        """A topic in the root (with ``-o partitions=N``), partitions up to
        ``<n>`` in a topic; nothing else."""
        parent = self.view.node(parent_inode)
        await parent.mkdir(self.view, os.fsdecode(name), self.partitions, mode, Caller.of(ctx))
        return await self.lookup(parent_inode, name, ctx)

    @fuse_errors
    async def rmdir(self, parent_inode, name, ctx=None):
        """Topics only: partitions cannot be removed, as in Kafka."""
        topic = os.fsdecode(name)
        await self.view.node(parent_inode).rmdir(self.view, topic, Caller.of(ctx))
        for forgets in (self.buffered, self.metrics):  # what they kept of the topic
            if forgets is not None:
                forgets.forget_topic(topic)

    @fuse_errors
    async def create(self, parent_inode, name, mode, flags, ctx=None):
        """Only ``keys/<k>`` (a new key, written at close) and ``groups/<g>``."""
        node, file = self.view.node(parent_inode).create(self.view, os.fsdecode(name))
        if node.shows == "group":  # a new group is its maker's (settled at close)
            self.view.groups.claim_group(node.path[3], new_group_owner(Caller.of(ctx)))
        self.inodes.looked_up(node)
        fh = self.handles.add(file, node, writing=True)
        return file.info(fh), self.view.attrs(node)

    @fuse_errors
    async def unlink(self, parent_inode, name, ctx=None):
        """``rm keys/<k>`` appends a tombstone for the key; nothing else unlinks."""
        self.view.node(parent_inode).unlink(self.view, os.fsdecode(name))

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
        file = node.open(self.view, flags)
        fh = self.handles.add(file, node, writing=flags & os.O_ACCMODE != os.O_RDONLY)
        return file.info(fh)

    def _file(self, fh: int) -> OpenFile:
        return self.handles.file(fh)

    def topic_deleted(self, fh: int) -> bool:
        return self.handles.topic_deleted(fh)

    @fuse_errors
    async def read(self, fh, off, size):
        """A deleted topic's open file reads as ended (the rest is gone with it)."""
        file = self._file(fh)
        if self.topic_deleted(fh):
            return b""
        return await file.read(off, size)

    @fuse_errors
    async def write(self, fh, off, buf):
        """ESTALE once the file's topic was deleted (never the re-created one)."""
        file = self._file(fh)
        if self.topic_deleted(fh):
            raise fail(errno.ESTALE)
        await file.write(off, buf)
        if self.metrics is not None and isinstance(file, AppendFile):
            self.metrics.written(file.topic, len(buf))
        return len(buf)

    @fuse_errors
    async def flush(self, fh):
        """close(): what the open file holds takes effect (an append file's partial
        line becomes a record); errors reach close(). A deleted topic's file opened
        for writing answers ESTALE: nothing it held was appended."""
        file = self._file(fh)
        if self.topic_deleted(fh):
            if self.handles.writing(fh):
                raise fail(errno.ESTALE)
            return
        await file.flush()

    @fuse_errors
    async def _release(self, fh):
        await self._file(fh).release()

    async def release(self, fh):
        try:
            if not self.topic_deleted(fh):  # else nothing can take effect (flush said ESTALE)
                await self._release(fh)
        except pyfuse3.FUSEError as e:
            log_rejected(logging.WARNING, "closing a file lost what it held: errno %d", e.errno)
        file = self.handles.remove(fh)
        if file is not None:
            file.forget()

    @fuse_errors
    async def fsync(self, fh, datasync):
        """An append file's partition(s) made durable; ESTALE once its topic was deleted."""
        file = self._file(fh)
        if self.topic_deleted(fh):
            raise fail(errno.ESTALE)
        await file.fsync()

    # ------------------------------------------------------------ extended attributes

    @fuse_errors
    async def getxattr(self, inode, name, ctx=None):
        if not name.startswith(b"user."):
            # security.capability: asked before a write() through the page cache
            # (the buffered mode) unless handle_killpriv_v2 was granted (fuseinit.py).
            raise fail(pyfuse3.ENOATTR)
        value = self.view.node(inode).xattrs(self.view).get(os.fsdecode(name))
        if value is None:
            raise fail(pyfuse3.ENOATTR)
        return value

    @fuse_errors
    async def listxattr(self, inode, ctx=None):
        return [os.fsencode(name) for name in self.view.node(inode).xattrs(self.view)]

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
            if self.topic_deleted(fh):
                continue  # its topic is gone: nothing to keep
            try:
                file.unmount()
            except Exception as e:  # noqa: BLE001 - shutdown goes on
                logger.warning("unterminated tail of an append file lost at unmount: %s", e)
            self.handles.remove(fh)
