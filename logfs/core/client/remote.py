"""A read-only view of a Kafka listener's log over Kafka's wire protocol, for
readers that must not need the data directory: the part of `Store` and `Log`
that offset planning and batch reading use (the Spark source's).

- `RemoteStore.topics` is Metadata for every topic;
- `RemoteStore.log` answers ``log_start_offset`` and ``next_offset`` with
  ListOffsets (earliest and latest, asked when the log is opened, so that a
  partition that does not exist raises `UnknownTopicError` there, as the store
  does), and `RemoteLog.offset_for_time` with ListOffsets by timestamp;
- `RemoteLog.raw_batches` reads whole batches with Fetch requests in a loop, at
  most `FETCH_BYTES` per request.

With ``read_committed`` (Spark's ``kafka.isolation.level=read_committed``) it reads as a
``read_committed`` Kafka consumer does: ListOffsets and Fetch at isolation level 1 (the
latest offset is the last stable offset), and the records of the aborted
transactions each Fetch answer lists are left out, as Kafka's consumer leaves them out
(`Aborted`).

Error codes become the errors the store raises: ``UNKNOWN_TOPIC_OR_PARTITION``
`UnknownTopicError`, ``OFFSET_OUT_OF_RANGE`` `OffsetOutOfRangeError` (offsets
deleted by retention while they were being read).

A listener that cannot be reached, or drops the connection, is tried again as Kafka's
consumers do: after 50 ms, then twice as long each time up to 1 s
(``reconnect.backoff.ms``, ``reconnect.backoff.max.ms``), until ``api_timeout`` has passed
since the first failure (``default.api.timeout.ms``, 60 s); then `WireError` names the
servers and the timeout. A connection that drops as soon as it is made, three times in a row
(a listener that wants TLS or SASL of this client), a refused login or TLS handshake are not
tried again.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator, Mapping

from ..config import INTERNAL_TOPICS
from ..errors import CorruptRecordError
from ..format.control import ABORT, marker_type
from ..format.record import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header, verify_crc
from .security import AuthenticationError, Security
from .wire import FETCH, LIST_OFFSETS, METADATA, NONE, UNKNOWN_TOPIC, Wire, WireError, _error

FETCH_BYTES = 4 << 20  # per Fetch request (partition_max_bytes and max_bytes)
FETCH_WAIT = datetime.timedelta(milliseconds=500)  # the offsets asked for exist: no long wait
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
BACKOFF, MAX_BACKOFF = 0.05, 1.0  # Kafka's reconnect.backoff.ms and reconnect.backoff.max.ms


class RemoteStore:
    """The topics of the Kafka listener at ``address`` (``kafka://HOST:PORT[,...]``),
    read-only. One connection, opened on first use; not thread-safe.

    Args:
        address: the bootstrap list (Kafka's ``bootstrap.servers``), tried in order.
        timeout: seconds to connect and to wait for each answer.
        security_protocol, sasl_mechanism, sasl_plain_username, sasl_plain_password,
            ssl_cafile, ssl_check_hostname: TLS and SASL as for `Producer`, with
            kafka-python's names (security.py).
        client_id: the client id of the requests.
        api_timeout: seconds to go on trying a listener that cannot be reached (Kafka's
            ``default.api.timeout.ms``).

    Raises:
        InvalidConfigError: a bad address or security setting, an unreadable CA file.
    """

    def __init__(
        self,
        address: str,
        *,
        timeout: float = 30.0,
        security_protocol: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        ssl_cafile: str | None = None,
        ssl_check_hostname: bool = True,
        client_id: str = "logfs-reader",
        api_timeout: float = 60.0,
        read_committed: bool = False,
    ) -> None:
        security = Security.of(
            security_protocol, sasl_mechanism, sasl_plain_username, sasl_plain_password,
            ssl_cafile, ssl_check_hostname,
        )  # fmt: skip
        self._wire = Wire(address, timeout, security=security, client_id=client_id)
        self.api_timeout = api_timeout
        self.read_committed = read_committed
        self.internal_topics: frozenset[str] = INTERNAL_TOPICS  # grows with is_internal

    def _call(self, api_key: int, **fields):
        """One request and its answer, tried again while the listener cannot be reached."""
        deadline, backoff, dropped = None, BACKOFF, 0
        while True:
            try:
                return self._wire.call(api_key, **fields)
            except WireError as e:
                text = str(e)
                if isinstance(e, AuthenticationError) or "TLS handshake" in text:
                    raise
                if "could be reached" in text:  # connecting failed: down, or restarting
                    dropped = 0
                elif text.startswith("kafka://") and dropped < 2:
                    dropped += 1  # the connection dropped: again, unless it keeps dropping
                else:  # the listener closes this client's connections (TLS, SASL): no retry
                    raise
                now = time.monotonic()
                deadline = deadline or now + self.api_timeout
                if now >= deadline:
                    servers = ",".join(f"{h}:{p}" for h, p in self._wire.servers)
                    raise WireError(
                        f"no Kafka listener at {servers} answered within "
                        f"{self.api_timeout * 1000:.0f} ms (kafka.default.api.timeout.ms): {e}"
                    ) from None
                time.sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, MAX_BACKOFF)

    def topics(self) -> Mapping[str, int]:
        """Topic name -> number of partitions, sorted by name. Internal topics, which a
        listener describes only when they are named, are asked for by name."""
        found = self._metadata(None)
        missing = [t for t in sorted(INTERNAL_TOPICS) if t not in found]
        if missing:
            found.update(self._metadata(missing))
        return dict(sorted(found.items()))

    def _metadata(self, names: list[str] | None) -> dict[str, int]:
        m = self._wire.module(METADATA)
        answer = self._call(
            METADATA,
            topics=None if names is None else tuple(
                m.MetadataRequestTopic(topic_id=None, name=n) for n in names
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )  # fmt: skip
        out = {}
        for topic in answer.topics:
            if topic.error_code == UNKNOWN_TOPIC:
                continue
            if topic.error_code != NONE:
                raise _error(topic.error_code, topic.name, None)
            if topic.is_internal:
                self.internal_topics |= {topic.name}
            out[topic.name] = len(topic.partitions)
        return out

    def log(self, topic: str, partition: int) -> RemoteLog:
        """The partition's offsets as they are now.

        Raises:
            UnknownTopicError: no such topic or partition.
        """
        return RemoteLog(self._wire, self._call, topic, int(partition), self.read_committed)

    def close(self) -> None:
        self._wire.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteLog:
    """One partition of a `RemoteStore`: its log start and next offset when it was
    opened, offsets by time and the batches of a range."""

    def __init__(
        self, wire: Wire, call: Callable, topic: str, partition: int, committed: bool = False
    ) -> None:
        self._wire = wire
        self._call = call  # the store's: tried again while the listener cannot be reached
        self.topic = topic
        self.partition = partition
        self.isolation = 1 if committed else 0  # read_committed: the last stable offset
        self.log_start_offset = self._list_offsets(EARLIEST)
        self.next_offset = self._list_offsets(LATEST)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is >= ``timestamp_ms``, or None when every
        record is older (Kafka's offsetsForTimes)."""
        offset = self._list_offsets(timestamp_ms)
        return None if offset < 0 else offset

    def _list_offsets(self, timestamp: int) -> int:
        m = self._wire.module(LIST_OFFSETS)
        answer = self._call(
            LIST_OFFSETS,
            replica_id=-1,
            isolation_level=self.isolation,
            topics=(
                m.ListOffsetsTopic(
                    name=self.topic,
                    partitions=(
                        m.ListOffsetsPartition(partition_index=self.partition, timestamp=timestamp),
                    ),
                ),
            ),
        )
        [part] = answer.topics[0].partitions
        if part.error_code != NONE:
            raise _error(part.error_code, self.name, None)
        return int(part.offset)

    def raw_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """CRC-checked batches overlapping ``[start, end)`` (within the offsets the log had
        when it was opened), still encoded; compressed and control batches included.

        Raises:
            OffsetOutOfRangeError: the offsets were deleted (retention) while being read.
            UnknownTopicError: the topic was deleted meanwhile.
            CorruptRecordError: a batch whose CRC does not match.
        """
        position = self.log_start_offset if start is None else max(start, self.log_start_offset)
        end = self.next_offset if end is None else min(end, self.next_offset)
        limit = FETCH_BYTES
        aborted = Aborted()
        while position < end:
            records, high_watermark = self._fetch(position, limit, aborted)
            got = False
            for header, batch in whole_batches(records):
                if header.base_offset >= end:
                    return
                if header.last_offset < position:  # a batch holding offsets before start
                    continue
                if aborted.skips(header, batch):
                    position, got = header.next_offset, True
                    continue
                try:
                    verify_crc(batch, header)
                except CorruptRecordError as e:
                    raise CorruptRecordError(f"{self.name} at offset {position}: {e}") from None
                yield header, batch
                position, got = header.next_offset, True
            if got:
                limit = FETCH_BYTES
            elif len(records) >= LOG_OVERHEAD and (need := _batch_size(records)) > limit:
                limit = need  # one batch larger than the limit (a broker before KIP-74)
            elif high_watermark <= position:
                return  # the log ends before ``end`` (cut after a crash)
            else:
                raise WireError(
                    f"{self.name}: a Fetch at offset {position} gave no whole batch "
                    f"({len(records)} bytes, high watermark {high_watermark})"
                )

    def _fetch(self, offset: int, limit: int, aborted: Aborted) -> tuple[memoryview, int]:
        """The record bytes of one Fetch at ``offset`` and the high watermark (the last
        stable offset, read_committed); the aborted transactions it lists go to
        ``aborted``."""
        m = self._wire.module(FETCH)
        answer = self._call(
            FETCH,
            max_wait=FETCH_WAIT,
            min_bytes=1,
            max_bytes=limit,
            isolation_level=self.isolation,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request names its partition
            topics=(
                m.FetchTopic(
                    topic=self.topic,
                    partitions=(
                        m.FetchPartition(
                            partition=self.partition, fetch_offset=offset, partition_max_bytes=limit
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        if answer.error_code != NONE:
            raise _error(answer.error_code, self.name, None)
        [part] = answer.responses[0].partitions
        if part.error_code != NONE:
            raise _error(part.error_code, f"{self.name} at offset {offset}", None)
        if self.isolation:
            aborted.add((t.producer_id, t.first_offset) for t in part.aborted_transactions or ())
            return memoryview(part.records or b""), int(part.last_stable_offset)
        return memoryview(part.records or b""), int(part.high_watermark)


class Aborted:
    """Kafka's consumer's rule for the aborted transactions a Fetch lists (its
    ``CompletedFetch``): once a batch reaches an aborted transaction's first offset,
    that producer's transactional batches are skipped until its ABORT marker; control
    batches are never records."""

    def __init__(self) -> None:
        self.waiting: list[tuple[int, int]] = []  # (first offset, producer id), sorted
        self.producers: set[int] = set()

    def add(self, listed) -> None:
        self.waiting = sorted({*self.waiting, *((first, pid) for pid, first in listed)})

    def skips(self, header: BatchHeader, batch: memoryview) -> bool:
        while self.waiting and self.waiting[0][0] <= header.last_offset:
            self.producers.add(self.waiting.pop(0)[1])
        if header.is_control:
            if header.producer_id in self.producers and marker_type(batch, header) == ABORT:
                self.producers.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self.producers


def whole_batches(records: memoryview) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The whole batches at the start of a Fetch answer's record bytes; a batch cut at
    the end (a Kafka broker stops at its size limits mid-batch) is left out."""
    pos = 0
    while len(records) - pos >= HEADER_SIZE:
        header = read_header(records, pos)
        if pos + header.size > len(records):
            return
        yield header, records[pos : pos + header.size]
        pos += header.size


def _batch_size(records: memoryview) -> int:
    """The size of the batch at the start of ``records``, from its length field."""
    return LOG_OVERHEAD + int.from_bytes(records[8:12], "big", signed=True)
