"""The mount's tree: its directories, and paths resolved to nodes.

Paths are tuples of names below the mount point (file names: core/client/names.py)::

    ()                                   Root
    (topic,)                             Topic            directory
    (topic, "append" | "append.bin")     TopicAppend[Bin]
    (topic, "config")                    Config
    (topic, "keys")                      KeysDir          directory (compacted topics)
    (topic, "keys", name)                Key              a key's latest value (core/log/keys.py)
    (topic, "<p>")                       Partition        directory
    (topic, "<p>", "append" | "append.bin" | "append.batches" | "stream" | "state")
    (topic, "<p>", "offset" | "time" | "segments" | "from")   directories
    (topic, "<p>", "offset", "<n>")      Offset           one record's value
    (topic, "<p>", "time", "<ms>")       Time             symlink to ../offset/<n>
    (topic, "<p>", "from", "<n>")        From             the records' lines from offset n on
    (topic, "<p>", "segments", name)     Segment          symlink into DATA
    (topic, "<p>", "groups", group)      Group            a consumer group's committed offset

Each directory's class names the kind of each child (`Node.child`), so `node_class`
answers from the path's shape alone; whether the topic, partition or offset exists is
the store's to say (`resolve`). Numbers must be canonical decimals (``7``, not ``07``),
so every record has exactly one path (the file kinds are in nodes.py and records.py).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time

import trio

from ...core.access import holds_records, may_delete, new_owner
from ...core.client import names
from ...core.config import INTERNAL_TOPICS
from ..errnos import fail
from ..files import KeyFile, OpenFile, SnapshotFile
from .groupfiles import Group, GroupFile, listed
from .lives import Caller, TopicLife, make
from .nodes import (
    REGULAR,
    Append,
    AppendBatches,
    AppendBin,
    Config,
    From,
    Link,
    Segment,
    State,
    Stream,
    Time,
    TopicAppend,
    TopicAppendBin,
)
from .records import Key, Offset
from .view import ROOT_INODE, Node, Stat, View

OFFSET_LISTING = 100  # `ls offset/` shows the newest this many offsets
DIRECTORY = Stat(stat.S_IFDIR | 0o755)


def number(name: str) -> int | None:
    """The value of a canonical non-negative decimal, else None."""
    if not name.isascii() or not name.isdigit() or (len(name) > 1 and name[0] == "0"):
        return None
    return int(name)


class Directory(Node):
    """A directory: fixed attributes, cached for a second; no listing unless
    the kind has one (``time/`` and ``from/``: every number is a name)."""

    __slots__ = ()
    directory = True

    def stat(self, view: View) -> Stat:
        return DIRECTORY

    def entries(self, view: View) -> list[str]:
        return []

    def open(self, view: View, flags: int) -> OpenFile:
        raise fail(errno.EISDIR)


class Numbered(Directory):
    """``time/`` and ``from/``: a child per canonical number."""

    __slots__ = ()
    in_partition = True
    kind: type[Node]

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        return cls.kind if number(name) is not None else None


class TimeDir(Numbered):
    __slots__ = ()
    kind = Time


class FromDir(Numbered):
    __slots__ = ()
    kind = From


class OffsetDir(Numbered):
    __slots__ = ()
    kind = Offset

    def entries(self, view: View) -> list[str]:
        log = view.log(self)
        end = log.last_stable_offset  # nothing past it is shown
        first = max(log.log_start_offset, end - OFFSET_LISTING)
        return [str(n) for n in range(first, end)]


class SegmentDir(Directory):
    __slots__ = ()
    in_partition = True

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        return Segment

    def entries(self, view: View) -> list[str]:
        return view.log(self).segment_names()


class GroupsDir(Directory):
    """``<topic>/<p>/groups/``: a file per consumer group with an offset
    committed for the partition (groupfiles.py)."""

    __slots__ = ()
    in_partition = True
    shows = "groups"  # sticky, writable by whoever may read the topic (core/access.py)

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        return Group

    def entries(self, view: View) -> list[str]:
        return listed(view, self.topic, self.partition)

    def create(self, view: View, name: str) -> tuple[Node, OpenFile]:
        """A new group's commit, written at close."""
        if view.store.read_only:
            raise fail(errno.EROFS)
        path = (*self.path, name)
        Group.pending.add(path)
        node = resolve(view, path)
        return node, GroupFile(view, path, b"")


