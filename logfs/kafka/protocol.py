"""Kafka's request and response frames, with the message classes `kio`
generates from Kafka's own JSON schemas (no struct here is written by hand).

A frame is a 4-byte big-endian length and that many bytes: a request header
(v1, or v2 for a flexible request version) and the request; a response header
(v0 for ApiVersions and non-flexible versions, else v1) and the response.

Which API versions are served is `SERVED`; ApiVersions lists exactly these.
A request for any other API or version parses as a `Request` without a body:
the broker closes its connection, as Kafka's does (ApiVersions excepted,
which is answered in version 0's layout so that the client can retry).

Records in a Fetch response are not serialized here: `encode_response`
writes a marker where a partition's records go and `Reply.parts` splits the
frame there, so the server sends those bytes from the segment file (the served
Fetch versions write their frames themselves: fetchwire.py). Records
in a Produce request are not copied either: `read_request` reads them as
views of the frame (writable when the frame's buffer is), so the log checks
and appends them where they arrived.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import struct
import types
import typing
from collections.abc import Iterable
from typing import Any, NamedTuple

from kio._kio_native import get_field_reader  # what kio.serial.entity_reader uses (kio<0.7)
from kio.index import load_payload_module, load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import (
    compact_array_reader,
    legacy_array_reader,
    read_int32,
    read_unsigned_varint,
)
from kio.static.constants import EntityType

__all__ = ["ErrorCode", "SERVED"]

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID = 18, 19, 20, 22
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 37, 44
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 13, 14, 15, 16
DELETE_GROUPS, OFFSET_DELETE = 42, 47
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_LOG_DIRS = 21, 23, 35
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 60, 61, 65, 66
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31

# API key -> (lowest, highest) version served. Produce from v3 and Fetch from v4 carry
# RecordBatch v2; Fetch v13+ and Produce v13 name topics by id, which logfs has not.
SERVED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 12),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 7),
    METADATA: (0, 12),
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 5),
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    INIT_PRODUCER_ID: (0, 5),
    SASL_HANDSHAKE: (0, 1),
    SASL_AUTHENTICATE: (0, 2),
    # The group coordinator (group_api.py). OffsetCommit v10+ and OffsetFetch v10+
    # name topics by id; FindCoordinator v5+ is Kafka 4's (transactions' errors).
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 4),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    OFFSET_DELETE: (0, 0),
    # KIP-848's consumer group protocol (consumer_group_api.py)
    CONSUMER_GROUP_HEARTBEAT: (0, 1),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    # The logs for administrators (log_admin.py), the cluster. Kafka 4
    # serves OffsetForLeaderEpoch and DescribeLogDirs from v2 and v1 up, as here.
    DELETE_RECORDS: (0, 2),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    DESCRIBE_LOG_DIRS: (1, 4),
    DESCRIBE_CLUSTER: (0, 2),
    # Transactions (transactions.py). AddPartitionsToTxn v4+ is between brokers; the
    # versions of Kafka 4's transaction version 2 (EndTxn v5, TxnOffsetCommit v5) are
    # used only by clients told of the feature, which this node does not advertise.
    ADD_PARTITIONS_TO_TXN: (0, 3),
    ADD_OFFSETS_TO_TXN: (0, 4),
    END_TXN: (0, 4),
    TXN_OFFSET_COMMIT: (0, 4),
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    # ACLs (acls.py): the ones the owners and modes imply; none are kept. Kafka 4
    # serves them from v1 up (v0 has no pattern types).
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
}

_SIZE = struct.Struct(">i")
MARKER_SIZE = 16


class BadRequest(Exception):
    """A frame that does not parse: the connection it came on is closed."""


class Request(NamedTuple):
    """A parsed request: its header, and its body (None when not served)."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    body: Any


def _read(entity_type, frame: bytes | memoryview, offset: int, reader=None):
    try:
        return (reader or entity_reader(entity_type))(frame, offset)
    except Exception as e:  # noqa: BLE001 - any parse failure is the client's bad frame
        raise BadRequest(f"cannot parse {entity_type.__name__}: {e}") from None


@functools.cache
def records_as_views(entity_type: type):
    """A reader of ``entity_type`` that builds the same kio message as kio's own
    reader, except that ``records`` fields are views of the frame instead of
    copies (writable when the frame is a read-only view of a writable buffer,
    as the server's frames are). Every other field is read by kio's field
    readers; arrays of messages recurse; a flexible message's tagged fields
    (Produce defines none) are skipped, as Kafka skips unknown ones."""
    flexible = entity_type.__flexible__
    steps = []
    for f in dataclasses.fields(entity_type):
        kafka_type = f.metadata.get("kafka_type")
        if "tag" in f.metadata:
            raise TypeError(f"{entity_type.__name__}.{f.name}: tagged fields are read by kio")
        if kafka_type == "records":
            steps.append((f.name, _records_view if flexible else _legacy_records_view))
        elif kafka_type is None:  # an array of messages
            (item, _) = typing.get_args(f.type)
            array = compact_array_reader if flexible else legacy_array_reader
            steps.append((f.name, array(records_as_views(item))))
        else:
            steps.append((f.name, get_field_reader(entity_type, f, False, False)))

    def read(frame: memoryview, offset: int) -> tuple[Any, int]:
        start, values = offset, {}
        for name, reader in steps:
            values[name], size = reader(frame, offset)
            offset += size
        if flexible:
            offset = _skip_tagged_fields(frame, offset)
        return entity_type(**values), offset - start

    return read


def _legacy_records_view(frame: memoryview, offset: int) -> tuple[memoryview | None, int]:
    size, used = read_int32(frame, offset)
    return _view(frame, offset + used, size), used + max(size, 0)


