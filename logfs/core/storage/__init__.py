"""Files: a segment's ``.log``, ``.index`` and ``.timeindex`` and their removal,
the batch walker over a ``.log``, a segment's stream index, recovery of a
partition directory, the crash-safe swap of rewritten segments, and the fsync
helpers, and the budget of open descriptors. Knows nothing of topics or partitions' policies."""

from .descriptors import DESCRIPTORS, raise_nofile_limit
from .logfile import fsync_dir, segment_name, sync_fd
from .segment import LogSegment

__all__ = [
    "DESCRIPTORS",
    "LogSegment",
    "fsync_dir",
    "raise_nofile_limit",
    "segment_name",
    "sync_fd",
]
