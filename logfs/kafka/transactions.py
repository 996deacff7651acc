"""Transactions (KIP-98) on the listener: AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, DescribeTransactions, ListTransactions and
DescribeProducers, translated to the groups room's `TransactionCoordinator`
(`Broker.transactions`) and the partitions' producer state, and their answers
back. InitProducerId is producers.py's; FindCoordinator group_api.py's.

Clients of versions before PRODUCER_FENCED existed get INVALID_PRODUCER_EPOCH
instead, as Kafka's broker answers them (`FENCED_BEFORE`).
"""

from __future__ import annotations

import datetime

from ..core.access import GroupOp
from ..core.errors import KafkaCode, LogfsError
from ..groups import TransactionError
from .access import READ, WRITE, allows, group_allows, require
from .codes import NO_THROTTLE, error_code
from .protocol import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    ErrorCode,
    make,
    schema,
)

# The first version of each request whose clients know PRODUCER_FENCED.
FENCED_BEFORE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


def answer_code(request, code: int) -> ErrorCode:
    """``code`` as this request's version can read it."""
    if code == KafkaCode.PRODUCER_FENCED and request.version < FENCED_BEFORE.get(
        request.api_key, 1 << 15
    ):
        code = KafkaCode.INVALID_PRODUCER_EPOCH
    return ErrorCode(code)


def add_partitions_to_txn(broker, request, advertised):
    m = schema(ADD_PARTITIONS_TO_TXN, request.version)
    body = request.body
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    try:
        for topic in {t for t, _ in wanted}:
            require(broker, advertised, WRITE, topic)
        codes = broker.transactions.add_partitions(
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            wanted,
        )
    except (TransactionError, LogfsError) as e:
        codes = dict.fromkeys(wanted, error_code(e))
    results = []
    for topic in body.v3_and_below_topics:
        partitions = tuple(
            make(
                m.AddPartitionsToTxnPartitionResult,
                partition_index=p,
                partition_error_code=answer_code(request, codes[(topic.name, p)]),
            )
            for p in topic.partitions
        )
        results.append(
            make(m.AddPartitionsToTxnTopicResult, name=topic.name, results_by_partition=partitions)
        )
    return make(
        m.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_topic_v3_and_below=tuple(results),
    )


def add_offsets_to_txn(broker, request, advertised):
    m = schema(ADD_OFFSETS_TO_TXN, request.version)
    body = request.body
    code = ErrorCode.none
    if not group_allows(broker, advertised, GroupOp.JOIN, body.group_id):
        code = ErrorCode.group_authorization_failed  # its offsets are the group's commits
    try:
        if code == ErrorCode.none:
            broker.transactions.add_offsets(
                body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
            )
    except TransactionError as e:
        code = answer_code(request, e.kafka_code)
    return make(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=code)


