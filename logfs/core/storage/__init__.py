"""Files: a segment's ``.log``, ``.index`` and ``.timeindex`` and their removal,
the batch walker over a ``.log``, a segment's stream index, recovery of a
partition directory, the crash-safe swap of rewritten segments, and the fsync
helpers. Knows nothing of topics or partitions' policies."""

from .logfile import fsync_dir, segment_name, sync_fd
from .segment import LogSegment

__all__ = ["LogSegment", "fsync_dir", "segment_name", "sync_fd"]
