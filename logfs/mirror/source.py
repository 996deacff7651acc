"""The cluster a follower copies (inbound.py), read as a Kafka replica reads its
leader: Metadata for the topics and their partition counts, ListOffsets for a
partition's log start (earliest) and high watermark (latest), and Fetch at
``read_uncommitted`` from the follower's log ends, every batch as the leader holds
it (control batches and aborted transactions' batches too).

A Fetch asks at most ``fetch_max_bytes`` in all and ``partition_max_bytes`` a
partition (Kafka's ``fetch.max.bytes`` and ``max.partition.fetch.bytes``); the answer
may hold one batch beyond them (KIP-74), and a frame larger than
``fetch_max_bytes`` plus `SLACK` is refused before it is read (cluster.py).

Each partition is read at its leader, as a Kafka consumer reads it (routing.py):
one ListOffsets and one Fetch per leader, to that broker's own connection; Metadata
and DescribeConfigs over the bootstrap connection. The Fetches of one round are sent
one after another, each leader's answer handed to the follower before the next is
asked (one answer in memory at a time), each waiting on its broker at most its share
of ``max_wait``. A partition a broker answers NOT_LEADER_OR_FOLLOWER for (its
leadership moved) keeps that error for the round and its leader is forgotten: the
next round asks Metadata for it first. A partition without a leader now answers
LEADER_NOT_AVAILABLE without a request. A single-broker cluster, or a logfs
listener, gets every request over the bootstrap connection.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from ..core.client import wire
from ..core.config import TopicConfig
from ..core.errors import LogfsError
from .cluster import NONE, Cluster, TargetError, check, code_name
from .routing import NO_LEADER

EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
SLACK = 8 << 20  # an answer's bytes beyond fetch.max.bytes: headers, a batch past the limit
OFFSET_OUT_OF_RANGE = 1
LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 5, 6
MOVED = (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER)  # a leader to ask Metadata for again


class Fetched(NamedTuple):
    """One partition of a Fetch answer."""

    error_code: int
    high_watermark: int
    log_start_offset: int  # -1: the server did not say
    records: memoryview


class Source(Cluster):
    """The cluster at ``address``, read as a replica reads; every method may raise
    `TargetError` (every connection is dropped then).

    Args:
        address: ``kafka://HOST:PORT[,HOST:PORT...]``.
        client_id: the client id the requests carry.
        security: TLS and SASL (`wire.Security`).
        timeout: seconds to connect and to wait for each answer.
        fetch_max_bytes: the most record bytes one Fetch asks for.
        partition_max_bytes: the most a partition's share of it.
        max_wait: seconds a Fetch waits on the server for new records.
    """

    def __init__(
        self, address: str, client_id: str, security, timeout: float, fetch_max_bytes: int,
        partition_max_bytes: int, max_wait: float = 0.5,
    ) -> None:  # fmt: skip
        super().__init__(address, client_id, security, timeout, fetch_max_bytes + SLACK)
        self.fetch_max_bytes = fetch_max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.max_wait = datetime.timedelta(seconds=max_wait)

    def topic_settings(self, topic: str) -> dict[str, str]:
        """The topic's settings on the cluster (DescribeConfigs) that differ from the
        defaults, Kafka's names; none if the cluster does not say."""
        try:
            found = self.wire.topic(topic)
        except (wire.WireError, OSError) as e:
            self.close()
            raise TargetError(f"DescribeConfigs({topic}): {e}") from None
        except LogfsError:  # refused, or not known: the local defaults do
            return {}
        if found is None:
            return {}
        defaults = TopicConfig().to_properties()
        return {k: v for k, v in found[1].to_properties().items() if defaults.get(k) != v}

    def offsets(
        self, partitions: Sequence[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int | str]:
        """ListOffsets at ``read_uncommitted``, one request per leader: each partition's
        offset for ``timestamp`` (`EARLIEST`: the log start, `LATEST`: the high
        watermark), or the name of the error the cluster answered for it."""
        out: dict[tuple[str, int], int | str] = {}
        for node, group in self.by_leader(partitions).items():
            if node is NO_LEADER:
                out.update((tp, code_name(LEADER_NOT_AVAILABLE)) for tp in group)
                continue
            for tp, code, offset in self._list_offsets(node, group, timestamp):
                if code in MOVED:
                    self.routes.stale(tp)
                out[tp] = offset if code == NONE else code_name(code)
        return out

    def _list_offsets(self, node: int, partitions: list, timestamp: int):
        m = self.wire.module(wire.LIST_OFFSETS)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        answer = self._call_at(
            node,
            wire.LIST_OFFSETS,
            replica_id=-1,
            isolation_level=0,
            topics=tuple(
                m.ListOffsetsTopic(
                    name=t,
                    partitions=tuple(
                        m.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in ps
                    ),
                )
                for t, ps in sorted(by_topic.items())
            ),
        )
        for topic in answer.topics:
            for p in topic.partitions:
                yield (topic.name, p.partition_index), int(p.error_code), int(p.offset)

    def fetch(
        self, positions: Mapping[tuple[str, int], int]
    ) -> Iterator[tuple[int | None, dict[tuple[str, int], Fetched]]]:
        """Fetches at ``read_uncommitted`` of every partition from its position, one per
        leader: yields (the leader's route, its answer) in turn, the next Fetch sent
        when the caller asks for it; `NO_LEADER` with the partitions that have none."""
        groups = self.by_leader(sorted(positions))
        wait = self.max_wait / max(1, len(groups))
        for node, group in groups.items():
            if node is NO_LEADER:
                empty = Fetched(LEADER_NOT_AVAILABLE, -1, -1, memoryview(b""))
                yield node, dict.fromkeys(group, empty)
                continue
            answer = self._fetch(node, {tp: positions[tp] for tp in group}, wait)
            for tp, fetched in answer.items():
                if fetched.error_code in MOVED:
                    self.routes.stale(tp)
            yield node, answer

    def _fetch(self, node: int, positions: Mapping, wait: datetime.timedelta) -> dict:
        m = self.wire.module(wire.FETCH)
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in sorted(positions.items()):
            by_topic.setdefault(topic, []).append(
                m.FetchPartition(
                    partition=partition,
                    fetch_offset=offset,
                    partition_max_bytes=self.partition_max_bytes,
                )
            )
        answer = self._call_at(
            node,
            wire.FETCH,
            max_wait=wait,
            min_bytes=1,
            max_bytes=self.fetch_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request names its partitions
            topics=tuple(m.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=(),
        )
        check(answer.error_code, "Fetch")
        out = {}
        for topic in answer.responses:
            for p in topic.partitions:
                out[(topic.topic, p.partition_index)] = Fetched(
                    int(p.error_code),
                    int(p.high_watermark),
                    int(p.log_start_offset),
                    memoryview(p.records or b""),
                )
        return out
