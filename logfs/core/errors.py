"""One exception hierarchy for the store.

Every error a user can cause or meet derives from `LogfsError`. The FUSE layer
maps these classes to errnos in one table and the CLI prints their message on
one line; nothing else needs to know about them.
"""

import errno


class LogfsError(Exception):
    """Base class of every error logfs raises on purpose."""


class CorruptRecordError(LogfsError):
    """A record batch failed validation (bad CRC, bad length, bad magic...)."""


class CorruptIndexError(LogfsError):
    """An index file is inconsistent with its log; indexes are rebuildable."""


class OffsetOutOfRangeError(LogfsError):
    """An offset outside [log start offset, next offset)."""


class InvalidTopicError(LogfsError):
    """A topic name that breaks Kafka's naming rules."""


class UnknownTopicError(LogfsError):
    """A topic or partition that does not exist."""


class TopicExistsError(LogfsError):
    """A topic that already exists was created again."""


class InvalidConfigError(LogfsError):
    """An unknown configuration key or a value out of range."""


class RecordTooLargeError(LogfsError):
    """A record or batch larger than max.message.bytes."""


class DataDirBusyError(LogfsError):
    """The data directory's writer lock is held by another process (a mount or
    a writer), like a Kafka log dir that belongs to one broker."""


class InvalidRecordError(LogfsError):
    """A record the topic cannot take: one without a key on a compacted topic
    (Kafka's InvalidRecordException)."""


class ReadOnlyError(LogfsError):
    """A write to a store opened read-only."""


class UnsupportedCodecError(LogfsError):
    """A compression codec that is not known or not installed."""


class InvalidBatchError(LogfsError):
    """A batch offered for appending that Kafka's broker would refuse (its
    LogValidator): bad framing, magic, CRC, offsets or records, or a control
    or transactional batch."""


class BatchTooLargeError(InvalidBatchError, RecordTooLargeError):
    """An offered batch larger than max.message.bytes: invalid as a batch (the
    mount's ``append.batches`` answers EINVAL) and Kafka's
    RecordTooLargeException to callers of the store."""


class LogFailedError(LogfsError):
    """A partition taken offline by an I/O error on its files, as Kafka takes a
    log dir offline (its KafkaStorageException): appends, fsyncs and reads at
    or past its recovery point fail until it is recovered (a remount, or
    ``logfs check --repair``). See docs/reliability.md."""


class PartitionLimitError(LogfsError):
    """Creating the partitions asked for would pass a limit on partitions per
    topic or per data directory (topics.py, `Limits`); nothing was created.
    The mount answers ENOSPC."""


def describe(error: OSError) -> str:
    """An OSError as ``EIO (Input/output error)``."""
    return f"{errno.errorcode.get(error.errno or 0, 'error')} ({error.strerror or error})"
