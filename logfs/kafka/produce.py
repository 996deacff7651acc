"""Produce: each partition's RecordBatch v2 batches checked and appended as
``append.batches`` does (`Log.append_batches`: Kafka's broker checks, every
batch of a partition checked before any is appended), one error code per
partition.

acks=0 is never answered (Kafka's rule); acks=1 and acks=-1 are answered once
the batches are in the segment file (this node is the whole in-sync replica
set), so a daemon killed after the answer loses nothing it acknowledged. With
the broker's ``acks_all_fsync`` (``-o kafka.acks.all.fsync=true``) an acks=-1
request is answered once the partitions it appended to are fsynced too, so a
power failure after the answer loses nothing it acknowledged either; the
fsyncs run in a worker thread (`Broker.sync`), never on the event loop.

The success path does no more than the append needs: the batches are cut by
their length fields and handed to the log in the request's own buffer (the
records are views of the received frame, protocol.py), which the log checks
and patches in place instead of copying; batches that carry a producer id go
through the partition's producer state (retries answered with the offset they
got, sequences and epochs checked: core/log/producer_state.py). A
transactional batch is taken only from a producer whose ongoing transaction
holds the partition (the transaction coordinator's `verify`, as Kafka's
broker verifies since KIP-890).
"""

from __future__ import annotations

import datetime

import trio

from ..core.config import INTERNAL_TOPICS
from ..core.errors import (
    InvalidBatchError,
    InvalidRecordError,
    InvalidTopicError,
    LogfsError,
    NotEnoughReplicasError,
)
from ..core.format import decode_records, read_header, split_batches, transactional
from ..groups import TransactionError
from .access import WRITE, require
from .codes import NO_THROTTLE, NODE_ID, error_code
from .protocol import PRODUCE, ErrorCode, make, schema

EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)


def _keyless(batches) -> bool:
    """Whether a record of ``batches`` has no key (False if they do not decode)."""
    try:
        return any(r.key is None for b in batches for r in decode_records(b, read_header(b)))
    except (LogfsError, ValueError):
        return False


def _append(broker, client, topic: str, partition: int, records: bytes | None, acks: int):
    """(error code, base offset, message, the log appended to or None) of one
    partition's append. Retried batches of an idempotent producer are
    acknowledged, not appended again."""
    log, batches = None, []
    try:
        if topic in INTERNAL_TOPICS:  # only the group coordinator writes there (Kafka's rule)
            raise InvalidTopicError(f"cannot append to internal topic {topic}")
        require(broker, client, WRITE, topic)
        log = broker.store.log(topic, partition)
        wanted = log.config.min_insync_replicas
        if acks == -1 and wanted > 1:  # what a cluster with this one replica in sync says
            raise NotEnoughReplicasError(
                f"The size of the current ISR Set({NODE_ID}) is insufficient to satisfy the "
                f"min.isr requirement of {wanted} for partition {topic}-{partition}"
            )
        if not records:
            raise InvalidBatchError("no record batch")
        batches, used = split_batches(records)
        if used != len(records):
            raise InvalidBatchError(f"{len(records) - used} bytes after the last whole batch")
        transactional = _verify(broker, topic, partition, batches)
        # the request's own bytes (views of the received frame, protocol.py) are
        # appended where they arrived, without a copy, when they are writable
        own = isinstance(records, memoryview) and not records.readonly
        before = log.next_offset
        base = log.append_batches(batches, records if own else None, transactional=transactional)
        if broker.metrics is not None:  # a retried batch appends nothing: counted as such
            broker.metrics.produced(topic, log.next_offset - before, used)
        return ErrorCode.none, base, None, log
    except InvalidBatchError as e:
        error: LogfsError = e
        if log is not None and log.config.compact and _keyless(batches):
            error = InvalidRecordError(str(e))  # what Kafka answers a keyless compacted record
        return error_code(error), -1, str(error).splitlines()[0], None
    except (LogfsError, OSError) as e:
        return error_code(e), -1, str(e).splitlines()[0] if str(e) else None, None


def _append_time(log, base: int) -> datetime.datetime | None:
    """The time a LogAppendTime topic stamped the batches with, as Kafka's produce
    answer carries it (None, -1 on the wire, for CreateTime topics and failed appends)."""
    if log is None or log.config.message_timestamp_type != "LogAppendTime":
        return None
    try:
        stamped = log.read(base).timestamp
    except (LogfsError, OSError):
        return None
    return EPOCH + datetime.timedelta(milliseconds=stamped)


def _verify(broker, topic: str, partition: int, batches) -> bool:
    """Whether the batches are transactional, once the coordinator says their
    producer's transaction holds the partition.

    Raises:
        TransactionError: it does not (Kafka's code: a fenced epoch, an unknown
            producer id, or a partition not added to the transaction).
    """
    if not transactional(batches):  # read no more of plain batches
        return False
    for header in map(read_header, batches):
        if header.is_transactional:
            code = broker.transactions.verify(
                header.producer_id, header.producer_epoch, topic, partition
            )
            if code:
                raise TransactionError(code)
    return True


def produce(broker, request, advertised):
    """The ProduceResponse; a coroutine giving it when the answer waits for fsyncs."""
    body = request.body
    # per topic: (name, [[index, code, base offset, message, log, append time], ...])
    answers = []
    appended = {}  # log -> its end offset once the request's batches are in it
    for topic in body.topic_data:
        partitions = []
        for data in topic.partition_data:
            code, base, message, log = _append(
                broker, advertised, topic.name, data.index, data.records, body.acks
            )
            if log is not None:
                appended[log] = log.next_offset
            partitions.append([data.index, code, base, message, log, _append_time(log, base)])
        answers.append((topic.name, partitions))
    if appended:
        broker.notify_appended()
    if body.acks == 0:
        return None
    if body.acks == -1 and broker.acks_all_fsync and appended:
        return _after_fsync(broker, request, answers, appended)
    return _response(request, answers)


async def _after_fsync(broker, request, answers, appended):
    """The response once every partition appended to is durable up to what
    this request appended; a partition whose fsync failed answers its error
    (it is offline now: `KAFKA_STORAGE_ERROR`)."""
    failed: dict[object, Exception] = {}

    async def sync(log, end: int) -> None:
        try:
            if log.recovery_point < end:  # a concurrent flush may have covered it already
                await broker.sync(log, end)
        except (LogfsError, OSError) as e:
            failed[log] = e

    async with trio.open_nursery() as nursery:
        for log, end in appended.items():
            nursery.start_soon(sync, log, end)
    for _, partitions in answers:
        for answer in partitions:
            error = failed.get(answer[4])
            if error is not None:
                answer[1:4] = error_code(error), -1, str(error).splitlines()[0] or None
    return _response(request, answers)


def _response(request, answers):
    m = schema(PRODUCE, request.version)
    topics = []
    for name, partitions in answers:
        responses = tuple(
            make(
                m.PartitionProduceResponse,
                index=index,
                error_code=code,
                base_offset=base,
                log_append_time=append_time,
                log_start_offset=-1 if log is None else log.log_start_offset,
                record_errors=(),
                error_message=message,
            )
            for index, code, base, message, log, append_time in partitions
        )
        topics.append(make(m.TopicProduceResponse, name=name, partition_responses=responses))
    return make(m.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)
