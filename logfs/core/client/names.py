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

Errors: `ERRNOS` is the one table from the store's errors to the errno a
client of the mount sees; `ERRORS` reads it backwards, for a writer that got
an errno from ``append.batches`` and raises what the store would have raised.
"""

from __future__ import annotations

import errno

from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    LogFailedError,
    LogfsError,
    OffsetOutOfRangeError,
    PartitionLimitError,
    ReadOnlyError,
    RecordTooLargeError,
    TopicExistsError,
    UnknownTopicError,
    UnsupportedCodecError,
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

# FUSE's max_write: the largest write() that reaches the daemon whole (one
# append), and the st_blksize the mount reports, by which tools size writes.
MAX_WRITE = 1 << 20

# ---------------------------------------------------------------- extended attributes

XATTR_PREFIX = "user.logfs."
PID_XATTR = XATTR_PREFIX + "pid"  # the root: the daemon's pid
DATA_XATTR = XATTR_PREFIX + "data"  # the root: DATA, absolute
HEALTH_XATTR = XATTR_PREFIX + "health"  # the root: ok, degraded, failed or recovering
# the root, JSON: offline partitions (and checkpoints) -> why
FAILURES_XATTR = XATTR_PREFIX + "failures"
OFFSET_XATTR = XATTR_PREFIX + "offset"
TIMESTAMP_XATTR = XATTR_PREFIX + "timestamp"
KEY_XATTR = XATTR_PREFIX + "key"
PARTITION_XATTR = XATTR_PREFIX + "partition"  # keys/<name>: the partition holding the key
HEADERS_XATTR = XATTR_PREFIX + "headers"  # JSON: [[name, value], ...]
HEADER_XATTR_PREFIX = XATTR_PREFIX + "header."  # + a header's name: its first value

# ---------------------------------------------------------------- errors

# The one table from store errors to errnos; the first match along the MRO wins.
ERRNOS: dict[type[BaseException], int] = {
    OffsetOutOfRangeError: errno.ENOENT,
    UnknownTopicError: errno.ENOENT,
    InvalidTopicError: errno.EINVAL,
    # BatchTooLargeError too: its MRO has InvalidBatchError before RecordTooLargeError
    InvalidBatchError: errno.EINVAL,
    InvalidRecordError: errno.EINVAL,
    InvalidConfigError: errno.EINVAL,
    TopicExistsError: errno.EEXIST,
    PartitionLimitError: errno.ENOSPC,  # a limit on partitions: nothing created
    RecordTooLargeError: errno.EMSGSIZE,
    ReadOnlyError: errno.EROFS,
    CorruptRecordError: errno.EIO,
    CorruptIndexError: errno.EIO,
    LogFailedError: errno.EIO,
    UnsupportedCodecError: errno.EIO,
    LogfsError: errno.EIO,
}

# An errno of append.batches -> the error the store would have raised (each
# maps back to its errno through ERRNOS).
ERRORS: dict[int, type[LogfsError]] = {
    errno.EINVAL: InvalidBatchError,  # BatchTooLargeError too: the store's message says which
    errno.EMSGSIZE: RecordTooLargeError,
    errno.ENOENT: UnknownTopicError,
    errno.EROFS: ReadOnlyError,
}
