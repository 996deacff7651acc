"""What every handler shares: the node's identity and Kafka's error code for
each error, read from the one table (core/errors.py)."""

from __future__ import annotations

import datetime

from ..core.errors import kafka_code_of
from .protocol import ErrorCode

NODE_ID = 0
CLUSTER_ID = "logfs"
# This node has led every partition since its creation and is never replaced: the
# leader epoch never moves (docs/kafka.md, OffsetForLeaderEpoch).
LEADER_EPOCH = 0
NO_THROTTLE = datetime.timedelta(0)


def error_code(e: BaseException) -> ErrorCode:
    """Kafka's error code for ``e`` (`kafka_code_of`: a `LogfsError`'s from the
    table, a `GroupError`'s its own, an OSError's KAFKA_STORAGE_ERROR), as kio's
    messages carry it."""
    return ErrorCode(kafka_code_of(e))