def _records_view(frame: memoryview, offset: int) -> tuple[memoryview | None, int]:
    size, used = read_unsigned_varint(frame, offset)  # compact: length + 1, 0 for null
    return _view(frame, offset + used, size - 1), used + max(size - 1, 0)


def _view(frame: memoryview, start: int, size: int) -> memoryview | None:
    """``frame[start:start + size]`` without a copy (None for a null size),
    writable when ``frame`` is a read-only view of a whole writable buffer.

    Raises:
        ValueError: the bytes run past the frame's end.
    """
    if size < 0:
        return None
    if start + size > len(frame):
        raise ValueError(f"records of {size} bytes at {start} run past the frame's end")
    buffer = getattr(frame, "obj", None)
    if buffer is not None and not isinstance(buffer, bytes):
        whole = memoryview(buffer).cast("B")
        if not whole.readonly and whole.nbytes == frame.nbytes:
            return whole[start : start + size]  # the frame's own buffer, writable
    return memoryview(frame)[start : start + size]


def _skip_tagged_fields(frame: memoryview, offset: int) -> int:
    """The offset after a flexible message's tagged fields at ``offset``.

    Raises:
        ValueError: they run past the frame's end.
    """
    count, used = read_unsigned_varint(frame, offset)
    offset += used
    for _ in range(count):
        _, used = read_unsigned_varint(frame, offset)  # the tag
        size, size_used = read_unsigned_varint(frame, offset + used)
        offset += used + size_used + size
    if offset > len(frame):
        raise ValueError("tagged fields run past the frame's end")
    return offset


_request_type = functools.cache(load_request_schema)  # kio resolves a module path per call


def read_request(frame: bytes) -> Request:
    """Parse one request frame (without its length field).

    Raises:
        BadRequest: the header or a served request does not parse.
    """
    header, used = _read(RequestHeaderV1, frame, 0)
    key, version = header.request_api_key, header.request_api_version
    low, high = SERVED.get(key, (1, 0))
    body = None
    if low <= version <= high:
        request_type = _request_type(key, version)
        if request_type.__flexible__:
            header, used = _read(RequestHeaderV2, frame, 0)
        # Bytes after the request are ignored, as Kafka's broker does: librdkafka's
        # Metadata v12 carries three.
        reader = records_as_views(request_type) if key == PRODUCE else None
        body, _ = _read(request_type, frame, used, reader)
    return Request(key, version, header.correlation_id, header.client_id, body)


# ---------------------------------------------------------------- building responses


@functools.cache
def schema(api_key: int, version: int) -> types.ModuleType:
    """The module of ``api_key``'s response classes at ``version``."""
    return load_payload_module(api_key, version, EntityType.response)


def make(cls: type, **values: Any) -> Any:
    """An instance of a kio message class from the values its version has:
    fields the version lacks are dropped, so one handler serves every version."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


# ---------------------------------------------------------------- encoding responses


class Region(NamedTuple):
    """Bytes of an open file, sent with ``sendfile``."""

    fd: int
    position: int
    size: int


class Reply:
    """A response and the file regions its records come from."""

    def __init__(self, body: Any) -> None:
        self.body = body
        self.regions: dict[bytes, Region] = {}
        self.parts: list[bytes | Region] | None = None  # the frame, when written by its handler
        self._kept: list[Region] = []

    def keep(self, region: Region) -> Region:
        """``region``, its fd closed with the reply's (see `close`)."""
        self._kept.append(region)
        return region

    def records(self, region: Region | None) -> bytes:
        """What to put in a partition's ``records``: a marker standing for
        ``region`` (empty bytes for none)."""
        if region is None or region.size == 0:
            return b""
        marker = os.urandom(MARKER_SIZE)
        self.regions[marker] = region  # a kept region: closed by `close` (`keep`)
        return marker

    def close(self) -> None:
        for region in self._kept:
            os.close(region.fd)
        self._kept.clear()
        self.regions.clear()


def encode_response(request: Request, reply: Reply) -> list[bytes | Region]:
    """The response frame as parts: bytes, and file regions where records go."""
    if reply.parts is not None:
        return reply.parts
    cls = type(reply.body)
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    if request.api_key == API_VERSIONS or not cls.__flexible__:
        entity_writer(ResponseHeaderV0)(
            buffer, ResponseHeaderV0(correlation_id=request.correlation_id)
        )
    else:
        entity_writer(ResponseHeaderV1)(
            buffer, ResponseHeaderV1(correlation_id=request.correlation_id)
        )
    entity_writer(cls)(buffer, reply.body)
    frame = buffer.getbuffer()
    parts = list(_split(bytes(frame), reply.regions, cls.__flexible__))
    total = sum(len(p) if isinstance(p, bytes) else p.size for p in parts) - 4
    parts[0] = _SIZE.pack(total) + parts[0][4:]
    return parts


def _split(frame: bytes, regions: dict[bytes, Region], flexible: bool) -> Iterable[bytes | Region]:
    """Cut ``frame`` at each marker and its length field, which is rewritten
    for the region's size (compact bytes: varint of size + 1; else int32)."""
    if not regions:
        yield frame
        return
    found = sorted((frame.index(marker), marker) for marker in regions)
    start = 0
    for at, marker in found:
        region = regions[marker]
        prefix = 1 if flexible else 4  # the marker's own length field
        yield frame[start : at - prefix] + (
            _uvarint(region.size + 1) if flexible else _SIZE.pack(region.size)
        )
        yield region
        start = at + MARKER_SIZE
    yield frame[start:]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame_size(prefix: bytes) -> int:
    """The length field of a frame's first four bytes."""
    return _SIZE.unpack(prefix)[0]
