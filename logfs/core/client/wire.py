"""Delivering a `Producer`'s batches over Kafka's wire protocol, for
``Producer("kafka://HOST:PORT")``: to a logfs listener (docs/kafka.md) or any
Kafka broker that leads the partitions it is sent.

One blocking connection, requests one at a time, messages from kio's
generated classes (imported on first use: a program that never produces over
the network, such as a Spark worker, never loads them): Metadata for a
topic's partition count, DescribeConfigs for its settings, CreateTopics for a
topic that does not exist, Produce (acks=-1) of at most `REQUEST_BYTES` of
batches per request. A partition's error code
becomes the `LogfsError` class the store would have raised.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
from collections.abc import Sequence

from ..config import TopicConfig
from ..errors import (
    BatchTooLargeError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTopicError,
    LogfsError,
    ReadOnlyError,
    TopicExistsError,
    UnknownTopicError,
)
from ..format import read_header

SCHEME = "kafka://"
REQUEST_BYTES = 1 << 20  # batches per Produce request, as Kafka's max.request.size
PRODUCE, METADATA, CREATE_TOPICS, DESCRIBE_CONFIGS = 0, 3, 19, 32
VERSIONS = {PRODUCE: 9, METADATA: 12, CREATE_TOPICS: 7, DESCRIBE_CONFIGS: 4}
TOPIC_RESOURCE = 2
NONE, UNKNOWN_TOPIC, TOPIC_EXISTS = 0, 3, 36
ERRORS = {  # Kafka's error code -> the error the store would have raised
    2: InvalidBatchError,  # CORRUPT_MESSAGE
    10: BatchTooLargeError,  # MESSAGE_TOO_LARGE
    87: InvalidRecordError,  # INVALID_RECORD
    UNKNOWN_TOPIC: UnknownTopicError,
    TOPIC_EXISTS: TopicExistsError,
    17: InvalidTopicError,  # INVALID_TOPIC_EXCEPTION
    40: InvalidConfigError,  # INVALID_CONFIG
    29: ReadOnlyError,  # TOPIC_AUTHORIZATION_FAILED
}


class WireError(LogfsError):
    """The broker could not be reached, or answered with an unexpected error."""


def is_address(data: str) -> bool:
    return data.startswith(SCHEME)


def _error(code, what: str, message: str | None) -> LogfsError:
    cls = ERRORS.get(int(code), WireError)
    name = getattr(code, "name", str(code)).upper()
    return cls(f"{what}: {name}{': ' + message if message else ''}")


class Wire:
    """A connection to ``kafka://HOST:PORT`` (opened on first use)."""

    def __init__(self, address: str, timeout: float = 30.0) -> None:
        host, sep, port = address.removeprefix(SCHEME).rstrip("/").rpartition(":")
        if not sep or not port.isdigit():
            raise InvalidConfigError(f"{address!r}: expected kafka://HOST:PORT")
        self.address = (host.strip("[]"), int(port))
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._correlation = 0

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _call(self, api_key: int, **fields):
        from kio.index import load_request_schema, load_response_schema
        from kio.schema.request_header.v2.header import RequestHeader
        from kio.schema.response_header.v1.header import ResponseHeader
        from kio.serial import entity_reader, entity_writer

        version = VERSIONS[api_key]
        request_type = load_request_schema(api_key, version)
        self._correlation += 1
        buffer = io.BytesIO()
        entity_writer(RequestHeader)(
            buffer,
            RequestHeader(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=self._correlation,
                client_id="logfs-producer",
            ),
        )
        entity_writer(request_type)(buffer, request_type(**fields))
        frame = buffer.getvalue()
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self.address, timeout=self.timeout)
            self._sock.sendall(struct.pack(">i", len(frame)) + frame)
            (size,) = struct.unpack(">i", self._receive(4))
            answer = self._receive(size)
        except OSError as e:
            self.close()
            raise WireError(f"kafka://{self.address[0]}:{self.address[1]}: {e}") from None
        _, used = entity_reader(ResponseHeader)(answer, 0)
        body, _ = entity_reader(load_response_schema(api_key, version))(answer, used)
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
    def _module(api_key: int):
        from kio.index import load_payload_module
        from kio.static.constants import EntityType

        return load_payload_module(api_key, VERSIONS[api_key], EntityType.request)

    # ------------------------------------------------------------ topics

    def topic(self, name: str) -> tuple[int, TopicConfig] | None:
        """The topic's partition count and settings, or None if it does not exist."""
        m = self._module(METADATA)
        answer = self._call(
            METADATA,
            topics=(m.MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        [found] = answer.topics
        if found.error_code == UNKNOWN_TOPIC:
            return None
        if found.error_code != NONE:
            raise _error(found.error_code, name, None)
        m = self._module(DESCRIBE_CONFIGS)
        answer = self._call(
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
        return len(found.partitions), TopicConfig.from_properties(settings)

    def create_topic(self, name: str) -> None:
        """Create ``name`` with the broker's default partitions; one that exists is fine."""
        m = self._module(CREATE_TOPICS)
        answer = self._call(
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
        m = self._module(PRODUCE)
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
        answer = self._call(
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