class Partition(Directory):
    __slots__ = ()
    in_partition = True
    children: dict[str, type[Node]] = {
        names.APPEND: Append,
        names.APPEND_BIN: AppendBin,
        names.APPEND_BATCHES: AppendBatches,
        names.FROM: FromDir,
        names.OFFSET: OffsetDir,
        names.SEGMENTS: SegmentDir,
        names.STATE: State,
        names.STREAM: Stream,
        names.TIME: TimeDir,
        "groups": GroupsDir,
    }

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        return cls.children.get(name)

    def entries(self, view: View) -> list[str]:
        return list(self.children)


class KeysDir(Directory):
    """``<topic>/keys/`` of a compacted topic: a file per live key."""

    __slots__ = ()
    compacted_only = True

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        return Key

    def entries(self, view: View) -> list[str]:
        return view.keys.names(self.topic)

    def create(self, view: View, name: str) -> tuple[Node, OpenFile]:
        """A new key, written at close (empty if nothing is written); ``name``
        must name a key."""
        if view.store.read_only:
            raise fail(errno.EROFS)
        path = (*self.path, name)
        key = view.keys.key_of(self.topic, name)
        if key is None:
            raise fail(errno.EINVAL)  # a name no key has (see docs/compaction.md)
        view.keys.pending.add(path)
        return resolve(view, path), KeyFile(view, key, path, b"", writing=True, changed=True)

    def unlink(self, view: View, name: str) -> None:
        """``rm keys/<k>`` appends a tombstone for the key."""
        if view.store.read_only:
            raise fail(errno.EROFS)
        key = view.keys.key_of(self.topic, name)
        if key is None or view.keys.latest(self.topic, key) is None:
            raise fail(errno.ENOENT)
        view.store.append_to_topic(self.topic, [None], [key])
        view.refresh_keys(self.topic)


class Topic(Directory):
    __slots__ = ()
    children: dict[str, type[Node]] = {
        names.APPEND: TopicAppend,
        names.APPEND_BIN: TopicAppendBin,
        names.CONFIG: Config,
        names.KEYS: KeysDir,
    }

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        return cls.children.get(name) or (Partition if number(name) is not None else None)

    def entries(self, view: View) -> list[str]:
        view.topics_changed()  # once per listing: partitions added by the Kafka face
        count = view.partitions(self.topic) or 0
        children = list(self.children)
        if not view.store.topic_config(self.topic).compact:
            children.remove(names.KEYS)
        return [str(p) for p in range(count)] + children

    async def mkdir(
        self, view: View, name: str, partitions: int, mode: int, caller: Caller
    ) -> None:
        """``mkdir <topic>/<n>``: partitions up to n, made in a worker thread."""
        n = number(name)
        if n is None:
            raise fail(errno.EINVAL)
        if n < (view.partitions(self.topic) or 0):
            raise fail(errno.EEXIST)
        try:
            await make(view.store, view.store.begin_partitions(self.topic, n + 1))
        finally:
            view.topics_changed()


class Root(Directory):
    __slots__ = ()

    def __init__(
        self, path: tuple[str, ...] = (), life: TopicLife | None = None, inode: int = ROOT_INODE
    ) -> None:
        super().__init__(path, life, inode)

    @classmethod
    def child(cls, name: str) -> type[Node] | None:
        # The group coordinator's internal topic is not shown, as Kafka hides it.
        if name == names.MOUNT_STATE:
            return MountState
        return None if name in INTERNAL_TOPICS else Topic

    def entries(self, view: View) -> list[str]:
        view.topics_changed()  # once per listing: topics made by the Kafka face
        return [names.MOUNT_STATE, *(t for t in view.topics() if t not in INTERNAL_TOPICS)]

    async def mkdir(
        self, view: View, name: str, partitions: int, mode: int, caller: Caller
    ) -> None:
        """A topic, owned by the user who made it with ``mode`` (kept in DATA), its
        files made in a worker thread. An internal topic's name is no topic's here
        (lookups say ENOENT, whether it exists or not): EINVAL, as Kafka refuses to
        create one (INVALID_REQUEST)."""
        if name in INTERNAL_TOPICS:
            raise fail(errno.EINVAL)
        if name == names.MOUNT_STATE:
            raise fail(errno.EEXIST)  # the mount's own file (a topic of that name: Kafka only)
        owner = new_owner(caller, mode, view.options)
        try:
            await make(view.store, view.store.begin_topic(name, partitions, owner=owner))
        finally:
            view.topics_changed()
        view.lives.born(name)

    async def rmdir(self, view: View, name: str, caller: Caller) -> None:
        """Delete topic ``name`` as POSIX removes a directory: the caller needs
        write and search permission here, and with the sticky bit set must own
        this directory or the topic (the kernel checks the same with
        ``default_permissions``). A topic holding records is a non-empty
        directory: only its owner or root may delete it whole (ENOTEMPTY for
        anyone else). Its directories are removed in a worker thread."""
        if name in INTERNAL_TOPICS or view.partitions(name) is None:
            raise fail(errno.ENOENT)  # an internal topic is not shown, nor deleted, here
        refused = may_delete(
            caller, view.root_owner(), view.topic_owner(name), holds_records(view.store, name)
        )
        if refused is not None:  # the listener's DeleteTopics asks the same (core/access.py)
            raise fail(getattr(errno, refused.value))
        try:
            remove = view.store.begin_deletion(name)
        finally:
            view.topics_changed()  # a topic that failed to delete stays, with its owner
        view.forget_topic(name, by_rmdir=True)
        await trio.to_thread.run_sync(remove)

    def xattrs(self, view: View) -> dict[str, bytes]:
        """The daemon's pid, DATA, the mount's health with why, and how far its
        recovery at the start went (`mount_state`)."""
        state = mount_state(view)
        return {
            names.PID_XATTR: str(state["pid"]).encode(),
            names.DATA_XATTR: os.fsencode(state["data"]),
            names.HEALTH_XATTR: state["health"].encode(),
            names.FAILURES_XATTR: json.dumps(state["failures"], sort_keys=True).encode(),
            names.RECOVERY_XATTR: json.dumps(state["recovery"], sort_keys=True).encode(),
        }


