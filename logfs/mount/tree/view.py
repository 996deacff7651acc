"""What the mount's handlers, nodes and open files share, and what every kind
of node is.

`View` is the mount's state over a store: the inode table, the live keys, the owner
and modes it shows, the streams being counted, and how a log is made durable (the
flusher's worker thread, else in line). `Node` is one path below the mount point; a
subclass per kind (directories.py for directories, nodes.py, keyfiles.py and
groupfiles.py for files) says what that kind does, and the open file it gives (an
`OpenFile` of the files room) what one open() of it does. This base class answers
the errno of "not this kind" for the rest, so the FUSE handlers never ask which kind
a node is.

Inodes are handed out on lookup, dropped when the kernel forgets them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple

import pyfuse3
import trio

from ...core.access import (
    DATA_OWNER,
    Ownership,
    data_owner,
    group_shown,
    groups_dir_mode,
    inner_mode,
    topic_owner,
)
from ...core.client import names
from ...core.config import flush_messages_reached
from ...core.log import FromStream, Log, Owner, PartitionStream, Store, Uncounted
from ...groups import Coordinator
from ..errnos import Metrics, fail
from ..files import PARTIAL_LINES_BYTES, OpenFile, Pool, RecordCache
from .inodes import InodeTable
from .keyfiles import Keys
from .lives import Caller, Lives, TopicLife

ROOT_INODE = pyfuse3.ROOT_INODE

__all__ = ["DATA_OWNER", "Node", "Ownership", "Stat", "View"]


class Stat(NamedTuple):
    """What a node says of itself in stat(2); `View.attrs` adds owner, group and modes."""

    mode: int  # the file type, and 0o644 (writable) or 0o444 for regular files
    size: int = 0
    mtime_ns: int | None = None  # None: when the mount started
    timeout: float = 1.0  # how long the kernel may cache the entry and attributes


class Node:
    """One path below the mount point, by the kernel's inode number.

    Class attributes say where a kind lives: ``in_partition`` nodes need their
    partition to exist, ``compacted_only`` ones a compacted topic (`placed`).
    Subclasses keep what their kind shows (a record, a link target, a stream)
    in slots of their own.
    """

    __slots__ = ("inode", "path", "life")

    in_partition = False
    compacted_only = False
    directory = False
    writable = False
    shows = ""  # "groups", "group", "mount": a node not shown as its topic's

    def __init__(
        self, path: tuple[str, ...], life: TopicLife | None = None, inode: int = 0
    ) -> None:
        self.path = path
        self.life = life  # its topic's (None: the root)
        self.inode = inode  # `InodeTable.number` (0: a node the kernel is never told of)

    @property
    def topic(self) -> str:
        return self.path[0]

    @property
    def partition(self) -> int:
        return int(self.path[1])

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        """The kind of node ``name`` in this directory is, by its name alone."""
        return None

    @classmethod
    def placed(cls, view: View, path: tuple[str, ...]) -> None:
        """ENOENT unless the topic (and partition) ``path`` of this kind lives
        in exists now (and is compacted, for ``compacted_only`` kinds)."""
        if not path:
            return
        count = view.partitions(path[0])
        if count is None:
            raise fail(errno.ENOENT)
        if cls.in_partition and int(path[1]) >= count:
            view.topics_changed()  # grown by the store's own API (the Kafka face)?
            if int(path[1]) >= (view.partitions(path[0]) or 0):
                raise fail(errno.ENOENT)
        if cls.compacted_only and not view.store.topic_config(path[0]).compact:
            raise fail(errno.ENOENT)

    def refresh(self, view: View) -> None:
        """Read what this node shows from the store now; ENOENT if it is gone.
        Called on every lookup of its path; a new path gets its inode after."""

    async def count(self, view: View) -> None:
        """Count what `stat` needs counted first (a stream's segments)."""

    def stat(self, view: View) -> Stat:
        raise NotImplementedError

    def open(self, view: View, flags: int) -> OpenFile:
        """A new open file: EACCES when writing to a read-only kind, EROFS when
        writing to a read-only mount."""
        if flags & os.O_ACCMODE != os.O_RDONLY:
            if not self.writable:
                raise fail(errno.EACCES)
            if view.store.read_only:
                raise fail(errno.EROFS)
        return self.opened(view, flags)

    def opened(self, view: View, flags: int) -> OpenFile:
        """The open file of this kind, once `open` allowed the flags."""
        raise NotImplementedError

    def truncate(self, view: View, size: int, file: OpenFile | None) -> None:
        """truncate(2) to ``size`` (``file``: the open file it came through)."""
        raise fail(errno.EACCES)

    def readlink(self) -> str:
        raise fail(errno.EINVAL)

    def xattrs(self, view: View) -> dict[str, bytes]:
        return {}

    def entries(self, view: View) -> list[str]:
        """The names in this directory, in listing order."""
        raise fail(errno.ENOTDIR)

    async def mkdir(self, view: View, name: str, partitions: int, mode: int, caller: Caller):
        raise fail(errno.EPERM)

    async def rmdir(self, view: View, name: str, caller: Caller) -> None:
        raise fail(errno.EPERM)

    def create(self, view: View, name: str) -> tuple[Node, OpenFile]:
        """A new file ``name`` in this directory, and the open file it is written through."""
        raise fail(errno.EPERM)

    def unlink(self, view: View, name: str) -> None:
        raise fail(errno.EPERM)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inode}, /{'/'.join(self.path)})"


