"""Kafka's compression codecs for the records section of a batch.

The codec id is the low three bits of the batch attributes:

    0 none   1 gzip   2 snappy   3 lz4   4 zstd

What Kafka's Java producer writes, and so what this module reads and writes:

- gzip: one gzip member (RFC 1952).
- snappy: xerial's framing: a 16-byte header (``\\x82SNAPPY\\x00``, version 1,
  compatible version 1, both big-endian int32), then blocks of a big-endian
  int32 length followed by that many bytes of raw snappy. Readers also accept
  a bare raw snappy stream, as Kafka does.
- lz4: the LZ4 frame format with independent blocks (Kafka's reader rejects
  linked blocks), 64 KiB maximum block size, no content size or checksums.
- zstd: one zstd frame.

Decompression is bounded: `decompress` writes into a buffer of ``limit`` bytes
and fails as soon as the output would pass it, so a small batch that expands to
gigabytes (a "zip bomb") costs at most ``limit`` bytes of memory, never more.
Appends allow `append_limit` (`MAX_DECOMPRESSED_BYTES`, or the topic's
``max.message.bytes`` when larger); reading a stored batch allows
`READ_LIMIT`, the most a batch's 32-bit size fields can describe.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import numpy as np

from ..errors import CorruptRecordError, UnsupportedCodecError

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {"uncompressed": NONE, "producer": NONE, **{v: k for k, v in NAMES.items()}}

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024

LZ4_MAGIC = 0x184D2204
LZ4_BLOCK = 64 * 1024
# FLG: version 01, independent blocks; BD: 64 KiB maximum block size.
LZ4_FLG, LZ4_BD = 0b0110_0000, 4 << 4

MAX_DECOMPRESSED_BYTES = 16 << 20  # what one appended batch's records may decompress to
READ_LIMIT = (1 << 31) - 1  # a stored batch: at most what an int32 length describes
USUAL_RATIO = 8  # records decompress to at most this many times their size, usually


class DecompressedTooLargeError(CorruptRecordError):
    """A compressed records section expands to more than its limit."""


def append_limit(max_message_bytes: int) -> int:
    """The bytes an appended batch's records may decompress to: `MAX_DECOMPRESSED_BYTES`,
    or the topic's ``max.message.bytes`` when that is larger (so that whatever may be
    appended uncompressed may be appended compressed too)."""
    return max(MAX_DECOMPRESSED_BYTES, max_message_bytes)


def compress(codec: int, data: bytes) -> bytes:
    """The compressed form of a records section."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return _lz4_frame(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes, limit: int = READ_LIMIT) -> bytes | memoryview:
    """The records section of a compressed batch, at most ``limit`` bytes of it.

    Raises:
        DecompressedTooLargeError: it expands to more than ``limit`` bytes (found
            while decompressing, before more than ``limit`` bytes are held).
        CorruptRecordError: it does not decompress.
    """
    try:
        if codec == NONE:
            return data
        if codec == GZIP:
            return _gzip_decompress(data, limit)
        if codec == SNAPPY:
            return _xerial_decompress(data, limit)
        if codec in (LZ4, ZSTD):
            return _decompress_into(codec, data, limit)
    except (OSError, EOFError, zlib.error, cramjam.DecompressionError) as e:
        raise CorruptRecordError(f"cannot decompress {NAMES[codec]} records: {e}") from None
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def _decompress_into(codec: int, data: bytes, limit: int) -> memoryview:
    """lz4 or zstd into a buffer: first one sized for a usual compression ratio,
    then, if the output did not fit, one of ``limit`` bytes (+1, to tell a
    section of exactly ``limit`` bytes from a larger one)."""
    module = cramjam.lz4 if codec == LZ4 else cramjam.zstd
    guess = min(limit, max(64 * 1024, USUAL_RATIO * len(data)))
    for size in dict.fromkeys((guess, limit)):
        out = np.empty(size + 1, np.uint8)  # its pages are taken only as they are written
        try:
            written = module.decompress_into(data, out)
        except cramjam.DecompressionError as e:
            if "whole buffer" not in str(e):
                raise
            continue  # it did not fit
        if written <= size:
            return memoryview(out)[:written]
    raise DecompressedTooLargeError(f"{NAMES[codec]} records decompress to more than {limit} bytes")


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    """gzip members one after the other (Kafka writes one; readers take more)."""
    out, rest = [], data
    while rest:
        inflate = zlib.decompressobj(wbits=31)
        out.append(inflate.decompress(rest, limit + 1 - sum(map(len, out))))
        if sum(map(len, out)) > limit:
            raise DecompressedTooLargeError(f"gzip records decompress to more than {limit} bytes")
        if not inflate.eof:
            raise CorruptRecordError("cannot decompress gzip records: truncated stream")
        rest = inflate.unused_data
    return b"".join(out)


def _raw_snappy(block: bytes | memoryview, budget: int, limit: int) -> bytes:
    """One raw snappy block, refused before decompressing when its stated
    length passes what is left of ``limit`` (``budget``)."""
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise DecompressedTooLargeError(f"snappy records decompress to more than {limit} bytes")
    return bytes(cramjam.snappy.decompress_raw(block))


def _xerial_compress(data: bytes) -> bytes:
    out = [XERIAL_HEADER]
    for start in range(0, len(data), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK]))
        out += [struct.pack(">i", len(block)), block]
    return b"".join(out)


def _xerial_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_HEADER[:8]):
        return _raw_snappy(data, limit, limit)
    out, pos, total = [], len(XERIAL_HEADER), 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes overruns the data")
        out.append(_raw_snappy(data[pos : pos + length], limit - total, limit))
        total += len(out[-1])
        pos += length
    return b"".join(out)


def _lz4_frame(data: bytes) -> bytes:
    descriptor = bytes([LZ4_FLG, LZ4_BD])
    out = [struct.pack("<I", LZ4_MAGIC), descriptor, bytes([(_xxh32(descriptor) >> 8) & 0xFF])]
    for start in range(0, len(data), LZ4_BLOCK):
        chunk = data[start : start + LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):  # incompressible: store it, flagged by the high bit
            out += [struct.pack("<I", len(chunk) | 0x8000_0000), chunk]
        else:
            out += [struct.pack("<I", len(block)), block]
    out.append(b"\0\0\0\0")  # end mark
    return b"".join(out)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a short input (the lz4 frame descriptor: under 16 bytes)."""
    assert len(data) < 16
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        h = (_rotl((h + byte * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)
