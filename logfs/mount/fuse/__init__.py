"""The mount's request layer: what the kernel's FUSE requests meet first.

`Operations` (operations.py) are the pyfuse3 handlers: resolve the inode,
hand the request to its node (the tree room) or open file (the files room),
answer with the errno of the one table (mount/errnos.py). `FuseMount`
(session.py) is the mount a daemon builds and runs: mounted, served,
stopped, unmounted. Before pyfuse3 is imported, fuseinit.py loads
``_fuseinit.c``, which asks the kernel for ``handle_killpriv_v2`` and hands
one-line write()s to ``_lines.pyx`` before pyfuse3 dispatches them.

The highest of the mount's rooms: it imports the tree's and the files'
exports; nothing in the mount imports it but the mount's ``__init__``.
"""

from . import fuseinit  # noqa: F401  (first, before pyfuse3: see fuseinit.py)
from .operations import Operations
from .session import FuseMount

__all__ = ["FuseMount", "Operations"]
