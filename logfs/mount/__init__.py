"""The FUSE face of a store: Operations, the tree, per-open-file state, framing,
the background flusher and the daemon that wires them (`daemon`)."""

from . import fuseinit  # noqa: F401  (before anything imports pyfuse3: see fuseinit.py)