class MountState(Node):
    """``MNT/.state``: the mount's own state as a JSON line, what the root's
    extended attributes tell: read by scripts and monitoring that cannot read
    extended attributes, the recovery's progress while it goes included. Its
    name keeps it out of ``ls`` and shadows a topic ``.state`` (reachable over
    Kafka only)."""

    __slots__ = ()
    shows = "mount"

    def __init__(self, path: tuple[str, ...], life: TopicLife | None = None, inode: int = 0):
        super().__init__(path, None, inode)  # the mount's, not a topic's

    @classmethod
    def placed(cls, view: View, path: tuple[str, ...]) -> None:
        """Always there."""

    def stat(self, view: View) -> Stat:
        return Stat(REGULAR, len(mount_state_text(view)), time.time_ns(), timeout=0)

    def opened(self, view: View, flags: int) -> OpenFile:
        return SnapshotFile(mount_state_text(view))


def mount_state(view: View) -> dict:
    """``{"pid", "data", "health", "failures", "recovery"}``: health is ``ok``,
    ``degraded`` (a flush or the checkpoints failed), ``failed`` (a partition is
    offline) or ``recovering``; failures map what failed to why."""
    store = view.store
    if not view.is_ready():
        health, failures = "recovering", {}
    else:
        offline = store.failures()
        failures = dict(offline) | store.flush_failures()
        if store.checkpoint_failure:
            failures["checkpoints"] = f"writing failed: {store.checkpoint_failure}"
        health = "failed" if offline else "degraded" if failures else "ok"
    return {
        "pid": os.getpid(),
        "data": os.path.abspath(store.path),
        "health": health,
        "failures": failures,
        "recovery": view.recovery(),
    }


def mount_state_text(view: View) -> bytes:
    return (json.dumps(mount_state(view), sort_keys=True) + "\n").encode()


def node_class(path: tuple[str, ...]) -> type[Node] | None:
    """The kind of node ``path`` names, from its shape alone (None: no such node)."""
    cls: type[Node] | None = Root
    for name in path:
        cls = cls.child(name)
        if cls is None:
            return None
    return cls


def resolve(view: View, path: tuple[str, ...]) -> Node:
    """The node at ``path`` if it exists in the store now; ENOENT if not. A path the kernel
    knows keeps its node (and inode) unless it is a link whose target moved (`Link.moved`);
    a new one gets an inode once it is found to exist."""
    cls = node_class(path)
    if cls is None:
        raise fail(errno.ENOENT)
    cls.placed(view, path)
    node = view.inodes.at(path)  # the root is always there: ``path`` names a topic's node
    if node is None or (isinstance(node, Link) and node.moved(view)):
        node = cls(path, view.lives.life(path[0]), view.inodes.number())
        node.refresh(view)
    elif not isinstance(node, Link):  # a link the kernel knows was refreshed by `moved`
        node.refresh(view)
    return view.inodes.add(node)
