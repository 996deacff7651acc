"""Kafka's bounds on a producer's record timestamps: with ``message.timestamp.type``
CreateTime, every record's timestamp (but "none", -1) must lie within
``message.timestamp.before.max.ms`` before and ``message.timestamp.after.max.ms``
after the broker's clock at the append, else the whole append is refused with
INVALID_TIMESTAMP, as Kafka's ``LogValidator`` refuses it. LogAppendTime topics
stamp their own time and are not checked.

They apply to batches a producer built (Produce, ``append.batches``, logfs's
Producer and the Spark sink), as Kafka applies them to its clients' batches;
the mount's lines and the Python API's ``Log.append`` carry the daemon's own
time or the caller's explicit one and are not checked. The ahead bound reads
each batch's largest timestamp; the behind one, off by default, decodes the
records when set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config import LONG_MAX, TopicConfig
from ..errors import InvalidTimestampError
from ..format import BatchInfo, decode_records
from ..format.batching import BatchRun

NO_TIMESTAMP = -1


def check_timestamps(
    config: TopicConfig, encoded: Sequence[tuple[bytes | memoryview, BatchInfo]], now: int
) -> None:
    """Refuse the batches if a record's timestamp is out of the topic's bounds.

    Raises:
        InvalidTimestampError: naming the first record out of range.
    """
    if config.message_timestamp_type != "CreateTime":
        return
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    for batch, info in encoded:
        if info.max_timestamp != NO_TIMESTAMP and info.max_timestamp - now > after:
            _refuse(info.max_timestamp, info.last_offset, now, before, after)
        if before < LONG_MAX:
            for record in decode_records(batch):
                if record.timestamp != NO_TIMESTAMP and now - record.timestamp > before:
                    _refuse(record.timestamp, record.offset, now, before, after)


def check_run_timestamps(config: TopicConfig, run: BatchRun, now: int) -> None:
    """`check_timestamps` of a `BatchRun`: the ahead bound over its arrays at
    once; the behind one, which decodes the records, batch by batch."""
    if config.message_timestamp_type != "CreateTime":
        return
    if config.message_timestamp_before_max_ms < LONG_MAX:
        check_timestamps(config, run.pairs(), now)
        return
    times = run.max_timestamps
    ahead = np.flatnonzero(
        (times != NO_TIMESTAMP) & (times - now > config.message_timestamp_after_max_ms)
    )
    if len(ahead):
        i = int(ahead[0])
        _refuse(
            int(times[i]), int(run.last_offsets[i]), now,
            LONG_MAX, config.message_timestamp_after_max_ms,
        )  # fmt: skip


def _refuse(timestamp: int, offset: int, now: int, before: int, after: int) -> None:
    low = "any time" if before == LONG_MAX else str(now - before)
    raise InvalidTimestampError(
        f"Timestamp {timestamp} of message with offset {offset} is out of range. The "
        f"timestamp should be within [{low}, {now + after}]"
    )
