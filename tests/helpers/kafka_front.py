"""A multi-broker Kafka cluster's shape in front of one logfs listener: brokers 1, 2
and 3 on three ports of 127.0.0.1, each checking what a real broker checks before it
forwards a request to the listener behind them.

- Metadata is the listener's answer with the three brokers and each partition's
  leader as `Front.leaders` says (spread over the brokers by topic and partition
  unless a test moved it: `move`);
- FindCoordinator is answered here: a group's coordinator is `Front.coordinators[0]`,
  a transactional id's `Front.coordinators[1]`;
- Produce, Fetch and ListOffsets are forwarded with the partitions this broker leads;
  the others answer NOT_LEADER_OR_FOLLOWER;
- InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn at a broker that is not
  the transaction coordinator, OffsetFetch and TxnOffsetCommit at one that is not the
  group coordinator, answer NOT_COORDINATOR;
- anything else (CreateTopics, DescribeConfigs, ...) is forwarded as it is.

Each client connection has its own connection to the listener, so requests and answers
keep their order. Plaintext only; the request versions are the ones logfs's `Wire`
sends (core/client/wire.py). For tests to see where requests went, `Front.answered`
counts (broker, API key) of the requests forwarded, `Front.refused` those refused, and
`Front.led` (broker, API key, topic, partition) of the partitions forwarded.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import io
import socket
import struct
import threading
import zlib

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

NODES = (1, 2, 3)
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FETCH, FIND_COORDINATOR = 0, 1, 2, 3, 9, 10
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
GROUP_APIS = {OFFSET_FETCH: 0, TXN_OFFSET_COMMIT: 0}
TXN_APIS = {INIT_PRODUCER_ID: 1, ADD_PARTITIONS: 1, ADD_OFFSETS: 1, END_TXN: 1}
ROUTED = {PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, *GROUP_APIS, *TXN_APIS}
NO_TIME = datetime.timedelta(0)
NOT_LEADER = ErrorCode.not_leader_or_follower
NOT_COORDINATOR = ErrorCode.not_coordinator


def _read_frame(sock: socket.socket) -> bytes | None:
    """One frame without its length field; None at the end of the connection."""
    head = _exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class Front:
    """Brokers `NODES` in front of the listener at ``upstream`` (module docstring)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.servers = {node: socket.create_server(("127.0.0.1", 0)) for node in NODES}
        self.ports = {node: s.getsockname()[1] for node, s in self.servers.items()}
        self.moved: dict[tuple[str, int], int] = {}
        self.coordinators = {0: NODES[2], 1: NODES[1]}
        self.answered: collections.Counter = collections.Counter()
        self.refused: collections.Counter = collections.Counter()
        self.led: collections.Counter = collections.Counter()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.closed = False
        for node, server in self.servers.items():
            threading.Thread(target=self._accept, args=(node, server), daemon=True).start()

    @property
    def bootstrap(self) -> str:
        """The first broker's address (any broker answers Metadata)."""
        return f"127.0.0.1:{self.ports[NODES[0]]}"

    def leader(self, topic: str, partition: int) -> int:
        """The broker leading ``topic-partition``: spread, unless `move` said otherwise."""
        with self.lock:
            moved = self.moved.get((topic, partition))
        return moved or NODES[(zlib.crc32(topic.encode()) + partition) % len(NODES)]

    def move(self, topic: str, partition: int, node: int | None = None) -> int:
        """Give the partition's leadership to ``node`` (None: the next broker); returns it."""
        if node is None:
            node = NODES[(NODES.index(self.leader(topic, partition)) + 1) % len(NODES)]
        with self.lock:
            self.moved[(topic, partition)] = node
        return node

    def close(self) -> None:
        self.closed = True
        for server in self.servers.values():
            server.close()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def __enter__(self) -> Front:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ connections

    def _accept(self, node: int, server: socket.socket) -> None:
        while not self.closed:
            try:
                client, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(node, client), daemon=True).start()

    def _serve(self, node: int, client: socket.socket) -> None:
        upstream = None
        try:
            upstream = socket.create_connection(self.upstream, timeout=60)
            with self.lock:
                self.sockets += [client, upstream]
            while (frame := _read_frame(client)) is not None:
                answer = self._answer(node, frame, upstream)
                if answer is None:
                    return
                client.sendall(struct.pack(">i", len(answer)) + answer)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                if s is not None:
                    s.close()

    def _forward(self, frame: bytes, upstream: socket.socket) -> bytes | None:
        upstream.sendall(struct.pack(">i", len(frame)) + frame)
        return _read_frame(upstream)

    # ------------------------------------------------------------ one request

    def _answer(self, node: int, frame: bytes, upstream: socket.socket) -> bytes | None:
        api_key, version = struct.unpack_from(">hh", frame)
        if api_key not in ROUTED:
            return self._forward(frame, upstream)
        request_type = load_request_schema(api_key, version)
        header, used = entity_reader(request_type.__header_schema__)(frame, 0)
        body, _ = entity_reader(request_type)(frame, used)
        key_type = GROUP_APIS.get(api_key, TXN_APIS.get(api_key))
        if key_type is not None and self.coordinators[key_type] != node:
            self.refused[(node, api_key)] += 1
            return self._encode(header, _not_coordinator(api_key, version, body))
        if api_key == FIND_COORDINATOR:
            coordinator = self.coordinators[body.key_type]
            return self._encode(header, self._coordinator(version, coordinator))
        if api_key == METADATA:
            answer = self._forward(frame, upstream)
            if answer is None:
                return None
            answer = self._metadata(version, self._decode(api_key, version, answer))
            return self._encode(header, answer)
        if api_key in (PRODUCE, FETCH, LIST_OFFSETS):
            return self._partitioned(node, api_key, version, header, body, frame, upstream)
        self.answered[(node, api_key)] += 1
        return self._forward(frame, upstream)

    def _partitioned(self, node, api_key, version, header, body, frame, upstream):
        """Forward the partitions ``node`` leads; NOT_LEADER_OR_FOLLOWER for the rest."""
        topics_field, name_field, partitions_field, index_field = LAYOUT[api_key]
        mine, others = [], []
        for topic in getattr(body, topics_field):
            name, led, rest = getattr(topic, name_field), [], []
            for p in getattr(topic, partitions_field):
                index = getattr(p, index_field)
                if self.leader(name, index) == node:
                    led.append(p)
                    self.led[(node, api_key, name, index)] += 1
                else:
                    rest.append(index)
            if led:
                mine.append(dataclasses.replace(topic, **{partitions_field: tuple(led)}))
            if rest:
                others.append((name, rest))
        if not others:
            self.answered[(node, api_key)] += 1
            return self._forward(frame, upstream)
        self.refused[(node, api_key)] += 1
        if mine:
            self.answered[(node, api_key)] += 1
            request = dataclasses.replace(body, **{topics_field: tuple(mine)})
            answer = self._forward(self._request(header, request), upstream)
            if answer is None:
                return None
            response = self._decode(api_key, version, answer)
        else:
            response = _empty(api_key, version)
        return self._encode(header, _with_not_leader(api_key, version, response, others))

    # ------------------------------------------------------------ answers made here

    def _metadata(self, version: int, answer):
        m = _module(METADATA, version)
        brokers = tuple(
            m.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=self.ports[n], rack=None)
            for n in NODES
        )
        topics = []
        for topic in answer.topics:
            leaders = [self.leader(topic.name, p.partition_index) for p in topic.partitions]
            partitions = tuple(
                dataclasses.replace(p, leader_id=n, replica_nodes=NODES, isr_nodes=NODES)
                for p, n in zip(topic.partitions, leaders, strict=True)
            )
            topics.append(dataclasses.replace(topic, partitions=partitions))
        return dataclasses.replace(
            answer, brokers=brokers, controller_id=NODES[0], topics=tuple(topics)
        )

    def _coordinator(self, version: int, node: int):
        m = _module(FIND_COORDINATOR, version)
        return m.FindCoordinatorResponse(
            throttle_time=NO_TIME, error_code=ErrorCode.none, error_message=None,
            node_id=node, host="127.0.0.1", port=self.ports[node],
        )  # fmt: skip

    # ------------------------------------------------------------ coding

    def _decode(self, api_key: int, version: int, frame: bytes):  # an answer from upstream
        response_type = load_response_schema(api_key, version)
        _, used = entity_reader(response_type.__header_schema__)(frame, 0)
        body, _ = entity_reader(response_type)(frame, used)
        return body

    def _encode(self, header, body) -> bytes:  # the answer ``body`` to ``header``'s request
        buffer = io.BytesIO()
        header_type = type(body).__header_schema__
        entity_writer(header_type)(buffer, header_type(correlation_id=header.correlation_id))
        entity_writer(type(body))(buffer, body)
        return buffer.getvalue()

    def _request(self, header, body) -> bytes:  # a request frame without its length
        buffer = io.BytesIO()
        entity_writer(type(header))(buffer, header)
        entity_writer(type(body))(buffer, body)
        return buffer.getvalue()


