"""One exception hierarchy, and the one table of what each error answers.

Every error a user can cause or meet derives from `LogfsError`, and each class
says here, once, what it is on every face: ``errno``, the errno a client of
the mount gets (never EINTR, which makes callers retry forever, nor one of 512
and above, which hangs them), and ``kafka_code``, Kafka's error code a client
of the listener gets (`KafkaCode`, Kafka's own numbers, as its ``Errors.java``
keeps them). A subclass that says nothing answers what its first base in the
method resolution order says. The mount (``errno_for``), the listener
(``error_code``), the command line (the message, on one line) and the clients
that read an answer back (`by_errno`, `by_kafka_code`) all read this table;
a new error is a new class here and nothing else.
"""

import enum
import errno


class KafkaCode(enum.IntEnum):
    """Kafka's error codes that logfs answers or reads, by Kafka's numbers."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_NOT_AVAILABLE = 15
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128


class LogfsError(Exception):
    """Base class of every error logfs raises on purpose: an error it did not
    expect is EIO on the mount and UNKNOWN_SERVER_ERROR on the listener."""

    errno: int = errno.EIO
    kafka_code: int = KafkaCode.UNKNOWN_SERVER_ERROR


class CorruptRecordError(LogfsError):
    """A record batch failed validation (bad CRC, bad length, bad magic...)."""

    errno = errno.EIO
    kafka_code = KafkaCode.CORRUPT_MESSAGE


class CorruptIndexError(LogfsError):
    """An index file is inconsistent with its log; indexes are rebuildable."""

    errno = errno.EIO
    kafka_code = KafkaCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogfsError):
    """An offset outside [log start offset, next offset)."""

    errno = errno.ENOENT
    kafka_code = KafkaCode.OFFSET_OUT_OF_RANGE


class InvalidTopicError(LogfsError):
    """A topic name that breaks Kafka's naming rules, or an internal topic
    used as a user's topic."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_TOPIC_EXCEPTION


class UnknownTopicError(LogfsError):
    """A topic or partition that does not exist."""

    errno = errno.ENOENT
    kafka_code = KafkaCode.UNKNOWN_TOPIC_OR_PARTITION


class TopicExistsError(LogfsError):
    """A topic that already exists was created again."""

    errno = errno.EEXIST
    kafka_code = KafkaCode.TOPIC_ALREADY_EXISTS


class InvalidConfigError(LogfsError):
    """An unknown configuration key or a value out of range."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_CONFIG


class InvalidPartitionsError(InvalidConfigError):
    """A partition count a topic cannot take (no more than it has)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(InvalidConfigError):
    """A replication factor other than one: logfs keeps one replica."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_REPLICATION_FACTOR


class RecordTooLargeError(LogfsError):
    """A record or batch larger than max.message.bytes."""

    errno = errno.EMSGSIZE
    kafka_code = KafkaCode.MESSAGE_TOO_LARGE


class DataDirBusyError(LogfsError):
    """The data directory's writer lock is held by another process (a mount or
    a writer), like a Kafka log dir that belongs to one broker."""

    errno = errno.EBUSY
    kafka_code = KafkaCode.UNKNOWN_SERVER_ERROR


class InvalidRecordError(LogfsError):
    """A record the topic cannot take: one without a key on a compacted topic
    (Kafka's InvalidRecordException)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_RECORD


class ReadOnlyError(LogfsError):
    """A write to a store opened read-only."""

    errno = errno.EROFS
    kafka_code = KafkaCode.TOPIC_AUTHORIZATION_FAILED


class AccessDeniedError(LogfsError):
    """A client without the permission a request needs on a topic (the one
    decision of core/access.py: the mount's EACCES, the listener's
    TOPIC_AUTHORIZATION_FAILED)."""

    errno = errno.EACCES
    kafka_code = KafkaCode.TOPIC_AUTHORIZATION_FAILED


class ClusterAccessDeniedError(AccessDeniedError):
    """A principal without permission asked to change the broker itself."""

    errno = errno.EACCES
    kafka_code = KafkaCode.CLUSTER_AUTHORIZATION_FAILED


class InvalidRequestError(LogfsError):
    """A request Kafka's broker refuses as malformed in what it names (another
    broker's id, a resource type without settings)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_REQUEST


class NotEnoughReplicasError(LogfsError):
    """An acks=-1 produce to a topic whose min.insync.replicas this one node
    cannot meet."""

    errno = errno.EIO
    kafka_code = KafkaCode.NOT_ENOUGH_REPLICAS


class UnsupportedCodecError(LogfsError):
    """A compression codec that is not known or not installed."""

    errno = errno.EIO
    kafka_code = KafkaCode.UNKNOWN_SERVER_ERROR


class InvalidBatchError(LogfsError):
    """A batch offered for appending that Kafka's broker would refuse (its
    LogValidator): bad framing, magic, CRC, offsets or records, or a control
    or transactional batch."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.CORRUPT_MESSAGE


