"""The transaction coordinator (KIP-98) on one node: transactional ids, their
producer ids and epochs, and the two-phase end of a transaction.

A transactional id moves through Kafka's states: Empty (no transaction), Ongoing
(partitions added), PrepareCommit or PrepareAbort (the decision is in
``__transaction_state``), CompleteCommit or CompleteAbort (a marker is in every
partition). `init_producer_id` gives the id its producer id and a new epoch, which
fences any older producer of the id (a zombie): an older epoch gets
PRODUCER_FENCED here and INVALID_PRODUCER_EPOCH from a partition, and a
transaction it left open is aborted first.

Crash protocol, Kafka's: ending a transaction writes Prepare* to
``__transaction_state`` (txn_log.py) before any marker; then a marker to each
partition (`Log.append_marker`; in ``__consumer_offsets`` it makes the
transaction's offsets take effect: txn_offsets.py); then Complete*. At start
(`load`) every id is read back; one left in Prepare* gets its markers written
again (a marker written twice is harmless: the second ends nothing) and completes;
an Ongoing one is aborted when its timeout passes, measured from its start.
A marker that cannot be written (its partition is offline) is retried by the
sweep; the transaction stays in Prepare* meanwhile, and the partition's last stable
offset waits.

Bounds: timeouts at most ``transaction.max.timeout.ms`` (15 minutes, Kafka's);
an id idle for ``transactional.id.expiration.ms`` (7 days) is forgotten
(tombstoned); a transaction takes at most `MAX_PARTITIONS` partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from ..core.config import CONSUMER_OFFSETS, INTERNAL_TOPICS, now_ms
from ..core.errors import KafkaCode, LogfsError, UnknownTopicError, kafka_code_of
from ..core.log import Store
from . import txn_log
from .consumer_offsets import ensure_topic
from .store import GroupStore
from .txn_log import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
)
from .txn_offsets import TxnOffsets
from .txn_state import ProducerIds, TransactionError, Txn

logger = logging.getLogger(__name__)

MAX_TIMEOUT_MS = 15 * 60 * 1000  # Kafka's transaction.max.timeout.ms
ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's transactional.id.expiration.ms
MAX_EPOCH = (1 << 15) - 2  # an epoch past this takes a new producer id (Kafka's rule)
MAX_PARTITIONS = 10_000
SWEEP_SECONDS = 1.0

TopicPartition = tuple[str, int]


class TransactionCoordinator:
    """Transactions over the store (module docstring); its offsets through the
    group coordinator's `GroupStore`.

    Args:
        store: the data directory's store.
        groups: the group coordinator (its committed offsets).
        ids: the producer ids the listener hands out, idempotent producers' too.
        clock: wall-clock milliseconds.
        max_timeout_ms: ``transaction.max.timeout.ms``.
    """

    def __init__(
        self,
        store: Store,
        groups: GroupStore,
        ids: ProducerIds | None = None,
        clock: Callable[[], int] = now_ms,
        max_timeout_ms: int = MAX_TIMEOUT_MS,
        id_expiration_ms: int = ID_EXPIRATION_MS,
    ) -> None:
        self.store = store
        self.ids = ids or ProducerIds()
        self.clock = clock
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.offsets = TxnOffsets(groups)
        self.txns: dict[str, Txn] = {}
        self.by_producer: dict[int, Txn] = {}
        self.loaded = False

    # ------------------------------------------------------------ loading, writing

    def load(self) -> None:
        """Read ``__transaction_state`` once, and finish what a stop left prepared."""
        if self.loaded:
            return
        self.loaded = True
        for txn_id, s in txn_log.load(self.store).items():
            txn = Txn(txn_id, s.producer_id, s.producer_epoch, s.timeout_ms, s.status,
                      set(s.partitions), s.start_ms, s.last_update_ms)  # fmt: skip
            self.txns[txn_id] = txn
            self.by_producer[txn.producer_id] = txn
            self.ids.seen(txn.producer_id)
        self.offsets.load()
        for txn in list(self.txns.values()):
            if txn.status in (PREPARE_COMMIT, PREPARE_ABORT):
                logger.info("transaction %r was prepared: completing it", txn.transactional_id)
                txn.unmarked = set(txn.partitions)
                self._finish(txn)
        if self.txns:
            logger.info("loaded %d transactional ids", len(self.txns))

    def _write(self, txn: Txn, status: int) -> None:
        """Write ``txn`` in ``status`` to the log, then take it (nothing changes
        if the write fails).

        Raises:
            LogfsError, OSError: the store refused the write.
        """
        now = self.clock()
        before = (txn.status, txn.last_update_ms)
        txn.status, txn.last_update_ms = status, now
        try:
            txn_log.append(self.store, [(txn.transactional_id, txn.stored())])
        except BaseException:
            txn.status, txn.last_update_ms = before
            raise

    # ------------------------------------------------------------ requests

    def _known(self, txn_id: str, producer_id: int, epoch: int) -> Txn:
        """The id's transaction, if ``producer_id`` and ``epoch`` are its current ones."""
        self.load()
        txn = self.txns.get(txn_id)
        if txn is None or txn.producer_id != producer_id:
            raise TransactionError(
                KafkaCode.INVALID_PRODUCER_ID_MAPPING,
                f"transactional id {txn_id!r} is not mapped to producer {producer_id}",
            )
        if epoch != txn.epoch:
            raise TransactionError(
                KafkaCode.PRODUCER_FENCED,
                f"producer {producer_id} epoch {epoch} is fenced by epoch {txn.epoch}",
            )
        return txn

    def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch).

        Raises:
            TransactionError: INVALID_TRANSACTION_TIMEOUT, PRODUCER_FENCED (a stale
                retry), or the store's failure (its code).
        """
        self.load()
        if not txn_id:
            raise TransactionError(KafkaCode.INVALID_REQUEST, "an empty transactional id")
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise TransactionError(
                KafkaCode.INVALID_TRANSACTION_TIMEOUT,
                f"transaction timeout {timeout_ms} ms is not in 1..{self.max_timeout_ms}",
            )
        txn = self.txns.get(txn_id)
        if txn is None:
            txn = Txn(txn_id, self.ids.new_id(), 0, timeout_ms)
            self._store(txn, EMPTY)
            self._remember(txn)
            return txn.producer_id, txn.epoch
        if producer_id >= 0 and (producer_id, epoch) != (txn.producer_id, txn.epoch):
            raise TransactionError(KafkaCode.PRODUCER_FENCED, "a stale InitProducerId retry")
        if txn.status in (PREPARE_COMMIT, PREPARE_ABORT):
            self._finish(txn)
            if txn.unmarked:
                raise TransactionError(KafkaCode.CONCURRENT_TRANSACTIONS, "markers pending")
        if txn.status == ONGOING:  # the previous producer's transaction: aborted, fenced
            self._abort(txn, bump=True)
        else:
            self._bump(txn)
        txn.timeout_ms = timeout_ms
        txn.partitions.clear()
        self._store(txn, EMPTY)
        return txn.producer_id, txn.epoch

    def _remember(self, txn: Txn) -> None:
        self.txns[txn.transactional_id] = txn
        self.by_producer[txn.producer_id] = txn

    def _bump(self, txn: Txn) -> None:
        """A new epoch for the id (a new producer id once epochs run out)."""
        if txn.epoch >= MAX_EPOCH:
            self.by_producer.pop(txn.producer_id, None)
            txn.producer_id, txn.epoch = self.ids.new_id(), 0
            self.by_producer[txn.producer_id] = txn
        else:
            txn.epoch += 1

    def _store(self, txn: Txn, status: int) -> None:
        try:
            self._write(txn, status)
        except (LogfsError, OSError) as e:
            raise TransactionError(kafka_code_of(e), str(e)) from None

    def add_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn: each partition's Kafka error code.

        Raises:
            TransactionError: for the whole request (an unknown id, a fenced epoch).
        """
        txn = self._known(txn_id, producer_id, epoch)
        wanted = set(partitions)
        topics = self.store.topics()
        unknown = {
            tp for tp in wanted
            if tp[0] in INTERNAL_TOPICS or not 0 <= tp[1] < topics.get(tp[0], 0)
        }  # fmt: skip
        if unknown:
            return {
                tp: KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
                if tp in unknown
                else KafkaCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
        self._add(txn, wanted)
        return dict.fromkeys(wanted, KafkaCode.NONE)

    def _add(self, txn: Txn, wanted: set[TopicPartition]) -> None:
        if txn.status in (PREPARE_COMMIT, PREPARE_ABORT):
            raise TransactionError(KafkaCode.CONCURRENT_TRANSACTIONS, "the last one is ending")
        if len(txn.partitions | wanted) > MAX_PARTITIONS:
            raise TransactionError(
                KafkaCode.INVALID_REQUEST, f"more than {MAX_PARTITIONS} partitions"
            )
        if txn.status == ONGOING and wanted <= txn.partitions:
            return
        before = (set(txn.partitions), txn.start_ms)
        if txn.status != ONGOING:
            txn.partitions.clear()
            txn.start_ms = self.clock()
        txn.partitions |= wanted
        try:
            self._store(txn, ONGOING)
        except TransactionError:
            txn.partitions, txn.start_ms = before
            raise

    def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str) -> None:
        """AddOffsetsToTxn: the transaction will commit offsets (``__consumer_offsets``)."""
        txn = self._known(txn_id, producer_id, epoch)
        if not group_id:
            raise TransactionError(KafkaCode.INVALID_GROUP_ID, "an empty group id")
        try:
            ensure_topic(self.store)  # the offsets go to __consumer_offsets
        except (LogfsError, OSError) as e:
            raise TransactionError(kafka_code_of(e), str(e)) from None
        self._add(txn, {(CONSUMER_OFFSETS, 0)})

    def txn_offset_commit(
        self,
        txn_id: str,
        producer_id: int,
        epoch: int,
        group_id: str,
        member: tuple[int, str, str | None],
        offsets: dict[TopicPartition, tuple[int, int, str]],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: each partition's Kafka error code."""
        try:
            txn = self._known(txn_id, producer_id, epoch)
        except TransactionError as e:
            return dict.fromkeys(offsets, e.kafka_code)
        if txn.status != ONGOING or (CONSUMER_OFFSETS, 0) not in txn.partitions:
            return dict.fromkeys(offsets, KafkaCode.INVALID_TXN_STATE)
        return self.offsets.commit(producer_id, epoch, group_id, member, offsets)

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """EndTxn: prepare, write the markers, complete (module docstring).

        Raises:
            TransactionError: INVALID_TXN_STATE (nothing to end, or the other
                decision already made), a fenced epoch, the store's failure.
        """
        txn = self._known(txn_id, producer_id, epoch)
        done = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        prepared = PREPARE_COMMIT if commit else PREPARE_ABORT
        if txn.status == done:  # a retry of the same decision, already carried out
            return
        if txn.status == prepared:  # a retry while markers are pending
            self._finish(txn)
            return
        if txn.status != ONGOING:
            raise TransactionError(
                KafkaCode.INVALID_TXN_STATE,
                f"cannot {'commit' if commit else 'abort'} a transaction in state {txn.state_name}",
            )
        self._store(txn, prepared)
        txn.unmarked = set(txn.partitions)
        self._finish(txn)

    def _abort(self, txn: Txn, *, bump: bool) -> None:
        """Abort ``txn`` (a timeout, or a new producer of its id), its epoch bumped
        first so that its producer is fenced."""
        if bump:
            self._bump(txn)
        self._store(txn, PREPARE_ABORT)
        txn.unmarked = set(txn.partitions)
        self._finish(txn)

    def _finish(self, txn: Txn) -> None:
        """Write the markers still to write, then Complete* once all are. Only a
        prepared transaction has anything to finish: a completed one keeps its
        decision (a retried EndTxn must not turn a commit into an abort)."""
        if txn.status not in (PREPARE_COMMIT, PREPARE_ABORT):
            return
        commit = txn.status == PREPARE_COMMIT
        for topic, partition in sorted(txn.unmarked):
            try:
                log = self.store.log(topic, partition)
                log.append_marker(txn.producer_id, txn.epoch, commit)
            except UnknownTopicError:
                pass  # the topic was deleted: nothing to end there
            except (LogfsError, OSError) as e:
                logger.warning("transaction %r: marker for %s-%d not written (%s); retried",
                               txn.transactional_id, topic, partition, e)  # fmt: skip
                continue
            if topic == CONSUMER_OFFSETS:
                self.offsets.complete(txn.producer_id, commit)
            txn.unmarked.discard((topic, partition))
        if txn.unmarked:
            return
        try:
            self._write(txn, COMPLETE_COMMIT if commit else COMPLETE_ABORT)
        except (LogfsError, OSError) as e:  # the markers are written: completed at the next load
            logger.warning("transaction %r: completion not written: %s", txn.transactional_id, e)

    # ------------------------------------------------------------ what the listener asks

    def verify(self, producer_id: int, epoch: int, topic: str, partition: int) -> int:
        """May the producer append a transactional batch to the partition? Kafka's
        error code for the Produce (NONE if it may)."""
        self.load()
        txn = self.by_producer.get(producer_id)
        if txn is None:
            return KafkaCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < txn.epoch:
            return KafkaCode.INVALID_PRODUCER_EPOCH
        if txn.status != ONGOING or (topic, partition) not in txn.partitions:
            return KafkaCode.INVALID_TXN_STATE
        return KafkaCode.NONE

    def transaction(self, txn_id: str) -> Txn | None:
        self.load()
        return self.txns.get(txn_id)

    def all_transactions(self) -> list[Txn]:
        self.load()
        return list(self.txns.values())

    # ------------------------------------------------------------ the sweep

    def expire(self) -> None:
        """Abort the transactions past their timeout, retry unwritten markers, and
        forget ids idle past ``transactional.id.expiration.ms``."""
        if not self.loaded:
            return
        now = self.clock()
        for txn in list(self.txns.values()):
            try:
                if txn.status == ONGOING and now - txn.start_ms > txn.timeout_ms:
                    logger.info("transaction %r timed out: aborting", txn.transactional_id)
                    self._abort(txn, bump=True)
                elif txn.unmarked:
                    self._finish(txn)
                elif txn.status != ONGOING and now - txn.last_update_ms > self.id_expiration_ms:
                    txn_log.append(self.store, [(txn.transactional_id, None)])
                    del self.txns[txn.transactional_id]
                    self.by_producer.pop(txn.producer_id, None)
            except (LogfsError, OSError) as e:
                logger.warning("transaction %r: %s", txn.transactional_id, e)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Load (finishing prepared transactions), then sweep every `SWEEP_SECONDS`."""
        self.load()
        task_status.started()
        while True:
            await trio.sleep(SWEEP_SECONDS)
            self.expire()
