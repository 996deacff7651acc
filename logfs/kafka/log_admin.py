"""The partitions' logs for administrators: DeleteRecords, OffsetForLeaderEpoch
and DescribeLogDirs.

- DeleteRecords moves each partition's log start offset up to the offset
  given (-1: its end), deletes the segments wholly below it (their files go
  after ``file.delete.delay.ms``) and writes ``log-start-offset-checkpoint``
  before answering, so the new start survives a crash; the answer's low
  watermark is the log start offset. Refused for a topic whose
  ``cleanup.policy`` has no ``delete`` (POLICY_VIOLATION), past the log end
  (OFFSET_OUT_OF_RANGE), and without the topic's ownership.
- OffsetForLeaderEpoch answers from the partition's ``leader-epoch-checkpoint``
  (core/log/epochs.py): this node's one epoch, 0, ends at the log end. A
  client that believes in a later epoch gets UNKNOWN_LEADER_EPOCH, an earlier
  one FENCED_LEADER_EPOCH, as from Kafka.
- DescribeLogDirs: DATA as the one log directory, each partition's size in
  bytes (its segment files), the file system's total and usable bytes.
"""

from __future__ import annotations

import logging
import os

from ..core.errors import LogfsError
from .access import DESCRIBE, OWNER, READ, allows, require
from .codes import NO_THROTTLE, error_code
from .protocol import (
    DELETE_RECORDS,
    DESCRIBE_LOG_DIRS,
    OFFSET_FOR_LEADER_EPOCH,
    ErrorCode,
    make,
    schema,
)

logger = logging.getLogger(__name__)


def delete_records(broker, request, advertised):
    m = schema(DELETE_RECORDS, request.version)
    topics, moved = [], False
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            code, low = ErrorCode.none, -1
            try:
                require(broker, advertised, OWNER, topic.name)
                log = broker.store.log(topic.name, p.partition_index)
                before = log.log_start_offset
                low = log.delete_records(p.offset)
                moved |= low != before
            except (LogfsError, OSError) as e:
                code = error_code(e)
            partitions.append(
                make(
                    m.DeleteRecordsPartitionResult,
                    partition_index=p.partition_index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(
            make(m.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions))
        )
    if moved:
        try:
            broker.store.checkpoint()
        except OSError as e:  # the store logged it; retried at the flusher's next checkpoint
            logger.warning("DeleteRecords: the log start offsets are not checkpointed: %s", e)
    return make(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def offset_for_leader_epoch(broker, request, advertised):
    m = schema(OFFSET_FOR_LEADER_EPOCH, request.version)
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            code, epoch, end = ErrorCode.none, -1, -1
            try:
                require(broker, advertised, READ, topic.topic)
                log = broker.store.log(topic.topic, p.partition)
                current = p.current_leader_epoch
                if current > log.leader_epoch:
                    code = ErrorCode.unknown_leader_epoch
                elif 0 <= current < log.leader_epoch:
                    code = ErrorCode.fenced_leader_epoch
                else:
                    epoch, end = log.end_offset_for_epoch(p.leader_epoch)
            except (LogfsError, OSError) as e:
                code = error_code(e)
            partitions.append(
                make(
                    m.EpochEndOffset,
                    error_code=code,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end,
                )
            )
        topics.append(
            make(m.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(partitions))
        )
    return make(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def describe_log_dirs(broker, request, advertised):
    m = schema(DESCRIBE_LOG_DIRS, request.version)
    store = broker.store
    asked = request.body.topics
    if asked is None:
        wanted = {t: range(n) for t, n in store.topics().items()}
    else:
        wanted = {t.topic: t.partitions for t in asked}
    topics = []
    for name, partitions in sorted(wanted.items()):
        if not allows(broker, advertised, DESCRIBE, name):
            continue
        rows = []
        for p in partitions:
            if 0 <= p < store.topics().get(name, 0):
                rows.append(
                    make(
                        m.DescribeLogDirsPartition,
                        partition_index=p,
                        partition_size=store.log(name, p).size_bytes,
                        offset_lag=0,
                        is_future_key=False,
                    )
                )
        if rows:
            topics.append(make(m.DescribeLogDirsTopic, name=name, partitions=tuple(rows)))
    try:
        disk = os.statvfs(store.path)
        total, usable = disk.f_blocks * disk.f_frsize, disk.f_bavail * disk.f_frsize
    except OSError:
        total = usable = -1  # Kafka's "unknown"
    result = make(
        m.DescribeLogDirsResult,
        error_code=ErrorCode.none,
        log_dir=os.path.abspath(store.path),
        topics=tuple(topics),
        total_bytes=total,
        usable_bytes=usable,
    )
    return make(
        m.DescribeLogDirsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=(result,),
    )


HANDLERS = {
    DELETE_RECORDS: delete_records,
    OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
    DESCRIBE_LOG_DIRS: describe_log_dirs,
}
