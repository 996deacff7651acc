"""Offsets committed inside a transaction (TxnOffsetCommit, Kafka's
``sendOffsetsToTransaction``): written at once to ``__consumer_offsets`` as a
transactional batch of the producer's id and epoch (consumer_offsets.py), kept
pending by producer id, and given to their groups only when the transaction
commits (the COMMIT marker in ``__consumer_offsets``), never when it aborts — so a
consume-transform-produce loop's input position moves exactly with its output.

Pending offsets of a transaction still open when the daemon stopped are read back
with the groups (`GroupStore.load` keeps them here), and complete when the
transaction coordinator ends the transaction (transactions.py).
"""

from __future__ import annotations

from ..core.errors import KafkaCode, LogfsError, kafka_code_of
from . import consumer_offsets
from .consumer_offsets import Committed
from .state import GroupError
from .store import MAX_METADATA, GroupStore

TopicPartition = tuple[str, int]


class TxnOffsets:
    """The offsets of open transactions, by producer id, then group."""

    def __init__(self, groups: GroupStore) -> None:
        self.groups = groups
        self.pending: dict[int, dict[str, dict[TopicPartition, Committed]]] = {}
        self.loaded = False

    def load(self) -> None:
        """The pending offsets `__consumer_offsets` holds (read with the groups)."""
        if self.loaded:
            return
        self.loaded = True
        self.groups.load()
        for producer_id, offsets in self.groups.txn_pending.items():
            for (group_id, topic, partition), committed in offsets.items():
                by_group = self.pending.setdefault(producer_id, {}).setdefault(group_id, {})
                by_group[(topic, partition)] = committed

    def commit(
        self,
        producer_id: int,
        epoch: int,
        group_id: str,
        member: tuple[int, str, str | None],
        offsets: dict[TopicPartition, tuple[int, int, str]],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: write ``offsets`` ((topic, partition) -> (offset, leader
        epoch, metadata)) as the transaction's; each partition's Kafka error code.
        ``member``: (generation, member id, instance id); generation -1 and no
        member id commit for the group without asking who its members are (the
        requests before version 3 carry none), as Kafka's coordinator does."""
        self.load()
        generation, member_id, instance_id = member
        if not group_id:
            return dict.fromkeys(offsets, KafkaCode.INVALID_GROUP_ID)
        if generation >= 0 or member_id:
            try:
                self.groups.check_commit(
                    group_id, generation, member_id, instance_id, partitions=offsets.keys()
                )
            except GroupError as e:
                return dict.fromkeys(offsets, e.kafka_code)
        codes: dict[TopicPartition, int] = {}
        wanted: dict[TopicPartition, Committed] = {}
        now = self.groups.clock()
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if not 0 <= tp[1] < self.groups.store.topics().get(tp[0], 0):
                codes[tp] = KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > MAX_METADATA:
                codes[tp] = KafkaCode.OFFSET_METADATA_TOO_LARGE
            else:
                wanted[tp] = Committed(offset, leader_epoch, metadata, now)
        records = [
            (consumer_offsets.offset_key(group_id, t, p), consumer_offsets.offset_value(c))
            for (t, p), c in wanted.items()
        ]
        try:
            if records:
                consumer_offsets.append_transactional(
                    self.groups.store, records, producer_id, epoch, now
                )
        except (LogfsError, OSError) as e:
            codes.update(dict.fromkeys(wanted, kafka_code_of(e)))
            return codes
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(wanted)
        codes.update(dict.fromkeys(wanted, KafkaCode.NONE))
        return codes

    def complete(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended (its marker is in ``__consumer_offsets``):
        its offsets go to their groups if it committed, else nowhere."""
        self.load()
        by_group = self.pending.pop(producer_id, {})
        if commit:
            for group_id, offsets in by_group.items():
                self.groups.apply_committed(group_id, offsets)
