"""The connections to a Kafka cluster, shared by both directions of mirroring: the
mirror out's transactional producer (target.py) and the follower's fetcher
(source.py). Kafka's wire protocol through core's `Wire`, messages from kio.

The bootstrap connection reaches the address the mirror was given; a request for a
partition goes to the partition's leader and a transactional or group request to its
coordinator, each over its broker's own connection (routing.py: the books, the bounds,
and a single broker reached over the bootstrap connection for everything).

Every failure becomes `TargetError`, which says whether the same request may succeed
later (``retriable``); every connection is dropped with it and every route forgotten,
and the next request opens fresh ones after asking Metadata again. An answer larger
than the connection's ``max_answer`` is never read (`Wire`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.client import wire
from ..core.errors import KafkaCode
from .routing import BOOTSTRAP, NO_LEADER, Routes

Wire = wire.Wire
NONE = KafkaCode.NONE
# Answers that say "not yet", by Kafka's numbers (not all of them are codes logfs answers):
# the partition's leader or the coordinator moving or loading, a request timed out, the
# coordinator finishing an earlier transaction, an offset still pending in one.
RETRIABLE = {
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    51: "CONCURRENT_TRANSACTIONS",
    88: "UNSTABLE_OFFSET_COMMIT",
}


class TargetError(Exception):
    """The cluster refused a request, or could not be reached; ``retriable`` when
    trying the same again later may succeed."""

    def __init__(self, message: str, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


def code_name(code: int) -> str:
    if code in RETRIABLE:
        return RETRIABLE[code]
    try:
        return KafkaCode(code).name
    except ValueError:
        return f"error code {code}"


def check(code: int, what: str) -> None:
    """Raise `TargetError` for a non-zero error code."""
    if code != NONE:
        raise TargetError(f"{what}: {code_name(code)}", int(code) in RETRIABLE)


class Cluster:
    """Connections to the cluster at ``address`` (``kafka://HOST:PORT[,HOST:PORT...]``),
    each opened on first use. Not thread-safe.

    Args:
        address: the bootstrap list.
        client_id: the client id the requests carry.
        security: TLS and SASL of the connections (`wire.Security`).
        timeout: seconds to connect and to wait for each answer.
        max_answer: the most bytes an answer may announce.
    """

    def __init__(
        self, address: str, client_id: str, security, timeout: float = 30.0,
        max_answer: int = wire.MAX_ANSWER,
    ) -> None:  # fmt: skip
        self.address = address
        self.timeout = timeout
        self.wire = Wire(
            address, timeout, security=security, client_id=client_id, max_answer=max_answer
        )

        def connect(broker: str) -> Wire:
            return Wire(
                broker, timeout, security=security, client_id=client_id, max_answer=max_answer
            )

        self.routes = Routes(self.wire, connect)

    def close(self) -> None:
        """Drop every connection and every route."""
        self.routes.forget()
        self.wire.close()

    def _call(self, api_key: int, **fields):
        """One request over the bootstrap connection."""
        return self._call_at(BOOTSTRAP, api_key, **fields)

    def _call_at(self, node: int | None, api_key: int, **fields):
        """One request to broker ``node`` (a route of routing.py)."""
        if node is NO_LEADER or node != BOOTSTRAP and node not in self.routes.brokers:
            raise TargetError(f"API {api_key}: broker {node} is not in the cluster's metadata")
        connection = self.routes.wire(node)
        try:
            return connection.call(api_key, **fields)
        except wire.WireError as e:
            self.close()
            retriable = not isinstance(e, wire.AuthenticationError)
            raise TargetError(str(e), retriable) from None
        except OSError as e:  # TLS and socket errors the wire does not name
            self.close()
            raise TargetError(f"{connection.name}: {e}") from None

    def metadata(self, topics: Sequence[str] | None):
        """Metadata of ``topics`` (None: every topic), its brokers and leaders learnt."""
        m = self.wire.module(wire.METADATA)
        answer = self._call(
            wire.METADATA,
            topics=None if topics is None else tuple(
                m.MetadataRequestTopic(topic_id=None, name=t) for t in topics
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )  # fmt: skip
        self.routes.learn(answer, every_topic=topics is None)
        return answer

    def partition_counts(self, topics: Sequence[str] | None) -> dict[str, int]:
        """The partition count of each of ``topics`` (None: every topic but internal
        ones) that exists on the cluster."""
        out = {}
        for topic in self.metadata(topics).topics:
            if topic.error_code == wire.UNKNOWN_TOPIC or topics is None and topic.is_internal:
                continue
            check(topic.error_code, f"Metadata({topic.name})")
            out[topic.name] = len(topic.partitions)
        return out

    def by_leader(self, partitions: Sequence[tuple[str, int]]) -> dict[int | None, list]:
        """``partitions`` grouped by the broker that leads them (routing.py's routes),
        Metadata asked first for those whose leader is not known."""
        unknown = self.routes.unknown(partitions)
        if unknown or not self.routes.known:
            self.metadata(sorted({t for t, _ in unknown}))
        return self.routes.by_leader(partitions)

    def leader(self, topic: str, partition: int) -> int:
        """The route of the partition's leader.

        Raises:
            TargetError: the partition has no leader now (retriable).
        """
        [(node, _)] = self.by_leader([(topic, partition)]).items()
        if node is NO_LEADER:
            raise TargetError(f"{topic}-{partition}: LEADER_NOT_AVAILABLE")
        return node

    def coordinator(self, key_type: int, key: str) -> int:
        """The route of the coordinator of ``key`` (a group's: 0, a transactional id's: 1).

        Raises:
            TargetError: FindCoordinator failed or named no usable broker (retriable).
        """
        if not self.routes.known:
            self.metadata(())
        if self.routes.single:
            return BOOTSTRAP
        node = self.routes.coordinators.get((key_type, key))
        if node is not None and node in self.routes.brokers:
            return node
        answer = self._call(wire.FIND_COORDINATOR, key=key, key_type=key_type)
        check(answer.error_code, f"FindCoordinator({key})")
        node = self.routes.learn_coordinator(key_type, key, answer)
        if node is NO_LEADER:
            raise TargetError(f"FindCoordinator({key}): no usable broker named")
        return node
