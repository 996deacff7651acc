"""One connection to a Kafka cluster, shared by both directions of mirroring: the
mirror out's transactional producer (target.py) and the follower's fetcher
(source.py). Kafka's wire protocol through core's `Wire`, messages from kio.

Every failure becomes `TargetError`, which says whether the same request may succeed
later (``retriable``); the connection is dropped with it, and the next request opens
a fresh one. An answer larger than the connection's ``max_answer`` is never read
(`Wire`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.client import wire
from ..core.errors import KafkaCode

Wire = wire.Wire
NONE = KafkaCode.NONE
# Answers that say "not yet", by Kafka's numbers (not all of them are codes logfs answers):
# the partition's leader or the coordinator moving or loading, a request timed out, the
# coordinator finishing an earlier transaction, an offset still pending in one.
RETRIABLE = {
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
    """A connection to ``address`` (``kafka://HOST:PORT[,HOST:PORT...]``), opened on
    first use. Not thread-safe.

    Args:
        address: the bootstrap list.
        client_id: the client id the requests carry.
        security: TLS and SASL of the connection (`wire.Security`).
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

    def close(self) -> None:
        self.wire.close()

    def _call(self, api_key: int, **fields):
        try:
            return self.wire.call(api_key, **fields)
        except wire.WireError as e:
            self.close()
            retriable = not isinstance(e, wire.AuthenticationError)
            raise TargetError(str(e), retriable) from None
        except OSError as e:  # TLS and socket errors the wire does not name
            self.close()
            raise TargetError(f"{self.address}: {e}") from None

    def partition_counts(self, topics: Sequence[str] | None) -> dict[str, int]:
        """The partition count of each of ``topics`` (None: every topic but internal
        ones) that exists on the cluster."""
        m = self.wire.module(wire.METADATA)
        answer = self._call(
            wire.METADATA,
            topics=None if topics is None else tuple(
                m.MetadataRequestTopic(topic_id=None, name=t) for t in topics
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )  # fmt: skip
        out = {}
        for topic in answer.topics:
            if topic.error_code == wire.UNKNOWN_TOPIC or topics is None and topic.is_internal:
                continue
            check(topic.error_code, f"Metadata({topic.name})")
            out[topic.name] = len(topic.partitions)
        return out
