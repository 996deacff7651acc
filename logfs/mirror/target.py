"""The Kafka cluster a mirror ships to, as one transactional producer (Kafka's wire
protocol through core's `Wire`, messages from kio; the connections in cluster.py).

A mirror's transaction, as MirrorMaker 2's exactly-once mode makes it:

1. ``InitProducerId(transactional.id)`` at the start and after any failure: the
   coordinator fences any earlier instance of the same id, completes or aborts the
   transaction it left open, and hands back the producer id and a new epoch;
2. ``OffsetFetch(group, require_stable)``: the mirror's position per partition, the
   offsets committed by the last transaction that committed;
3. per round: ``AddPartitionsToTxn``, ``Produce`` (transactional batches, sequences
   from 0 per partition for this epoch), ``AddOffsetsToTxn(group)``,
   ``TxnOffsetCommit`` (the new positions), ``EndTxn(commit)``.

So the records and the position move together or not at all: a ``read_committed``
reader of the cluster sees each forwarded record once, whatever the moment a mirror,
its connection or the cluster died. Any failure in a round drops the connections and
starts again at step 1, which aborts the round.

Each request goes where a Kafka producer sends it (routing.py): ``Produce`` of a
partition to the partition's leader (Metadata); ``InitProducerId``,
``AddPartitionsToTxn``, ``AddOffsetsToTxn`` and ``EndTxn`` to the transaction
coordinator (``FindCoordinator`` key type 1, the transactional id); ``OffsetFetch`` and
``TxnOffsetCommit`` to the group coordinator (key type 0, the group); Metadata and
CreateTopics over the bootstrap connection. A single-broker cluster, or a logfs
listener, gets all of them over the bootstrap connection. A leader or coordinator
that moved answers NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR, a broker may drop its
connection: that is a failure of the round like any other, so the round is aborted,
the routes are forgotten with the connections, and the next round asks Metadata and
FindCoordinator again before step 1.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

from ..core.client import wire
from .cluster import Cluster, TargetError, check
from .routing import GROUP, TRANSACTION

TXN_TIMEOUT = datetime.timedelta(seconds=60)  # transaction.timeout.ms, as Kafka's default

__all__ = ["Target", "TargetError"]


class Target(Cluster):
    """A transactional producer ``transactional_id`` at ``address``, positions kept by
    ``group``. Not thread-safe; every method may raise `TargetError`, after which the
    caller calls `close` and starts again with `begin`.

    Args:
        address: ``kafka://HOST:PORT[,HOST:PORT...]``.
        transactional_id: the producer's id, one per mirroring node; the group's too.
        security: TLS and SASL of the connections (`wire.Security`).
        timeout: seconds to connect and to wait for each answer.
    """

    def __init__(
        self, address: str, transactional_id: str, security, timeout: float = 30.0
    ) -> None:
        super().__init__(address, transactional_id, security, timeout)
        self.transactional_id = transactional_id
        self.group = transactional_id
        self.producer_id, self.epoch = -1, -1
        self.sequences: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        super().close()
        self.producer_id, self.epoch = -1, -1

    # ------------------------------------------------------------ the producer

    def begin(self) -> None:
        """InitProducerId: fences an earlier instance and ends its transaction."""
        answer = self._call_at(
            self.coordinator(TRANSACTION, self.transactional_id),
            wire.INIT_PRODUCER_ID,
            transactional_id=self.transactional_id,
            transaction_timeout=TXN_TIMEOUT,
            producer_id=-1,
            producer_epoch=-1,
        )
        check(answer.error_code, f"InitProducerId({self.transactional_id})")
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
        self.sequences = {}

    def committed(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The positions the group committed for ``partitions`` (absent: none yet)."""
        m = self.wire.module(wire.OFFSET_FETCH)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        answer = self._call_at(
            self.coordinator(GROUP, self.group),
            wire.OFFSET_FETCH,
            group_id=self.group,
            topics=tuple(
                m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps))
                for t, ps in sorted(by_topic.items())
            ),
            require_stable=True,
        )
        check(answer.error_code, f"OffsetFetch({self.group})")
        out = {}
        for topic in answer.topics:
            for p in topic.partitions:
                check(p.error_code, f"OffsetFetch({self.group}) {topic.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(topic.name, p.partition_index)] = p.committed_offset
        return out

    def create_topic(self, name: str, partitions: int) -> None:
        """CreateTopics with ``partitions`` and the cluster's replication factor; a topic
        made meanwhile by someone else is fine (the caller compares the counts)."""
        m = self.wire.module(wire.CREATE_TOPICS)
        answer = self._call(
            wire.CREATE_TOPICS,
            topics=(
                m.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=-1,
                    assignments=(),
                    configs=(),
                ),
            ),  # fmt: skip
            timeout=datetime.timedelta(seconds=self.timeout),
        )
        [result] = answer.topics
        if result.error_code != wire.TOPIC_EXISTS:
            check(result.error_code, f"CreateTopics({name})")

    # ------------------------------------------------------------ one transaction

    def add_partitions(self, partitions: Sequence[tuple[str, int]]) -> None:
        m = self.wire.module(wire.ADD_PARTITIONS_TO_TXN)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        answer = self._call_at(
            self.coordinator(TRANSACTION, self.transactional_id),
            wire.ADD_PARTITIONS_TO_TXN,
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=tuple(
                m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                for t, ps in sorted(by_topic.items())
            ),
        )
        for topic in answer.results_by_topic_v3_and_below:
            for p in topic.results_by_partition:
                check(
                    p.partition_error_code, f"AddPartitionsToTxn {topic.name}-{p.partition_index}"
                )

    def produce(self, topic: str, partition: int, batches: Sequence[bytes]) -> None:
        """Send ``batches`` (already the producer's: `with_producer`) in one request,
        acks=all; the caller keeps a request under the cluster's limit."""
        m = self.wire.module(wire.PRODUCE)
        answer = self._call_at(
            self.leader(topic, partition),
            wire.PRODUCE,
            transactional_id=self.transactional_id,
            acks=-1,
            timeout=datetime.timedelta(seconds=self.timeout),
            topic_data=(
                m.TopicProduceData(
                    name=topic,
                    partition_data=(
                        m.PartitionProduceData(index=partition, records=b"".join(batches)),
                    ),
                ),
            ),
        )
        [part] = answer.responses[0].partition_responses
        check(part.error_code, f"Produce {topic}-{partition}")

    def next_sequence(self, topic: str, partition: int, count: int) -> int:
        """The base sequence of the partition's next batch of ``count`` records."""
        sequence = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = (sequence + count) % (1 << 31)
        return sequence

    def commit(self, positions: Mapping[tuple[str, int], int]) -> None:
        """Commit the positions in the transaction, and the transaction."""
        answer = self._call_at(
            self.coordinator(TRANSACTION, self.transactional_id),
            wire.ADD_OFFSETS_TO_TXN,
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            group_id=self.group,
        )
        check(answer.error_code, f"AddOffsetsToTxn({self.group})")
        m = self.wire.module(wire.TXN_OFFSET_COMMIT)
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in sorted(positions.items()):
            by_topic.setdefault(topic, []).append(
                m.TxnOffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=None,
                )
            )
        answer = self._call_at(
            self.coordinator(GROUP, self.group),
            wire.TXN_OFFSET_COMMIT,
            transactional_id=self.transactional_id,
            group_id=self.group,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=tuple(
                m.TxnOffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        for topic in answer.topics:
            for p in topic.partitions:
                check(p.error_code, f"TxnOffsetCommit {topic.name}-{p.partition_index}")
        self.end(commit=True)

    def end(self, commit: bool) -> None:
        answer = self._call_at(
            self.coordinator(TRANSACTION, self.transactional_id),
            wire.END_TXN,
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=commit,
        )
        check(answer.error_code, f"EndTxn({'commit' if commit else 'abort'})")
