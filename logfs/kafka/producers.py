"""InitProducerId: a producer id and epoch for an idempotent producer, or for a
transactional one from the transaction coordinator (`Broker.transactions`).

The sequence checks of idempotent producers' batches, the duplicates of retries
and the fencing of older epochs are the partition's (core/log/producer_state.py),
kept across restarts in its snapshots, whatever face appends. Producer ids come
from the coordinator's `ProducerIds` (unique across restarts without being
stored: each at least the current time in milliseconds times 256, and above every
id ``__transaction_state`` holds).
"""

from __future__ import annotations

from ..groups import TransactionError
from .codes import NO_THROTTLE
from .protocol import INIT_PRODUCER_ID, ErrorCode, make, schema
from .transactions import answer_code

MAX_EPOCH = (1 << 15) - 1


def init_producer_id(broker, request, advertised):
    m = schema(INIT_PRODUCER_ID, request.version)
    body = request.body
    previous = getattr(body, "producer_id", -1), getattr(body, "producer_epoch", -1)
    code = ErrorCode.none
    if body.transactional_id is not None:
        timeout = int(body.transaction_timeout.total_seconds() * 1000)
        try:
            producer_id, epoch = broker.transactions.init_producer_id(
                body.transactional_id, timeout, *previous
            )
        except TransactionError as e:
            code, producer_id, epoch = answer_code(request, e.kafka_code), -1, -1
    elif previous[0] >= 0 and 0 <= previous[1] < MAX_EPOCH - 1:
        # A producer bumping its epoch after an error keeps its id (KIP-360).
        producer_id, epoch = previous[0], previous[1] + 1
    else:
        producer_id, epoch = broker.transactions.ids.new_id(), 0
    return make(
        m.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
