"""The names both sides of a mount share: the daemon that serves it (logfs/mount)
and the writers beside it (`Producer`, delivery.py, ``logfs check``).

File names of a topic directory and a partition directory (docs/mount.md)::

    MNT/<topic>/append  append.bin  config  keys/<name>
    MNT/<topic>/<p>/append  append.bin  append.batches  stream  state
    MNT/<topic>/<p>/offset/<n>  time/<ms>  segments/<name>  from/<n>

Extended attributes, all under ``user.logfs.``: the mount root's ``pid``,
``data``, ``health`` and ``failures``; a record's (``offset/<n>``,
``keys/<name>``) ``offset``, ``timestamp``, ``key``, ``headers`` and
``header.<name>``, and a key's ``partition``.

Errors: `ERRORS` reads the one table of errors (core/errors.py) backwards, for
a writer that got an errno from ``append.batches`` and raises what the store
would have raised.
"""

from __future__ import annotations

from ..errors import (
    InvalidBatchError,
    ReadOnlyError,
    RecordTooLargeError,
    UnknownTopicError,
    by_errno,
)

# ---------------------------------------------------------------- file names

APPEND = "append"  # lines, as kafka-console-producer writes them
APPEND_BIN = "append.bin"  # length-prefixed binary values
APPEND_BATCHES = "append.batches"  # whole RecordBatch v2 batches (partitions only)
CONFIG = "config"
KEYS = "keys"  # compacted topics: keys/<name> is the key's latest value
STREAM = "stream"
STATE = "state"
OFFSET = "offset"
TIME = "time"
SEGMENTS = "segments"
FROM = "from"
MOUNT_STATE = ".state"  # the root: the mount's own state, what its extended attributes tell

# FUSE's max_write: the largest write() that reaches the daemon whole (one
# append), and the st_blksize the mount reports, by which tools size writes.
MAX_WRITE = 1 << 20

# ---------------------------------------------------------------- extended attributes

XATTR_PREFIX = "user.logfs."
PID_XATTR = XATTR_PREFIX + "pid"  # the root: the daemon's pid
DATA_XATTR = XATTR_PREFIX + "data"  # the root: DATA, absolute
HEALTH_XATTR = XATTR_PREFIX + "health"  # the root: ok, degraded, failed or recovering
# the root: JSON, the recovery at the start: {"partitions": n, "recovered": k, "seconds": s}
RECOVERY_XATTR = XATTR_PREFIX + "recovery"
# the root, JSON: offline partitions (and checkpoints) -> why
FAILURES_XATTR = XATTR_PREFIX + "failures"
OFFSET_XATTR = XATTR_PREFIX + "offset"
TIMESTAMP_XATTR = XATTR_PREFIX + "timestamp"
KEY_XATTR = XATTR_PREFIX + "key"
PARTITION_XATTR = XATTR_PREFIX + "partition"  # keys/<name>: the partition holding the key
HEADERS_XATTR = XATTR_PREFIX + "headers"  # JSON: [[name, value], ...]
HEADER_XATTR_PREFIX = XATTR_PREFIX + "header."  # + a header's name: its first value
GROUP_TYPE_XATTR = XATTR_PREFIX + "group.type"  # groups/<g>: classic or consumer (KIP-848)
GROUP_STATE_XATTR = XATTR_PREFIX + "group.state"  # groups/<g>: Kafka's name of its state

# ---------------------------------------------------------------- errors

# An errno of append.batches -> the error the store would have raised: the
# errors a batch can meet there, each read back by the errno the table gives it.
# (BatchTooLargeError answers EINVAL as InvalidBatchError does, and is one: the
# store's message says which.)
ERRORS = by_errno(InvalidBatchError, RecordTooLargeError, UnknownTopicError, ReadOnlyError)
