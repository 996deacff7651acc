"""Batches that claim or expand to more than they hold, for the tests that
throw them at the store, the mount and the listener (core/format/test_bombs.py,
mount/test_hostile.py)."""

from __future__ import annotations

import zlib

import cramjam
from kafka.record.default_records import DefaultRecordBatchBuilder

from logfs.core.format import compression
from logfs.core.format.compression import GZIP, SNAPPY, ZSTD
from logfs.core.format.record import (
    ATTRIBUTES_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    read_header,
    write_crc,
)

MIB = 1 << 20


def zeros_compressed(codec: int, size: int) -> bytes:
    """``size`` zero bytes compressed with ``codec``, built a MiB at a time."""
    chunk = bytes(MIB)
    if codec == GZIP:
        deflate = zlib.compressobj(wbits=31)
        return b"".join(deflate.compress(chunk) for _ in range(size // MIB)) + deflate.flush()
    if codec == SNAPPY:
        block = bytes(cramjam.snappy.compress_raw(bytes(compression.XERIAL_BLOCK)))
        framed = struct_block(block)
        return compression.XERIAL_HEADER + framed * (size // compression.XERIAL_BLOCK)
    module = cramjam.zstd if codec == ZSTD else cramjam.lz4
    compressor = module.Compressor()
    for _ in range(size // MIB):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def struct_block(block: bytes) -> bytes:
    return len(block).to_bytes(4, "big") + block


def bomb_batch(codec: int, size: int, records: int = 1) -> bytes:
    """A valid RecordBatch v2 header (CRC right) over ``size`` compressed zero bytes."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 16 * MIB)
    builder.append(0, timestamp=1, key=None, value=b"x", headers=[])
    batch = bytearray(builder.build())
    header = read_header(batch)
    body = zeros_compressed(codec, size)
    batch = batch[:HEADER_SIZE] + body
    attributes = header.attributes | codec
    fixed = header._replace(
        batch_length=len(batch) - LOG_OVERHEAD, attributes=attributes, records_count=records,
        last_offset_delta=records - 1, crc=0,
    )  # fmt: skip
    HEADER.pack_into(batch, 0, *fixed)
    assert batch[ATTRIBUTES_OFFSET + 1] == attributes & 0xFF
    write_crc(batch, 0, len(batch))
    return bytes(batch)
