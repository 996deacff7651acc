"""The FUSE face of a store, in three rooms by job: the request layer
(fuse/: the pyfuse3 handlers and `FuseMount`, the mount a daemon builds and
runs), the tree of nodes (tree/) and the open files (files/); below them
all, errnos.py, errors as the mount's clients see them.

Imports run one way, fuse -> tree -> files -> errnos, each room importing
another's exports; the mount imports what core's rooms and the groups room
export, never another face (logfs/daemon wires them)."""

from .fuse import FuseMount, Operations  # first: loads fuseinit before pyfuse3
from .tree import Ownership

__all__ = ["FuseMount", "Operations", "Ownership"]
