"""The FUSE face of a store: Operations, the tree, per-open-file state, framing,
the background flusher and the daemon that wires them (`daemon`)."""
