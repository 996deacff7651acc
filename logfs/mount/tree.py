"""The mount's tree: node kinds by path, the inode table.

Paths are tuples of names below the mount point::

    ()                                   ROOT
    (topic,)                             TOPIC            directory
    (topic, "append" | "append.bin")     TOPIC_APPEND[_BIN]
    (topic, "config")                    CONFIG
    (topic, "keys")                      KEYS_DIR         directory (compacted topics)
    (topic, "keys", name)                KEY              a key's latest value (core/keys.py)
    (topic, "<p>")                       PARTITION        directory
    (topic, "<p>", "append" | "append.bin" | "append.batches" | "stream" | "state")
    (topic, "<p>", "offset" | "time" | "segments" | "from")   directories
    (topic, "<p>", "offset", "<n>")      OFFSET           one record's value
    (topic, "<p>", "time", "<ms>")       TIME             symlink to ../offset/<n>
    (topic, "<p>", "from", "<n>")        FROM             the records' lines from offset n on
    (topic, "<p>", "segments", name)     SEGMENT          symlink into DATA

`kind_of` answers from the path's shape alone; whether the topic, partition
or offset exists is the store's to say. Numbers must be canonical decimals
(``7``, not ``07``), so every record has exactly one path.

Inodes are handed out on lookup and dropped when the kernel forgets them, so
``offset/<n>`` files cost memory only while the kernel holds them.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import pyfuse3

if TYPE_CHECKING:
    from ..core.format import Record
    from ..core.log import FromStream

ROOT_INODE = pyfuse3.ROOT_INODE


class Kind(enum.Enum):
    ROOT = "root"
    TOPIC = "topic"
    TOPIC_APPEND = "topic append"
    TOPIC_APPEND_BIN = "topic append.bin"
    CONFIG = "config"
    PARTITION = "partition"
    APPEND = "append"
    APPEND_BIN = "append.bin"
    APPEND_BATCHES = "append.batches"
    STREAM = "stream"
    STATE = "state"
    OFFSET_DIR = "offset/"
    OFFSET = "offset"
    TIME_DIR = "time/"
    TIME = "time"
    SEGMENT_DIR = "segments/"
    SEGMENT = "segment"
    KEYS_DIR = "keys/"
    KEY = "key"
    FROM_DIR = "from/"
    FROM = "from"


DIRECTORIES = {
    Kind.ROOT,
    Kind.TOPIC,
    Kind.PARTITION,
    Kind.OFFSET_DIR,
    Kind.TIME_DIR,
    Kind.SEGMENT_DIR,
    Kind.KEYS_DIR,
    Kind.FROM_DIR,
}
# The append files and how each frames what is written (see framing.py).
FRAMINGS = {
    Kind.APPEND: "lines",
    Kind.APPEND_BIN: "frames",
    Kind.APPEND_BATCHES: "batches",
    Kind.TOPIC_APPEND: "lines",
    Kind.TOPIC_APPEND_BIN: "frames",
}
APPENDS = set(FRAMINGS)
TOPIC_APPENDS = {Kind.TOPIC_APPEND, Kind.TOPIC_APPEND_BIN}

TOPIC_CHILDREN = {
    "append": Kind.TOPIC_APPEND,
    "append.bin": Kind.TOPIC_APPEND_BIN,
    "config": Kind.CONFIG,
    "keys": Kind.KEYS_DIR,
}
PARTITION_CHILDREN = {
    "append": Kind.APPEND,
    "append.bin": Kind.APPEND_BIN,
    "append.batches": Kind.APPEND_BATCHES,
    "from": Kind.FROM_DIR,
    "offset": Kind.OFFSET_DIR,
    "segments": Kind.SEGMENT_DIR,
    "state": Kind.STATE,
    "stream": Kind.STREAM,
    "time": Kind.TIME_DIR,
}


def number(name: str) -> int | None:
    """The value of a canonical non-negative decimal, else None."""
    if not name.isascii() or not name.isdigit() or (len(name) > 1 and name[0] == "0"):
        return None
    return int(name)


def kind_of(path: tuple[str, ...]) -> Kind | None:
    """The kind of node a path names, from its shape alone (None: no such node)."""
    depth = len(path)
    if depth == 0:
        return Kind.ROOT
    if depth == 1:
        return Kind.TOPIC
    if depth == 2:
        return TOPIC_CHILDREN.get(path[1]) or (
            Kind.PARTITION if number(path[1]) is not None else None
        )
    if path[1] == "keys":
        return Kind.KEY if depth == 3 else None
    if number(path[1]) is None:
        return None
    if depth == 3:
        return PARTITION_CHILDREN.get(path[2])
    if depth == 4:
        if path[2] == "offset" and number(path[3]) is not None:
            return Kind.OFFSET
        if path[2] == "time" and number(path[3]) is not None:
            return Kind.TIME
        if path[2] == "from" and number(path[3]) is not None:
            return Kind.FROM
        if path[2] == "segments":
            return Kind.SEGMENT
    return None


class Node:
    """One inode: its path, kind, kernel lookup count and cached content."""

    __slots__ = ("inode", "path", "kind", "lookups", "content")

    def __init__(self, inode: int, path: tuple[str, ...], kind: Kind) -> None:
        self.inode = inode
        self.path = path
        self.kind = kind
        self.lookups = 0
        # What `View.resolve` found: for offset/<n> the Record, read once (records
        # are immutable); for time/<ms> and segments/<name> the symlink's target,
        # set on every resolve (a time's first offset and the segments change);
        # for keys/<k> the key's latest Record; for from/<n> its FromStream.
        self.content: Record | FromStream | str | None = None

    @property
    def topic(self) -> str:
        return self.path[0]

    @property
    def partition(self) -> int:
        return int(self.path[1])

    def __repr__(self) -> str:
        return (
            f"Node({self.inode}, /{'/'.join(self.path)}, {self.kind.name}, lookups={self.lookups})"
        )


class InodeTable:
    """Inodes by number and by path; a path keeps its inode while the kernel
    remembers it, and gets a fresh one after its topic is deleted."""

    def __init__(self) -> None:
        root = Node(ROOT_INODE, (), Kind.ROOT)
        self._nodes: dict[int, Node] = {ROOT_INODE: root}
        self._by_path: dict[tuple[str, ...], int] = {(): ROOT_INODE}
        self._next = ROOT_INODE + 1

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, inode: int) -> Node | None:
        return self._nodes.get(inode)

    def inode_of(self, path: tuple[str, ...]) -> int | None:
        """The inode the kernel knows ``path`` by, if any."""
        return self._by_path.get(path)

    def node(self, path: tuple[str, ...], kind: Kind) -> Node:
        """The node for ``path``, created if new; the caller counts the lookup."""
        inode = self._by_path.get(path)
        if inode is not None:
            return self._nodes[inode]
        node = Node(self._next, path, kind)
        self._next += 1
        self._nodes[node.inode] = node
        self._by_path[path] = node.inode
        return node

    def forget(self, inode: int, count: int) -> None:
        node = self._nodes.get(inode)
        if node is None or inode == ROOT_INODE:
            return
        node.lookups -= count
        if node.lookups <= 0:
            del self._nodes[inode]
            if self._by_path.get(node.path) == inode:
                del self._by_path[node.path]

    def unlink_prefix(self, prefix: tuple[str, ...]) -> None:
        """Forget the paths under ``prefix`` (a deleted topic): later lookups
        get new inodes, so no cached page of the old topic is ever served."""
        n = len(prefix)
        for path in [p for p in self._by_path if p[:n] == prefix and p]:
            del self._by_path[path]