class View:
    """The mount over ``store``, with ``root`` its root node.

    Args:
        groups: the group coordinator the ``groups/`` files show (the daemon's
            one, which its Kafka listener shares).
        owner: the owner, group and modes the mount shows.
        sync: ``sync(log)`` makes a log durable with its fsyncs off the loop
            (the daemon's flusher's); without it a log is flushed in line.
        buffered: the buffered mode's append streams (buffered.py), or None.
        is_ready: whether the store's partitions are recovered.
        recovery: how far their recovery went (the root's ``user.logfs.recovery``, ``.state``).
        metrics: the daemon's metrics (logfs/metrics), or None.
    """

    def __init__(
        self,
        store: Store,
        root: Node,
        groups: Coordinator,
        owner: Ownership = DATA_OWNER,
        sync: Callable[[Log], Awaitable[None]] | None = None,
        *,
        buffered=None,
        is_ready: Callable[[], bool] = lambda: True,
        recovery: Callable[[], dict] = dict,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics  # the daemon's, told of the records appended, or None
        self.groups = groups
        self._sync = sync
        self.inodes = InodeTable(root)
        self.keys = Keys(store)
        self.records = RecordCache()  # what offset/<n> and keys/ files show
        self.read_ahead = Pool()  # shared by the stream readers
        self.partial_lines = Pool(PARTIAL_LINES_BYTES)  # held by the open append files
        self.buffered = buffered  # the buffered mode's append streams, or None
        self._counting: dict[Uncounted, trio.Event] = {}
        # The root shows DATA's owner and modes (uid=, gid=, umask= replace them), each
        # topic its owner kept in DATA (core/access.py, as the listener): with allow_other,
        # default_permissions the kernel lets users do what they own or are given, no more.
        self.options = owner
        self.data = data_owner(store.path, owner)
        # chown and chmod of the root, for the mount's life: (uid, gid, mode bits); those
        # of paths in a topic live and die with it (`TopicLife`), a topic's are in DATA
        self.changed_owner: dict[tuple[str, ...], tuple[int, int, int]] = {}
        self.lives = Lives()
        self._topics: dict[str, int] | None = None  # store.topics(), kept between changes
        self.started_ns = time.time_ns()
        self.is_ready = is_ready  # whether the store's partitions are recovered
        self.recovery = recovery

    def node(self, inode: int) -> Node:
        """The node the kernel knows by ``inode``; ENOENT once its topic was
        deleted (a re-created topic is another life, never reached through it)."""
        node = self.inodes.get(inode)
        if node is None or (node.life is not None and node.life.deleted):
            raise fail(errno.ENOENT)
        return node

    def topics(self) -> dict[str, int]:
        """Topic -> partitions, kept between the mount's own changes, so a
        lookup or a chunk of a listing never sorts every partition again.
        Read again at the start of each listing of the root or a topic and
        on a lookup that misses: topics the store's own API (the Kafka face)
        creates or grows are found."""
        if self._topics is None:
            self._topics = self.store.topics()
        return self._topics

    def partitions(self, topic: str) -> int | None:
        """``topic``'s partition count (None: no such topic). A miss reads the
        store again: a topic made by the store's own API is found too."""
        count = self.topics().get(topic)
        if count is None:
            self._topics = None
            count = self.topics().get(topic)
        return count

    def topics_changed(self) -> None:
        """A topic was created or deleted or grew partitions."""
        self._topics = None

    def root_owner(self) -> Owner:
        """What the mount's root shows (after a chown or chmod of it)."""
        changed = self.changed_owner.get(())
        return self.data if changed is None else Owner(*changed)

    def topic_owner(self, topic: str) -> Owner:
        """What ``topic``'s directory shows (core/access.py)."""
        return topic_owner(self.store, topic, self.data)

    def shown(self, node: Node) -> Owner:
        """``node``'s owner, group and permission bits before any chown of a
        path inside a topic (core/access.py)."""
        if not node.path or node.shows == "mount":  # the root, or its ``.state``
            root = self.root_owner()
            return root._replace(mode=root.mode & 0o444) if node.path else root
        topic = self.topic_owner(node.topic)
        if len(node.path) == 1:
            return topic
        if node.shows == "group":
            return group_shown(self.groups.group_owner(node.path[3]), self.data)
        if node.shows == "groups":
            return topic._replace(mode=groups_dir_mode(topic.mode))
        return topic._replace(
            mode=inner_mode(topic.mode, directory=node.directory, writable=node.writable)
        )

    def changes(self, node: Node) -> dict[tuple[str, ...], tuple[int, int, int]]:
        """Where the chown and chmod of ``node`` are kept: its topic's life, or
        the mount's for the root."""
        return self.changed_owner if node.life is None else node.life.changed

    def keep_owner(self, node: Node, owner: Owner) -> None:
        """chown or chmod of ``node``: a topic's kept in DATA by the store, a
        consumer group's by the coordinator, another path's for the mount's life."""
        if node.shows == "mount":
            raise fail(errno.EPERM)  # the mount's ``.state`` is the root's, as it is
        if len(node.path) == 1:
            self.store.set_topic_owner(node.topic, owner)
        elif node.shows == "group":
            self.groups.change_group_owner(node.path[3], owner)
        else:
            self.changes(node)[node.path] = tuple(owner)

    def log(self, node: Node) -> Log:
        return self.store.log(node.topic, node.partition)

    def attrs(self, node: Node) -> pyfuse3.EntryAttributes:
        """stat(2) for ``node`` (`Node.stat`) with the mount's owner and modes;
        also how long the kernel may cache it."""
        st = node.stat(self)
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = node.inode
        attrs.generation = 0 if node.life is None else node.life.generation
        shown = self.shown(node)
        attrs.st_uid, attrs.st_gid = shown.uid, shown.gid
        attrs.st_blksize = names.MAX_WRITE  # tools size their writes by st_blksize
        mode = st.mode
        attrs.st_nlink = 2 if stat.S_ISDIR(mode) else 1
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            mode = stat.S_IFMT(mode) | shown.mode
        changed = None if len(node.path) == 1 else self.changes(node).get(node.path)
        if changed is not None:
            attrs.st_uid, attrs.st_gid = changed[0], changed[1]
            mode = stat.S_IFMT(mode) | changed[2]
        if self.store.read_only:
            mode &= ~0o222
        attrs.st_mode = mode
        attrs.st_size = st.size
        attrs.st_blocks = (st.size + 511) // 512
        mtime = self.started_ns if st.mtime_ns is None else st.mtime_ns
        attrs.st_atime_ns = attrs.st_ctime_ns = attrs.st_mtime_ns = mtime
        attrs.entry_timeout = attrs.attr_timeout = st.timeout
        return attrs

    def forget_topic(self, topic: str, *, by_rmdir: bool = False) -> None:
        """After a topic is deleted: its life ends (its nodes and open files
        answer as a deleted file's, its owner and modes are gone), and its
        paths get fresh inodes next time. Deleted otherwise than by an
        ``rmdir`` through the kernel (over Kafka), the kernel is told to drop
        its entry, so a path walked next reaches a topic re-created under the
        name, not the deleted one."""
        self.topics_changed()
        self.lives.end(topic)
        inode = self.inodes.inode_of((topic,))
        if inode is not None and not by_rmdir:
            # asynchronous: a request may hold the root's lock meanwhile
            pyfuse3.invalidate_entry_async(
                ROOT_INODE, os.fsencode(topic), deleted=inode, ignore_enoent=True
            )
        self.inodes.unlink_prefix((topic,))

    def key_appended(self, path: tuple[str, ...]) -> None:
        """``keys/<name>`` at ``path`` was appended to (or the append failed):
        no longer a key created and not written, and the kernel forgets the
        attributes of the keys its topic's appends changed."""
        self.keys.pending.discard(path)
        self.refresh_keys(path[0])

    def records_appended(self, topic: str, count: int) -> None:
        """``count`` records were appended to ``topic`` through an open file."""
        if self.metrics is not None:
            self.metrics.appended(topic, count)

    def refresh_keys(self, topic: str) -> None:
        """The kernel keeps a ``keys/`` file's attributes for a second: after
        appends to a compacted topic, forget those of the keys written."""
        for name in self.keys.changed(topic):
            inode = self.inodes.inode_of((topic, names.KEYS, name))
            if inode is not None:
                with contextlib.suppress(OSError):  # the kernel no longer holds it
                    pyfuse3.invalidate_inode(inode, attr_only=True)

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

    async def sync(self, log: Log) -> None:
        """Make ``log`` durable: fsync in the flusher's worker thread, else here."""
        if self._sync is not None:
            await self._sync(log)
        else:
            log.flush()

    async def sync_due(self, logs: Iterable[Log]) -> None:
        """flush.messages: a write() that leaves a partition with at least that
        many unflushed records (`flush_messages_reached`) returns once they are
        durable, as Kafka flushes in its append path; leaving it to the
        flusher's next tick would acknowledge records a power failure can still
        take."""
        for log in logs:
            if flush_messages_reached(log.config, unflushed=log.unflushed_messages):
                await self.sync(log)
