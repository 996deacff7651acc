"""A Fetch response's frame written field by field, for the versions served
(4 to 12), byte for byte as kio's generic writer writes it (tests check both
over many shapes); other versions go through kio (protocol.py).

The frame, in Kafka's ``FetchResponse.json`` order (``v`` the version; a
flexible version, 12, writes compact arrays, strings and bytes as unsigned
varints of length + 1, with 0 for null, and ends each structure with its
tagged fields: none are written, as none is set)::

    int32 size                          the frame's length after this field
    int32 correlation_id                response header (v0; v12: v1, + tags)
    int32 throttle_time_ms
    int16 error_code, int32 session_id  v7+
    [responses]
      string topic
      [partitions]
        int32 partition_index
        int16 error_code
        int64 high_watermark, last_stable_offset
        int64 log_start_offset          v5+
        [aborted_transactions] or null: int64 producer_id, int64 first_offset
        int32 preferred_read_replica    v11+
        bytes records                   never null: empty when there are none

A partition's records are a file region, not bytes: the frame is cut into
bytes and regions (`Region`), and the connection sends each region with
``sendfile`` (sending.py), so the record bytes never enter Python.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .protocol import Region

FIRST, LAST = 4, 12  # the versions written here
FLEXIBLE = 12

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error code, high watermark, last stable offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_TOP_V7 = struct.Struct(">ihi")  # throttle time, error code, session id


class Partition(NamedTuple):
    """One partition's answer: its fields, and the file region of its records."""

    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer id, first offset); None: not asked
    region: Region | None


def encode(
    version: int, correlation_id: int, topics: list[tuple[str, list[Partition]]]
) -> list[bytes | Region]:
    """The frame of a Fetch response (throttle time 0, no error, session 0) at
    ``version`` (4 to 12), as bytes and regions.

    Raises:
        ValueError: a version not written here.
    """
    if not FIRST <= version <= LAST:
        raise ValueError(f"Fetch v{version} is written by kio")
    flexible = version >= FLEXIBLE
    out = bytearray(8)  # the size, filled in last, and the correlation id
    _I32.pack_into(out, 4, correlation_id)
    if flexible:
        out.append(0)  # the header's tagged fields
    out += _TOP_V7.pack(0, 0, 0) if version >= 7 else _I32.pack(0)
    parts: list[bytes | Region] = []
    _length(out, len(topics), flexible)
    for name, partitions in topics:
        encoded = name.encode()
        _length(out, len(encoded), flexible, short=True)
        out += encoded
        _length(out, len(partitions), flexible)
        for p in partitions:
            _partition(out, p, version, flexible)
            size = p.region.size if p.region is not None else 0
            _length(out, size, flexible)
            if size:
                parts.append(bytes(out))
                parts.append(p.region)
                out = bytearray()
            if flexible:
                out.append(0)  # the partition's tagged fields
        if flexible:
            out.append(0)  # the topic's
    if flexible:
        out.append(0)  # the response's
    parts.append(bytes(out))
    total = sum(len(p) if isinstance(p, bytes) else p.size for p in parts) - 4
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, total)
    parts[0] = bytes(first)
    return parts


def _partition(out: bytearray, p: Partition, version: int, flexible: bool) -> None:
    """A partition's fields before its records' length."""
    if version >= 5:
        out += _PARTITION_V5.pack(
            p.index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset
        )
    else:
        out += _PARTITION_V4.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset)
    if p.aborted is None:
        out += b"\0" if flexible else b"\xff\xff\xff\xff"
    else:
        _length(out, len(p.aborted), flexible)
        for producer_id, first_offset in p.aborted:
            out += _ABORTED.pack(producer_id, first_offset)
            if flexible:
                out.append(0)  # the entry's tagged fields
    if version >= 11:
        out += b"\xff\xff\xff\xff"  # preferred read replica: none (-1)


def _length(out: bytearray, n: int, flexible: bool, short: bool = False) -> None:
    """An array's, string's or bytes' length: a compact varint of n + 1, else
    int16 (``short``: a string) or int32."""
    if not flexible:
        out += _I16.pack(n) if short else _I32.pack(n)
        return
    n += 1
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
