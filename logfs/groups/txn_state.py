"""A transactional id's state as the transaction coordinator holds it (`Txn`),
the producer ids it hands out (`ProducerIds`), and its refusals
(`TransactionError`, carrying Kafka's error code as `GroupError` does)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..core.errors import KafkaCode
from .state import GroupError
from .txn_log import EMPTY, STATUS_NAMES, StoredTxn

TopicPartition = tuple[str, int]


class TransactionError(GroupError):
    """A transactional request refused, with Kafka's code and why."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(code)
        self.message = message or KafkaCode(code).name


@dataclass
class Txn:
    """A transactional id's state as the coordinator holds it."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    status: int = EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    unmarked: set[TopicPartition] = field(default_factory=set)  # markers still to write

    def stored(self) -> StoredTxn:
        return StoredTxn(
            self.producer_id, self.epoch, self.timeout_ms, self.status,
            tuple(sorted(self.partitions)), self.last_update_ms, self.start_ms,
        )  # fmt: skip

    @property
    def state_name(self) -> str:
        return STATUS_NAMES.get(self.status, "Unknown")


class ProducerIds:
    """Producer ids handed out, unique across restarts without a counter on disk:
    each is at least the current time in milliseconds times 256, and above every
    id ``__transaction_state`` holds."""

    def __init__(self) -> None:
        self.last = 0

    def new_id(self) -> int:
        self.last = max(self.last + 1, int(time.time() * 1000) << 8)
        return self.last

    def seen(self, producer_id: int) -> None:
        self.last = max(self.last, producer_id)
