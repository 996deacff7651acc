"""Produce: each partition's RecordBatch v2 batches checked and appended as
``append.batches`` does (`Log.append_batches`: Kafka's broker checks, every
batch of a partition checked before any is appended), one error code per
partition.

acks=0 is never answered (Kafka's rule); acks=1 and acks=-1 are answered once
the batches are in the segment file (this node is the whole in-sync replica
set), so a daemon killed after the answer loses nothing it acknowledged.
"""

from __future__ import annotations

from ..core.errors import InvalidBatchError, LogfsError
from ..core.format import decode_records, read_header, split_batches
from .access import WRITE, require
from .codes import NO_THROTTLE, error_code
from .group_log import INTERNAL_TOPICS
from .producers import SequenceError
from .protocol import PRODUCE, ErrorCode, make, schema


def _keyless(batches) -> bool:
    """Whether a record of ``batches`` has no key (False if they do not decode)."""
    try:
        return any(r.key is None for b in batches for r in decode_records(b, read_header(b)))
    except (LogfsError, ValueError):
        return False


def _append(
    broker, client, topic: str, partition: int, records: bytes | None
) -> tuple[int, int, str | None]:
    """(error code, base offset, message) of one partition's append. Retried
    batches of an idempotent producer are acknowledged, not appended again."""
    log, batches = None, []
    if topic in INTERNAL_TOPICS:  # only the group coordinator writes there (Kafka's rule)
        return ErrorCode.invalid_topic_exception, -1, f"cannot append to internal topic {topic}"
    try:
        require(broker, client, WRITE, topic)
        log = broker.store.log(topic, partition)
        if not records:
            raise InvalidBatchError("no record batch")
        batches, used = split_batches(records)
        if used != len(records):
            raise InvalidBatchError(f"{len(records) - used} bytes after the last whole batch")
        headers = [read_header(batch) for batch in batches]
        known = [broker.producers.check(log, header) for header in headers]
        fresh = [(b, h) for b, h, k in zip(batches, headers, known, strict=True) if k is None]
        base = log.append_batches([b for b, _ in fresh]) if fresh else None
        offset = base
        for _, header in fresh:
            broker.producers.appended(log, header, offset)
            offset += header.last_offset_delta + 1
        return ErrorCode.none, base if known[0] is None else known[0], None
    except SequenceError as e:
        return e.code, -1, str(e)
    except InvalidBatchError as e:
        code = error_code(e)
        if log is not None and log.config.compact and _keyless(batches):
            code = ErrorCode.invalid_record  # Kafka's answer to a keyless compacted record
        return code, -1, str(e).splitlines()[0]
    except (LogfsError, OSError) as e:
        return error_code(e), -1, str(e).splitlines()[0] if str(e) else None


def produce(broker, request, advertised):
    body = request.body
    m = schema(PRODUCE, request.version)
    store = broker.store
    topics = []
    appended = False
    for topic in body.topic_data:
        partitions = []
        for data in topic.partition_data:
            code, base, message = _append(broker, advertised, topic.name, data.index, data.records)
            appended |= code == ErrorCode.none
            log_start = -1
            if code == ErrorCode.none:
                log_start = store.log(topic.name, data.index).log_start_offset
            partitions.append(
                make(
                    m.PartitionProduceResponse,
                    index=data.index,
                    error_code=code,
                    base_offset=base,
                    log_append_time=None,
                    log_start_offset=log_start,
                    record_errors=(),
                    error_message=message,
                )
            )
        topics.append(
            make(m.TopicProduceResponse, name=topic.name, partition_responses=tuple(partitions))
        )
    if appended:
        broker.notify_appended()
    if body.acks == 0:
        return None
    return make(m.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)
