"""The FUSE face of a store: Operations over the tree of nodes, the open files,
framing, and `FuseMount`, the mount a daemon (logfs/daemon) builds and runs.

Imports what core's rooms and the groups room export; never another face."""

from . import fuseinit  # noqa: F401  (before anything imports pyfuse3: see fuseinit.py)
from .lives import Ownership
from .operations import Operations
from .session import FuseMount

__all__ = ["FuseMount", "Operations", "Ownership"]
