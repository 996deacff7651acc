"""Mirror out: a data directory's partitions forwarded to the same topics and
partitions of a Kafka cluster, exactly once (target.py states the transaction).

A round, repeated until `MirrorOut.stop`:

1. the data directory is opened read-only (no lock: it reads beside the daemon that
   appends, and sees what was appended since the last round); its topics matching
   ``mirror.topics``, internal ones aside, are the mirrored ones;
2. a topic the cluster does not have is created with the same partition count; one
   whose count differs is not mirrored and says so in `status`;
3. at the start and after any failure the positions are read back from the cluster
   (the group's committed offsets); a partition without one starts at its log start;
4. each partition's committed records from its position to its last stable offset,
   at most `ROUND_BYTES` a partition and about `ROUND_TOTAL` in all (the next round goes
   on from the partition where this one stopped), go in one transaction with the new
   positions.
   Control batches and aborted transactions' batches are not forwarded, but the
   position moves past them. Each forwarded batch keeps its records and timestamps,
   with the mirror's producer id, epoch and sequence (`with_producer`).

A position is a local offset: the next one to forward. Local appends never wait for the
mirror; the backlog is the local log. A position below the log start (retention
deleted records before they were forwarded) jumps to the log start and the count of
records lost is kept in `status` (the batch that holds the log start is forwarded whole, as
a Kafka reader receives it); a position past the log end (DATA replaced) stops that
partition with an error. Any failure of the cluster drops the connections, is kept in
`status` and logged, and the next round, after a back-off of up to `MAX_BACKOFF`
seconds, begins again at step 3.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

from ..core.config import INTERNAL_TOPICS, now_ms
from ..core.errors import LogfsError
from ..core.format import read_header, with_producer
from ..core.log import Store
from .settings import MirrorSettings
from .status import StatusFile, status_path
from .target import Target, TargetError

logger = logging.getLogger("logfs")

ROUND_BYTES = 1 << 20  # per partition and transaction, as Kafka's max.request.size
ROUND_TOTAL = 16 << 20  # per transaction: what a round holds in memory
IDLE = 0.1  # seconds between rounds that found nothing to forward
BACKOFF, MAX_BACKOFF = 0.1, 5.0


class PartitionLag:
    """One mirrored partition's books: its position, the local end it chases, the
    timestamp of the first record not forwarded, what retention took unforwarded."""

    __slots__ = ("position", "end", "oldest_ms", "lost", "pending_lost", "error")

    def __init__(self, position: int) -> None:
        self.position = position
        self.end = position
        self.oldest_ms: int | None = None
        self.lost = 0
        self.pending_lost = 0  # lost in the round under way, until it commits
        self.error: str | None = None

    @property
    def records(self) -> int:
        return max(0, self.end - self.position)


class MirrorOut:
    """Forwards ``data``'s partitions to ``settings.to`` (see the module docstring).

    Lag is read by `lag_records`, `lag_age_ms`, `partitions` and `status`, from any
    thread. `run` blocks until `stop`; `round` is one round, for tests.

    Args:
        data: the data directory.
        settings: where, what and how (settings.py).
        clock: milliseconds now, for the lag's age.
    """

    def __init__(
        self, data: str, settings: MirrorSettings, clock: Callable[[], int] = now_ms
    ) -> None:
        self.data = data
        self.settings = settings
        self.clock = clock
        self.target = Target(settings.to, settings.id, settings.security, settings.timeout)
        self.topics = re.compile(settings.topics)
        self.lags: dict[tuple[str, int], PartitionLag] = {}
        self.topic_errors: dict[str, str] = {}
        self.error: str | None = None  # the last round's failure, None once one succeeds
        self.forwarded = 0  # records forwarded and committed, since start
        self.transactions = 0
        self._known: dict[str, int] = {}  # topics checked on the cluster: their counts then
        self._resume = True  # positions to read back before the next round
        self._next_first = 0  # the partition the next round starts with
        self._stopped = threading.Event()
        self.status_file = StatusFile(status_path(data, settings.id), "mirror", self.clock)

    # ------------------------------------------------------------ the books

    @property
    def lag_records(self) -> int:
        """Records of the mirrored partitions not forwarded yet."""
        return sum(lag.records for lag in list(self.lags.values()))

    @property
    def lag_age_ms(self) -> int:
        """How old the oldest record not forwarded is (0: none)."""
        oldest = [lag.oldest_ms for lag in list(self.lags.values()) if lag.oldest_ms is not None]
        return max(0, self.clock() - min(oldest)) if oldest else 0

    def partitions(self) -> dict[str, dict]:
        """Each mirrored partition's position, end, lag and error, by ``topic-partition``."""
        now = self.clock()
        return {
            f"{t}-{p}": {
                "position": lag.position,
                "end": lag.end,
                "lag_records": lag.records,
                "lag_ms": 0 if lag.oldest_ms is None else max(0, now - lag.oldest_ms),
                "lost_to_retention": lag.lost,
                "error": lag.error,
            }
            for (t, p), lag in sorted(list(self.lags.items()))
        }

    def retention_floor(self, topic: str, partition: int) -> int | None:
        """The offset a daemon's retention keeps for this mirror (``mirror.retention.wait``):
        its position in a forwarded partition, 0 before it is known; None where retention
        need not wait."""
        if (
            not self.settings.retention_wait
            or topic in INTERNAL_TOPICS
            or topic in self.topic_errors
            or not self.topics.fullmatch(topic)
        ):
            return None
        lag = self.lags.get((topic, partition))
        return 0 if lag is None else lag.position

    def status(self) -> dict:
        """What ``state`` and ``logfs describe`` show of the mirror."""
        return {
            "to": self.settings.to,
            "id": self.settings.id,
            "topics": self.settings.topics,
            "retention_wait": self.settings.retention_wait,
            "error": self.error,
            "topic_errors": dict(self.topic_errors),
            "forwarded": self.forwarded,
            "lag_records": self.lag_records,
            "lag_ms": self.lag_age_ms,
            "partitions": self.partitions(),
        }

    # ------------------------------------------------------------ running

    def run(self) -> None:
        """Rounds until `stop`; failures are kept and logged, never raised."""
        backoff = BACKOFF
        while not self._stopped.is_set():
            try:
                moved = self.round()
            except (TargetError, LogfsError, OSError) as e:
                self._failed(str(e))
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = BACKOFF
            self._write_status()
            if not moved:
                self._stopped.wait(IDLE)
        self._write_status(force=True)
        self.target.close()

    def stop(self) -> None:
        self._stopped.set()

    def close(self) -> None:
        """Drop the connections (`run` does when it returns)."""
        self.target.close()

    def _failed(self, message: str) -> None:
        if message != self.error:
            logger.warning("mirror to %s: %s", self.settings.to, message)
        self.error = message
        self.target.close()
        self._resume = True
        self._write_status()

    def _write_status(self, force: bool = False) -> None:
        self.status_file.write(self.status, self.error, force)

    def round(self) -> int:
        """One round; returns the number of batches looked at (0: nothing to do).

        Raises:
            TargetError: the cluster failed or refused; the transaction is abandoned.
        """
        with Store(self.data, read_only=True) as store:
            partitions = self._mirrored(store)
            if self.target.producer_id < 0:
                self.target.begin()
                self._resume = True
            if self._resume:
                self._read_positions(store, partitions)
            for gone in set(self.lags) - set(partitions):  # deleted here, or no longer matched
                del self.lags[gone]
            moved, records, size, sends, positions = 0, 0, 0, [], {}
            # Round-robin from where the last round stopped, so that the cap on a round's
            # bytes (`ROUND_TOTAL`) starves no partition.
            first = self._next_first % len(partitions) if partitions else 0
            for i, tp in enumerate(partitions[first:] + partitions[:first]):
                if size >= ROUND_TOTAL:
                    self._next_first = first + i
                    break
                count, batches, position = self._collect(store, tp)
                moved += count
                records += sum(read_header(b).records_count for b in batches)
                size += sum(len(b) for b in batches)
                if count:
                    positions[tp] = position
                if batches:
                    sends.append((tp, batches))
            else:
                self._next_first = 0
        if not positions:
            self.error = None
            return 0
        if sends:
            self.target.add_partitions([tp for tp, _ in sends])
            for (topic, partition), batches in sends:
                self.target.produce(topic, partition, batches)
        self.target.commit(positions)
        for tp, position in positions.items():
            lag = self.lags[tp]
            lag.position = position
            lag.lost += lag.pending_lost
            if position >= lag.end:
                lag.oldest_ms = None
        self.forwarded += records
        self.transactions += 1
        self.error = None
        return moved

    def _mirrored(self, store: Store) -> list[tuple[str, int]]:
        """The mirrored partitions, their topics checked (and made) on the cluster."""
        wanted = {
            t: n
            for t, n in store.topics().items()
            if t not in INTERNAL_TOPICS and self.topics.fullmatch(t)
        }
        new = sorted(t for t in wanted if self._known.get(t) != wanted[t])  # or grown here
        if new:
            found = self.target.partition_counts(new)
            for topic in new:
                if topic not in found:
                    self.target.create_topic(topic, wanted[topic])
                    found.update(self.target.partition_counts([topic]))
                if found.get(topic) != wanted[topic]:
                    self.topic_errors[topic] = (
                        f"{topic} has {found.get(topic)} partitions on {self.settings.to}, "
                        f"{wanted[topic]} here: not mirrored"
                    )
                    logger.warning("mirror to %s: %s", self.settings.to, self.topic_errors[topic])
                else:
                    self.topic_errors.pop(topic, None)
                self._known[topic] = wanted[topic]
        return [
            (t, p)
            for t, n in sorted(wanted.items())
            if t not in self.topic_errors
            for p in range(n)
        ]

    def _read_positions(self, store: Store, partitions: list[tuple[str, int]]) -> None:
        committed = self.target.committed(partitions) if partitions else {}
        for tp in partitions:
            start = store.log(*tp).log_start_offset
            self.lags[tp] = PartitionLag(committed.get(tp, start))
        self._resume = False

    def _collect(self, store: Store, tp: tuple[str, int]) -> tuple[int, list[bytes], int]:
        """The batches of ``tp`` to forward in this round: (batches looked at, the
        producer's batches to send, the position after them)."""
        lag = self.lags.get(tp)
        if lag is None:  # a partition that appeared since the positions were read
            self._resume = True
            return 0, [], 0
        log = store.log(*tp)
        end = log.last_stable_offset
        lag.end = end
        if lag.position > log.next_offset:
            lag.error = (
                f"position {lag.position} is past the log end {log.next_offset}: "
                "the data directory is not the one mirrored before"
            )
            return 0, [], lag.position
        lag.error = None
        position = lag.position
        looked, out, size, oldest = 0, [], 0, None
        lag.pending_lost, gone_from = 0, None
        if position < log.log_start_offset:  # counted once the new position is committed
            gone_from, position = position, log.log_start_offset
            lag.pending_lost, looked = position - gone_from, 1
        view = log.visibility(position, end)
        for header, batch in log.raw_batches(position, end):
            if header.next_offset <= position:
                continue
            if gone_from is not None:  # the batch holding the log start goes whole
                lag.pending_lost = max(0, header.base_offset - gone_from)
                gone_from = None
            if header.last_offset >= end or size + header.size > ROUND_BYTES and out:
                break
            looked += 1
            position = header.next_offset
            if view.hides(header) or header.records_count == 0:  # a thinned batch: nothing left
                continue
            if oldest is None:
                oldest = header.base_timestamp
            sequence = self.target.next_sequence(*tp, header.records_count)
            out.append(
                with_producer(
                    batch, self.target.producer_id, self.target.epoch, sequence,
                    transactional=True,
                )
            )  # fmt: skip
            size += header.size
        lag.oldest_ms = oldest  # until the commit: the round's first record
        return looked, out, position
