"""Idempotent producers: InitProducerId, and the sequence checks Kafka's
broker makes per partition before appending a producer's batch.

A batch carries its producer's id, epoch and base sequence (record i has
sequence ``base + i``). Per partition and producer this keeps the epoch and
the last `KEPT` batches appended: a batch equal to one of them is a retry and
is acknowledged with the offset it got the first time, without a second
append; a batch of the current epoch must follow the last one's sequence
(else ``OUT_OF_ORDER_SEQUENCE_NUMBER``); an older epoch is fenced
(``INVALID_PRODUCER_EPOCH``); a newer epoch starts over at sequence 0.

The state is rebuilt from the log: the first time a partition sees an
idempotent batch after a start, the batch headers of its active segment are
read, so a retry of a batch appended before a restart is still recognised.
Producer ids are unique across restarts without being stored: each is at
least the current time in milliseconds times 256.
"""

from __future__ import annotations

import time
from collections import deque
from typing import NamedTuple

from ..core.errors import InvalidProducerEpochError, LogfsError, OutOfOrderSequenceError
from .access import READ, require
from .codes import NO_THROTTLE, error_code
from .protocol import DESCRIBE_PRODUCERS, INIT_PRODUCER_ID, ErrorCode, make, schema

KEPT = 5  # batches remembered per producer and partition (Kafka's in-flight maximum)
SEQUENCE_WRAP = 1 << 31
MAX_EPOCH = (1 << 15) - 1


class Appended(NamedTuple):
    first_sequence: int
    last_sequence: int
    base_offset: int
    max_timestamp: int = -1


class Producers:
    """Producer ids handed out, and each partition's producers' recent batches."""

    def __init__(self) -> None:
        self._last_id = 0
        # (topic, partition) -> (its log, producer id -> (epoch, recent batches)); kept
        # with the log object, so a partition deleted and created again (through any face:
        # the mount's rmdir too) starts afresh
        self._state: dict[tuple[str, int], tuple[object, dict[int, tuple[int, deque[Appended]]]]]
        self._state = {}

    def new_id(self) -> int:
        self._last_id = max(self._last_id + 1, int(time.time() * 1000) << 8)
        return self._last_id

    def _partition(self, log) -> dict[int, tuple[int, deque[Appended]]]:
        """The partition's producers, read back from its active segment the first time
        (after a restart, Kafka rebuilds its producer state from the log the same way)."""
        tp = (log.topic, log.partition)
        known = self._state.get(tp)
        if known is None or known[0] is not log:
            state: dict[int, tuple[int, deque[Appended]]] = {}
            start = log.active_base_offset
            if start is not None:
                for header, _ in log.raw_batches(start):
                    if header.producer_id >= 0 and not header.is_control:
                        _remember(state, header, header.base_offset)
            known = self._state[tp] = (log, state)
        return known[1]

    def check(self, log, header) -> int | None:
        """The offset a retried batch got, None for a new one to append.

        Raises:
            InvalidProducerEpochError: the batch's epoch is fenced.
            OutOfOrderSequenceError: its sequence does not follow the last one.
        """
        if header.producer_id < 0:
            return None
        known = self._partition(log).get(header.producer_id)
        if known is None:
            return None
        epoch, recent = known
        if header.producer_epoch < epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id}: epoch {header.producer_epoch} is fenced "
                f"by {epoch}",
            )
        if header.producer_epoch > epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id}: a new epoch starts at sequence 0, "
                    f"not {header.base_sequence}",
                )
            return None
        last = _last_sequence(header)
        for batch in recent:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return batch.base_offset
        expected = (recent[-1].last_sequence + 1) % SEQUENCE_WRAP if recent else 0
        if recent and header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: sequence {header.base_sequence}, "
                f"expected {expected}",
            )
        return None

    def appended(self, log, header, base_offset: int) -> None:
        if header.producer_id >= 0:
            _remember(self._partition(log), header, base_offset)

    def active(self, log) -> list[tuple[int, int, int, int]]:
        """The partition's idempotent producers: (id, epoch, last sequence, the last
        batch's largest timestamp), as DescribeProducers shows them."""
        return [
            (pid, epoch, recent[-1].last_sequence, recent[-1].max_timestamp)
            for pid, (epoch, recent) in sorted(self._partition(log).items())
            if recent
        ]

    def forget(self, topic: str) -> None:
        """A deleted topic's state (a topic created under its name starts afresh)."""
        for tp in [tp for tp in self._state if tp[0] == topic]:
            del self._state[tp]


def _last_sequence(header) -> int:
    return (header.base_sequence + header.records_count - 1) % SEQUENCE_WRAP


def _remember(state, header, base_offset: int) -> None:
    epoch, recent = state.get(header.producer_id, (header.producer_epoch, deque(maxlen=KEPT)))
    if header.producer_epoch != epoch:
        recent = deque(maxlen=KEPT)
    recent.append(
        Appended(header.base_sequence, _last_sequence(header), base_offset, header.max_timestamp)
    )
    state[header.producer_id] = (header.producer_epoch, recent)


def init_producer_id(broker, request, advertised):
    m = schema(INIT_PRODUCER_ID, request.version)
    body = request.body
    if body.transactional_id is not None:
        code, producer_id, epoch = ErrorCode.transactional_id_authorization_failed, -1, -1
    elif getattr(body, "producer_id", -1) >= 0 and body.producer_epoch < MAX_EPOCH:
        # A producer bumping its epoch after an error keeps its id (KIP-360).
        code, producer_id, epoch = ErrorCode.none, body.producer_id, body.producer_epoch + 1
    else:
        code, producer_id, epoch = ErrorCode.none, broker.producers.new_id(), 0
    return make(
        m.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def describe_producers(broker, request, advertised):
    """Each partition's idempotent producers (no transactions here: no open one)."""
    m = schema(DESCRIBE_PRODUCERS, request.version)
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partition_indexes:
            code, message, found = ErrorCode.none, None, []
            try:
                require(broker, advertised, READ, topic.name)
                found = broker.producers.active(broker.store.log(topic.name, p))
            except (LogfsError, OSError) as e:
                code, message = error_code(e), str(e).splitlines()[0] if str(e) else None
            states = tuple(
                make(
                    m.ProducerState,
                    producer_id=pid,
                    producer_epoch=epoch,
                    last_sequence=sequence,
                    last_timestamp=timestamp,
                    coordinator_epoch=-1,
                    current_txn_start_offset=-1,
                )
                for pid, epoch, sequence, timestamp in found
            )
            partitions.append(
                make(
                    m.PartitionResponse,
                    partition_index=p,
                    error_code=code,
                    error_message=message,
                    active_producers=states,
                )
            )
        topics.append(make(m.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return make(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