class InvalidTimestampError(InvalidBatchError):
    """A producer's record timestamp outside what the topic's
    message.timestamp.before.max.ms / after.max.ms allow."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_TIMESTAMP


class BatchTooLargeError(InvalidBatchError, RecordTooLargeError):
    """An offered batch larger than max.message.bytes: invalid as a batch (the
    mount's ``append.batches`` answers EINVAL) and Kafka's
    RecordTooLargeException to callers of the store and to Kafka's clients."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.MESSAGE_TOO_LARGE


class OutOfOrderSequenceError(LogfsError):
    """An idempotent producer's batch whose sequence number does not follow
    the last one appended for it (Kafka's OutOfOrderSequenceException)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogfsError):
    """An idempotent producer's batch from an epoch a newer one has fenced
    (Kafka's InvalidProducerEpochException)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_PRODUCER_EPOCH


class LogFailedError(LogfsError):
    """A partition taken offline by an I/O error on its files, as Kafka takes a
    log dir offline (its KafkaStorageException): appends, fsyncs and reads at
    or past its recovery point fail until it is recovered (a remount, or
    ``logfs check --repair``). See docs/reliability.md."""

    errno = errno.EIO
    kafka_code = KafkaCode.KAFKA_STORAGE_ERROR


class PolicyViolationError(LogfsError):
    """A request the topic's settings forbid: deleting records of a compacted
    topic (cleanup.policy without delete)."""

    errno = errno.EPERM
    kafka_code = KafkaCode.POLICY_VIOLATION


class PartitionLimitError(LogfsError):
    """Creating the partitions asked for would pass a limit on partitions per
    topic, per user or per data directory (topics.py, `Limits`); nothing was created."""

    errno = errno.ENOSPC
    kafka_code = KafkaCode.POLICY_VIOLATION


class FramingError(LogfsError):
    """Bytes written to an append file that cannot be framed into records
    (a line without the key separator, an incomplete binary frame)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_RECORD


class TooLargeError(FramingError):
    """A line or frame written to an append file larger than the topic's
    max.message.bytes."""

    errno = errno.EMSGSIZE
    kafka_code = KafkaCode.MESSAGE_TOO_LARGE


class FileTooLargeError(LogfsError):
    """A write or truncate past the size an edited file may have (a key's
    value over max.message.bytes, a topic's config over its bound): refused
    before anything is allocated."""

    errno = errno.EFBIG
    kafka_code = KafkaCode.MESSAGE_TOO_LARGE


class InvalidTxnStateError(LogfsError):
    """A request that does not fit the state of a producer's transaction: a plain
    batch from a producer with an open transaction, a transactional batch for a
    partition the transaction has not added, an EndTxn with nothing to end
    (Kafka's InvalidTxnStateException)."""

    errno = errno.EINVAL
    kafka_code = KafkaCode.INVALID_TXN_STATE


class UnsupportedTransactionError(LogfsError):
    """A transactional feature logfs does not build (two-phase commit across
    clusters, KIP-939): refused, not retriable."""

    errno = errno.EOPNOTSUPP
    kafka_code = KafkaCode.INVALID_TXN_STATE


def kafka_code_of(e: BaseException) -> int:
    """Kafka's error code for ``e``: a `LogfsError`'s from the table; an OSError
    is the partition's storage failing (KAFKA_STORAGE_ERROR, as Kafka answers
    for a log dir's I/O errors); anything else UNKNOWN_SERVER_ERROR."""
    if isinstance(e, LogfsError):
        return e.kafka_code
    if isinstance(e, OSError):
        return KafkaCode.KAFKA_STORAGE_ERROR
    return KafkaCode.UNKNOWN_SERVER_ERROR


def _reading(attribute: str, classes: tuple[type[LogfsError], ...]) -> dict[int, type[LogfsError]]:
    read: dict[int, type[LogfsError]] = {}
    for cls in classes:
        code = getattr(cls, attribute)
        if code in read:
            raise ValueError(f"{cls.__name__} and {read[code].__name__} both answer {code}")
        read[code] = cls
    return read


def by_errno(*classes: type[LogfsError]) -> dict[int, type[LogfsError]]:
    """The table read backwards for a client that got an errno: errno -> the
    one of ``classes`` (the errors the request it made can meet) that answers it.

    Raises:
        ValueError: two of ``classes`` answer the same errno.
    """
    return _reading("errno", classes)


def by_kafka_code(*classes: type[LogfsError]) -> dict[int, type[LogfsError]]:
    """The table read backwards for a client that got Kafka's error code: code
    -> the one of ``classes`` that answers it.

    Raises:
        ValueError: two of ``classes`` answer the same code.
    """
    return _reading("kafka_code", classes)


def describe(error: OSError) -> str:
    """An OSError as ``EIO (Input/output error)``."""
    return f"{errno.errorcode.get(error.errno or 0, 'error')} ({error.strerror or error})"
