"""The mount's tree of nodes: every path below the mount point, by the
kernel's inode number, and the state the mount's handlers share.

`View` (view.py) is the mount's state over a store and `Node` one path of
it; the directories and how a path resolves to its node (directories.py),
the files (nodes.py), a compacted topic's ``keys/`` (keyfiles.py) and a
partition's ``groups/`` (groupfiles.py); the inode table (inodes.py) and
topics as lives, with who asks and what the kernel would permit (lives.py).

Between the request layer above and the open files below: a node gives the
open file of its kind (the files room), never a FUSE handler.
"""

from .directories import Root, SegmentDir, resolve
from .lives import Caller, Ownership, TopicLife
from .view import DATA_OWNER, Node, Stat, View

__all__ = [
    "DATA_OWNER",
    "Caller",
    "Node",
    "Ownership",
    "Root",
    "SegmentDir",
    "Stat",
    "TopicLife",
    "View",
    "resolve",
]