def txn_offset_commit(broker, request, advertised):
    m = schema(TXN_OFFSET_COMMIT, request.version)
    body = request.body
    wanted = {
        (t.name, p.partition_index): (
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata or "",
        )
        for t in body.topics
        for p in t.partitions
    }
    member = (
        getattr(body, "generation_id", -1),
        getattr(body, "member_id", ""),
        getattr(body, "group_instance_id", None),
    )
    refused = {tp for tp in wanted if not allows(broker, advertised, READ, tp[0])}
    if not group_allows(broker, advertised, GroupOp.JOIN, body.group_id):
        codes = dict.fromkeys(wanted, KafkaCode.GROUP_AUTHORIZATION_FAILED)
    elif refused:  # committing is reading the topics (access.py)
        codes = dict.fromkeys(wanted, KafkaCode.TOPIC_AUTHORIZATION_FAILED)
    else:
        codes = broker.transactions.txn_offset_commit(
            body.transactional_id, body.producer_id, body.producer_epoch, body.group_id,
            member, wanted,
        )  # fmt: skip
    topics = tuple(
        make(
            m.TxnOffsetCommitResponseTopic,
            name=t.name,
            partitions=tuple(
                make(
                    m.TxnOffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=_offset_code(codes[(t.name, p.partition_index)]),
                )
                for p in t.partitions
            ),
        )
        for t in body.topics
    )
    return make(m.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def _offset_code(code: int) -> ErrorCode:
    """A fenced producer's offsets are refused as a partition refuses its batches."""
    fenced = code == KafkaCode.PRODUCER_FENCED
    return ErrorCode(KafkaCode.INVALID_PRODUCER_EPOCH if fenced else code)


def end_txn(broker, request, advertised):
    m = schema(END_TXN, request.version)
    body = request.body
    code = ErrorCode.none
    try:
        broker.transactions.end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed
        )
    except TransactionError as e:
        code = answer_code(request, e.kafka_code)
    if code == ErrorCode.none:
        broker.notify_appended()  # read_committed fetchers waiting for the LSO
    return make(
        m.EndTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=body.producer_id,
        producer_epoch=body.producer_epoch,
    )


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def describe_transactions(broker, request, advertised):
    m = schema(DESCRIBE_TRANSACTIONS, request.version)
    states = []
    for txn_id in request.body.transactional_ids:
        txn = broker.transactions.transaction(txn_id)
        if txn is None:
            states.append(
                make(
                    m.TransactionState,
                    error_code=ErrorCode.transactional_id_not_found,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout=_ms(0),
                    transaction_start_time=_time(0),  # Kafka's default for an unknown id
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(p)
        states.append(
            make(
                m.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=txn_id,
                transaction_state=txn.state_name,
                transaction_timeout=_ms(txn.timeout_ms),
                transaction_start_time=_time(txn.start_ms),
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                topics=tuple(
                    make(m.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )  # fmt: skip
        )
    return make(
        m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(states)
    )


def _time(ms: int) -> datetime.datetime:
    """A timestamp as kio writes int64 milliseconds (-1: none, as Kafka writes an
    Empty transaction's start)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def list_transactions(broker, request, advertised):
    m = schema(LIST_TRANSACTIONS, request.version)
    body = request.body
    known = set(_STATE_NAMES)
    wanted = set(body.state_filters)
    producers = set(body.producer_id_filters)
    duration = getattr(body, "duration_filter", -1)
    now = broker.transactions.clock()
    listed = []
    for txn in broker.transactions.all_transactions():
        if wanted and txn.state_name not in wanted:
            continue
        if producers and txn.producer_id not in producers:
            continue
        if duration >= 0 and (txn.state_name != "Ongoing" or now - txn.start_ms < duration):
            continue
        listed.append(
            make(
                m.TransactionState,
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state_name,
            )
        )
    return make(
        m.ListTransactionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(sorted(wanted - known)),
        transaction_states=tuple(listed),
    )


_STATE_NAMES = (
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
    "Dead", "PrepareEpochFence",
)  # fmt: skip


def describe_producers(broker, request, advertised):
    m = schema(DESCRIBE_PRODUCERS, request.version)
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partition_indexes:
            code, message, active = ErrorCode.none, None, ()
            try:
                require(broker, advertised, READ, topic.name)
                log = broker.store.log(topic.name, p)
                active = tuple(
                    make(
                        m.ProducerState,
                        producer_id=pid,
                        producer_epoch=e.epoch,
                        last_sequence=e.last_sequence,
                        last_timestamp=e.last_timestamp,
                        coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.txn_first_offset,
                    )
                    for pid, e in sorted(log.producer_entries().items())
                )
            except (LogfsError, OSError) as e:
                code, message = error_code(e), str(e).splitlines()[0] if str(e) else None
            partitions.append(
                make(
                    m.PartitionResponse,
                    partition_index=p,
                    error_code=code,
                    error_message=message,
                    active_producers=active,
                )
            )
        topics.append(make(m.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return make(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLERS = {
    ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    TXN_OFFSET_COMMIT: txn_offset_commit,
    END_TXN: end_txn,
    DESCRIBE_TRANSACTIONS: describe_transactions,
    LIST_TRANSACTIONS: list_transactions,
    DESCRIBE_PRODUCERS: describe_producers,
}
