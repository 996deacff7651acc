"""What every handler shares: the node's identity and Kafka's error code for
each error, read from the one table (core/errors.py)."""

from __future__ import annotations

import datetime

from ..core.errors import LogfsError
from .protocol import ErrorCode

NODE_ID = 0
CLUSTER_ID = "logfs"
NO_THROTTLE = datetime.timedelta(0)


def error_code(e: BaseException) -> ErrorCode:
    """Kafka's error code for ``e``: a `LogfsError`'s from the table (a
    `GroupError` carries its own); an OSError is the partition's storage failing."""
    if isinstance(e, LogfsError):
        return ErrorCode(e.kafka_code)
    if isinstance(e, OSError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error