# Where a request's partitions are: (its topics, a topic's name, its partitions, a
# partition's index), by API key.
LAYOUT = {
    PRODUCE: ("topic_data", "name", "partition_data", "index"),
    FETCH: ("topics", "topic", "partitions", "partition"),
    LIST_OFFSETS: ("topics", "name", "partitions", "partition_index"),
}


def _module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.response)


def _empty(api_key: int, version: int):
    m = _module(api_key, version)
    if api_key == PRODUCE:
        return m.ProduceResponse(responses=(), throttle_time=NO_TIME)
    if api_key == FETCH:
        return m.FetchResponse(
            throttle_time=NO_TIME, error_code=ErrorCode.none, session_id=0, responses=()
        )
    return m.ListOffsetsResponse(throttle_time=NO_TIME, topics=())


def _with_not_leader(api_key: int, version: int, response, others):
    """``response`` with NOT_LEADER_OR_FOLLOWER for each of ``others`` ((topic, [partition]))."""
    m = _module(api_key, version)
    if api_key == PRODUCE:
        extra = tuple(
            m.TopicProduceResponse(
                name=name,
                partition_responses=tuple(
                    m.PartitionProduceResponse(
                        index=p,
                        error_code=NOT_LEADER,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=None,
                    )
                    for p in ps
                ),
            )
            for name, ps in others
        )
        return dataclasses.replace(response, responses=response.responses + extra)
    if api_key == FETCH:
        extra = tuple(
            m.FetchableTopicResponse(
                topic=name,
                partitions=tuple(
                    m.PartitionData(
                        partition_index=p,
                        error_code=NOT_LEADER,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        diverging_epoch=m.EpochEndOffset(epoch=-1, end_offset=-1),
                        current_leader=m.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                        snapshot_id=m.SnapshotId(end_offset=-1, epoch=-1),
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=None,
                    )
                    for p in ps
                ),
            )
            for name, ps in others
        )
        return dataclasses.replace(response, responses=response.responses + extra)
    extra = tuple(
        m.ListOffsetsTopicResponse(
            name=name,
            partitions=tuple(
                m.ListOffsetsPartitionResponse(
                    partition_index=p,
                    error_code=NOT_LEADER,
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
                for p in ps
            ),
        )
        for name, ps in others
    )
    return dataclasses.replace(response, topics=response.topics + extra)


def _not_coordinator(api_key: int, version: int, body):
    """The answer of a coordinator's request at a broker that is not its coordinator."""
    m = _module(api_key, version)
    if api_key == INIT_PRODUCER_ID:
        return m.InitProducerIdResponse(
            throttle_time=NO_TIME, error_code=NOT_COORDINATOR, producer_id=-1, producer_epoch=-1
        )
    if api_key == ADD_OFFSETS:
        return m.AddOffsetsToTxnResponse(throttle_time=NO_TIME, error_code=NOT_COORDINATOR)
    if api_key == END_TXN:
        return m.EndTxnResponse(throttle_time=NO_TIME, error_code=NOT_COORDINATOR)
    if api_key == OFFSET_FETCH:
        return m.OffsetFetchResponse(throttle_time=NO_TIME, topics=(), error_code=NOT_COORDINATOR)
    if api_key == ADD_PARTITIONS:
        return m.AddPartitionsToTxnResponse(
            throttle_time=NO_TIME,
            results_by_topic_v3_and_below=tuple(
                m.AddPartitionsToTxnTopicResult(
                    name=t.name,
                    results_by_partition=tuple(
                        m.AddPartitionsToTxnPartitionResult(
                            partition_index=p, partition_error_code=NOT_COORDINATOR
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.v3_and_below_topics
            ),
        )
    return m.TxnOffsetCommitResponse(
        throttle_time=NO_TIME,
        topics=tuple(
            m.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=tuple(
                    m.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=NOT_COORDINATOR
                    )
                    for p in t.partitions
                ),
            )
            for t in body.topics
        ),
    )
