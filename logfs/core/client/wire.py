"""Delivering a `Producer`'s batches over Kafka's wire protocol, for
``Producer("kafka://HOST:PORT")``: to a logfs listener (docs/kafka.md) or any
Kafka broker that leads the partitions it is sent.

One blocking connection, requests one at a time, messages from kio's
generated classes (imported on first use: a program that never produces over
the network, such as a Spark worker, never loads them): Metadata for a
topic's partition count, DescribeConfigs for its settings, CreateTopics for a
topic that does not exist, Produce (acks=-1) of at most `REQUEST_BYTES` of
batches per request; and for readers (remote.py) Metadata of every topic,
ListOffsets and Fetch. A partition's error code becomes the `LogfsError` class
the store would have raised.

The address is Kafka's bootstrap list, ``kafka://HOST:PORT[,HOST:PORT...]``:
each is tried in order until one connects. Each connection is then secured as
its `Security` says (security.py): TLS first, then SASL (PLAIN or SCRAM), as
Kafka's clients do.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import time
from collections.abc import Sequence

from ..config import TopicConfig
from ..errors import (
    BatchTooLargeError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaCode,
    LogfsError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicError,
    by_kafka_code,
)
from ..format import read_header
from .security import SASL_AUTHENTICATE, SASL_HANDSHAKE, Security, WireError, authenticate, wrap
from .security import AuthenticationError as AuthenticationError  # raised by `call`

SCHEME = "kafka://"
REQUEST_BYTES = 1 << 20  # batches per Produce request, as Kafka's max.request.size
# The largest answer read: a size the server announces beyond it drops the connection
# before anything is read (as Kafka's socket.request.max.bytes bounds a broker's reads).
MAX_ANSWER = 100 << 20
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
CREATE_TOPICS, DESCRIBE_CONFIGS = 19, 32
# A transactional producer's requests (a mirror's: logfs/mirror/), and OffsetFetch of its
# position: FindCoordinator by one key, the last versions of AddPartitionsToTxn that name one
# transactional id.
OFFSET_FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID = 9, 10, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
VERSIONS = {
    PRODUCE: 9,
    FETCH: 12,  # the last version that names topics (13+ name them by id)
    LIST_OFFSETS: 7,
    METADATA: 12,
    SASL_HANDSHAKE: 1,
    CREATE_TOPICS: 7,
    DESCRIBE_CONFIGS: 4,
    SASL_AUTHENTICATE: 2,
    OFFSET_FETCH: 7,
    FIND_COORDINATOR: 3,
    INIT_PRODUCER_ID: 4,
    ADD_PARTITIONS_TO_TXN: 3,
    ADD_OFFSETS_TO_TXN: 3,
    END_TXN: 3,
    TXN_OFFSET_COMMIT: 3,
}
TOPIC_RESOURCE = 2
NONE = KafkaCode.NONE
UNKNOWN_TOPIC = KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
TOPIC_EXISTS = KafkaCode.TOPIC_ALREADY_EXISTS
# A topic not listed yet though it exists: its leaders are being chosen (logfs: another
# request is still making its partitions).
NOT_YET = (UNKNOWN_TOPIC, KafkaCode.LEADER_NOT_AVAILABLE)
# Kafka's error code -> the error the store would have raised: the errors these
# requests can meet, each read back by the code the table gives it.
# TOPIC_AUTHORIZATION_FAILED reads as ReadOnlyError, as a read-only store refuses.
ERRORS = by_kafka_code(
    OffsetOutOfRangeError,
    InvalidBatchError,
    BatchTooLargeError,
    InvalidRecordError,
    UnknownTopicError,
    TopicExistsError,
    InvalidTopicError,
    InvalidConfigError,
    ReadOnlyError,
)


def is_address(data: str) -> bool:
    return data.startswith(SCHEME)


def parse_servers(address: str) -> list[tuple[str, int]]:
    """``[(host, port), ...]`` of ``kafka://HOST:PORT[,HOST:PORT...]`` (or of the bare list).

    Raises:
        InvalidConfigError: an entry without a numeric port, or none at all.
    """
    servers = []
    for entry in address.removeprefix(SCHEME).rstrip("/").split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise InvalidConfigError(
                f"{address!r}: expected kafka://HOST:PORT (several separated by commas)"
            )
        servers.append((host.strip("[]"), int(port)))
    return servers


def _error(code, what: str, message: str | None) -> LogfsError:
    cls = ERRORS.get(int(code), WireError)
    name = getattr(code, "name", str(code)).upper()
    return cls(f"{what}: {name}{': ' + message if message else ''}")


class Wire:
    """A connection to ``kafka://HOST:PORT[,HOST:PORT...]`` (opened on first use).

    Args:
        address: the bootstrap list; the first server that accepts the connection is used.
        timeout: seconds to connect (TLS handshake included) and to wait for each answer.
        security: TLS and SASL settings (`Security.of`); None: plaintext, no SASL.
        client_id: the client id the requests carry.
        max_answer: the most bytes an answer may announce (`MAX_ANSWER`).

    Raises:
        InvalidConfigError: a bad address, or a CA file that cannot be read.
    """

    def __init__(
        self,
        address: str,
        timeout: float = 30.0,
        *,
        security: Security | None = None,
        client_id: str = "logfs",
        max_answer: int = MAX_ANSWER,
    ) -> None:
        self.servers = parse_servers(address)
        self.security = security or Security()
        self._context = self.security.context()  # reads the CA file now: errors come early
        self.timeout = timeout
        self.client_id = client_id
        self.max_answer = max_answer
        self.address = self.servers[0]  # the server connected to, once connected
        self._sock: socket.socket | None = None
        self._correlation = 0
        self._authenticating = False

    @property
    def name(self) -> str:
        return f"kafka://{self.address[0]}:{self.address[1]}"

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connect(self) -> None:
        failures = []
        for address in self.servers:
            try:
                sock = socket.create_connection(address, timeout=self.timeout)
            except OSError as e:
                failures.append(f"{address[0]}:{address[1]}: {e}")
                continue
            self.address = address
            break
        else:
            raise WireError(f"no Kafka listener could be reached ({'; '.join(failures)})")
        if self._context is not None:
            sock = wrap(sock, self._context, self.address[0], self.name)
        self._sock = sock
        if self.security.sasl:
            self._authenticating = True
            try:
                authenticate(self._exchange, self.security, self.name)
            except BaseException:
                self.close()
                raise
            finally:
                self._authenticating = False

    def call(self, api_key: int, **fields):
        """One request (kio's message of the version in `VERSIONS`) and its answer."""
        if self._sock is None:
            self._connect()
        return self._exchange(api_key, **fields)

    def _exchange(self, api_key: int, **fields):
        from kio.index import load_request_schema, load_response_schema
        from kio.serial import entity_reader, entity_writer

        version = VERSIONS[api_key]
        request_type = load_request_schema(api_key, version)
        response_type = load_response_schema(api_key, version)
        header_type = request_type.__header_schema__  # v1, or v2 for flexible versions
        self._correlation += 1
        buffer = io.BytesIO()
        entity_writer(header_type)(
            buffer,
            header_type(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=self._correlation,
                client_id=self.client_id,
            ),
        )
        entity_writer(request_type)(buffer, request_type(**fields))
        frame = buffer.getvalue()
        try:
            self._sock.sendall(struct.pack(">i", len(frame)) + frame)
            (size,) = struct.unpack(">i", self._receive(4))
            if not 0 < size <= self.max_answer:  # never allocated: the server may be hostile
                raise OSError(  # not a ConnectionError: no hint about TLS or SASL
                    f"an answer of {size} bytes announced (at most {self.max_answer})"
                )
            answer = self._receive(size)
        except OSError as e:
            self.close()
            hint = ""
            if isinstance(e, ConnectionError) and self._authenticating and self.security.tls:
                hint = " (in SASL authentication: does the listener have kafka.sasl.users?)"
            elif isinstance(e, ConnectionError) and not self.security.tls:
                hint = " (a listener with kafka.ssl.certfile closes plaintext connections)"
                if not self.security.sasl:
                    hint = (
                        " (a listener with kafka.sasl.users closes unauthenticated connections, "
                        "one with kafka.ssl.certfile plaintext ones)"
                    )
            raise WireError(f"{self.name}: {e}{hint}") from None
        _, used = entity_reader(response_type.__header_schema__)(answer, 0)
        body, _ = entity_reader(response_type)(answer, used)
        return body

    def _receive(self, n: int) -> bytes:
        data = bytearray(n)
        view, got = memoryview(data), 0
        while got < n:
            count = self._sock.recv_into(view[got:])
            if not count:
                raise ConnectionError("the broker closed the connection")
            got += count
        return bytes(data)

    @staticmethod
    def module(api_key: int):
        from kio.index import load_payload_module
        from kio.static.constants import EntityType

        return load_payload_module(api_key, VERSIONS[api_key], EntityType.request)

    # ------------------------------------------------------------ topics

    def listing(self, name: str) -> tuple[int, int]:
        """Metadata's answer for ``name`` (never creating it): its error code and
        partition count."""
        m = self.module(METADATA)
        answer = self.call(
            METADATA,
            topics=(m.MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        [found] = answer.topics
        return found.error_code, len(found.partitions)

    def topic(self, name: str) -> tuple[int, TopicConfig] | None:
        """The topic's partition count and settings, or None if it does not exist (or
        is not listed yet: it is being made)."""
        code, count = self.listing(name)
        if code in NOT_YET:
            return None
        if code != NONE:
            raise _error(code, name, None)
        m = self.module(DESCRIBE_CONFIGS)
        answer = self.call(
            DESCRIBE_CONFIGS,
            resources=(
                m.DescribeConfigsResource(
                    resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None
                ),
            ),
        )
        [result] = answer.results
        if result.error_code != NONE:
            raise _error(result.error_code, name, result.error_message)
        known = set(TopicConfig().to_properties())
        settings = {c.name: c.value for c in result.configs if c.name in known and c.value}
        return count, TopicConfig.from_properties(settings)

    def topic_created(self, name: str) -> tuple[int, TopicConfig]:
        """The topic's partition count and settings, created first if it does not exist."""
        if (found := self.topic(name)) is not None:
            return found
        self.create_topic(name)
        # Another client's creation may be under way (the answer was "exists"), or a
        # broker may list a new topic a moment after it answers: asked again, for at
        # most `timeout` seconds, before the topic counts as vanished.
        deadline, pause = time.monotonic() + self.timeout, 0.01
        while (found := self.topic(name)) is None:
            if time.monotonic() + pause > deadline:
                raise UnknownTopicError(f"topic {name!r} vanished as it was created")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        return found

    def create_topic(self, name: str) -> None:
        """Create ``name`` with the broker's default partitions; one that exists is fine."""
        m = self.module(CREATE_TOPICS)
        answer = self.call(
            CREATE_TOPICS,
            topics=(
                m.CreatableTopic(
                    name=name, num_partitions=-1, replication_factor=-1, assignments=(), configs=()
                ),
            ),
            timeout=datetime.timedelta(seconds=self.timeout),
        )
        [result] = answer.topics
        if result.error_code not in (NONE, TOPIC_EXISTS):
            raise _error(result.error_code, name, result.error_message)

    # ------------------------------------------------------------ producing

    def produce(
        self, topic: str, partition: int, batches: Sequence[bytes]
    ) -> list[tuple[int, int]]:
        """Append ``batches`` (acks=-1), at most `REQUEST_BYTES` a request; returns
        (first offset, record count) per request, in order."""
        m = self.module(PRODUCE)
        out, group, size = [], [], 0
        for batch in [*batches, None]:
            if group and (batch is None or size + len(batch) > REQUEST_BYTES):
                out.append(self._produce_group(m, topic, partition, group))
                group, size = [], 0
            if batch is not None:
                group.append(batch)
                size += len(batch)
        return out

    def _produce_group(self, m, topic: str, partition: int, group: list[bytes]) -> tuple[int, int]:
        answer = self.call(
            PRODUCE,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=self.timeout),
            topic_data=(
                m.TopicProduceData(
                    name=topic,
                    partition_data=(
                        m.PartitionProduceData(index=partition, records=b"".join(group)),
                    ),
                ),
            ),
        )
        [part] = answer.responses[0].partition_responses
        if part.error_code != NONE:
            raise _error(part.error_code, f"{topic}-{partition}", part.error_message)
        count = sum(read_header(batch).last_offset_delta + 1 for batch in group)
        return part.base_offset, count
