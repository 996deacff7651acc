"""Files: a segment's ``.log``, ``.index`` and ``.timeindex`` and their removal,
the batch walker over a ``.log``, a segment's stream index, recovery of a
partition directory, the crash-safe swap of rewritten segments, the fsync
helpers, the budget of open descriptors, the data directory's writer lock and
the modes a topic's owner gives its partition directories (ownership.py), and
the kernel's reports of changed directory entries (inotify.py) and the blocks
kept back for settings files on a full disk (reserve.py).
Knows nothing of topics or partitions' policies."""

from . import inotify, ownership
from .descriptors import DESCRIPTORS, raise_nofile_limit
from .lock import lock_data_dir
from .logfile import base_offset_of, fsync_dir, segment_name, sync_fd
from .reserve import Reserve
from .segment import LogSegment

__all__ = [
    "DESCRIPTORS",
    "LogSegment",
    "Reserve",
    "base_offset_of",
    "fsync_dir",
    "inotify",
    "lock_data_dir",
    "ownership",
    "raise_nofile_limit",
    "segment_name",
    "sync_fd",
]
