"""ListOffsets: the earliest (-2) and latest (-1) offsets, the first offset
at or after a timestamp, and the offset of the largest timestamp (-3): found,
as Kafka's broker finds it, from each segment's largest timestamp (its time
index) and one batch of the segment holding it, whatever the partition's size.

With isolation level 1 (``read_committed``) the latest offset is the last stable
offset, and a lookup by time answers the first record such a consumer sees below
it, looking at most `TIME_LOOKUP_BYTES` past the first record stamped late enough
(core/log/reads.py), then that record's offset, as Kafka's broker answers."""

from __future__ import annotations

from ..core.errors import LogfsError
from .access import READ, require
from .codes import NO_THROTTLE, error_code
from .protocol import LIST_OFFSETS, ErrorCode, make, schema

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _lookup(log, timestamp: int, committed: bool) -> tuple[int, int]:
    """(timestamp, offset) answering a ListOffsets query."""
    if timestamp == LATEST:
        return -1, log.last_stable_offset if committed else log.next_offset
    if timestamp == EARLIEST:
        return -1, log.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        return log.max_timestamp_offset()  # from each segment's books: no scan
    offset = log.offset_for_time(timestamp, committed=committed)
    if offset is None:
        return -1, -1
    return log.read(offset).timestamp, offset


def list_offsets(broker, request, advertised):
    m = schema(LIST_OFFSETS, request.version)
    committed = getattr(request.body, "isolation_level", 0) == 1
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            code, timestamp, offset = ErrorCode.none, -1, -1
            try:
                require(broker, advertised, READ, topic.name)
                timestamp, offset = _lookup(
                    broker.store.log(topic.name, p.partition_index), p.timestamp, committed
                )
            except (LogfsError, OSError) as e:
                code = error_code(e)
            partitions.append(
                make(
                    m.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=0,
                )
            )
        topics.append(
            make(m.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions))
        )
    return make(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
