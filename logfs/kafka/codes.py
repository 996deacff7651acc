"""What every handler shares: the node's identity and Kafka's error code for
each logfs error."""

from __future__ import annotations

import datetime

from ..core.errors import (
    BatchTooLargeError,
    CorruptRecordError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    LogFailedError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordTooLargeError,
    TopicExistsError,
    UnknownTopicError,
)
from .access import AccessDenied
from .protocol import ErrorCode

NODE_ID = 0
CLUSTER_ID = "logfs"
NO_THROTTLE = datetime.timedelta(0)


def error_code(e: Exception) -> ErrorCode:
    """Kafka's error code for a logfs error."""
    if isinstance(e, BatchTooLargeError | RecordTooLargeError):
        return ErrorCode.message_too_large
    if isinstance(e, CorruptRecordError | InvalidBatchError):
        return ErrorCode.corrupt_message  # as Kafka's LogValidator: CRC, framing, counts
    if isinstance(e, InvalidRecordError):
        return ErrorCode.invalid_record  # a keyless record for a compacted topic
    if isinstance(e, UnknownTopicError):
        return ErrorCode.unknown_topic_or_partition
    if isinstance(e, OffsetOutOfRangeError):
        return ErrorCode.offset_out_of_range
    if isinstance(e, TopicExistsError):
        return ErrorCode.topic_already_exists
    if isinstance(e, InvalidTopicError):
        return ErrorCode.invalid_topic_exception
    if isinstance(e, InvalidConfigError):
        return ErrorCode.invalid_config
    if isinstance(e, ReadOnlyError | AccessDenied):
        return ErrorCode.topic_authorization_failed
    if isinstance(e, LogFailedError | OSError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error
