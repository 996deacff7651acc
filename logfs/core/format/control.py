"""Control batches: the commit and abort markers a transaction ends with.

A control batch is a RecordBatch v2 (record.py) with the transactional and control
attribute bits set, the producer id and epoch of the transaction it ends, base
sequence -1, and one record (Kafka's ``EndTransactionMarker``):

- key, Kafka's ``ControlRecordType`` key: version int16 (0), type int16 (0 = ABORT,
  1 = COMMIT);
- value: version int16 (0), coordinator epoch int32.

Records of a control batch are never data: every reader leaves them out, and a
``read_committed`` reader learns from an ABORT marker that the producer's
transaction ends there (docs/format.md).
"""

from __future__ import annotations

import struct

from ..errors import CorruptRecordError
from .decoding import decode_records
from .record import (
    CONTROL_BIT,
    HEADER,
    TRANSACTIONAL_BIT,
    BatchHeader,
    encode_batch,
    write_crc,
)

ABORT, COMMIT = 0, 1
KEY = struct.Struct(">hh")  # version, type
VALUE = struct.Struct(">hi")  # version, coordinator epoch
KEY_VERSION = VALUE_VERSION = 0
NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}


def marker_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    """The control batch that ends a transaction: one record, its key and value as
    above, stamped ``timestamp``."""
    key = KEY.pack(KEY_VERSION, COMMIT if commit else ABORT)
    value = VALUE.pack(VALUE_VERSION, coordinator_epoch)
    plain = bytearray(encode_batch(base_offset, [value], keys=[key], timestamps=timestamp))
    header = BatchHeader._make(HEADER.unpack_from(plain))._replace(
        attributes=TRANSACTIONAL_BIT | CONTROL_BIT,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        crc=0,
    )
    HEADER.pack_into(plain, 0, *header)
    write_crc(plain, 0, len(plain))
    return bytes(plain)


def transactional_batch(
    values: list[bytes | None],
    keys: list[bytes | None],
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
) -> bytes:
    """A transactional data batch a coordinator writes for a producer (its offsets
    committed in a transaction): the producer's id and epoch, sequence -1."""
    plain = bytearray(encode_batch(0, values, keys=keys, timestamps=timestamp))
    header = BatchHeader._make(HEADER.unpack_from(plain))._replace(
        attributes=TRANSACTIONAL_BIT,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        crc=0,
    )
    HEADER.pack_into(plain, 0, *header)
    write_crc(plain, 0, len(plain))
    return bytes(plain)


def marker_type(batch: bytes | memoryview, header: BatchHeader) -> int:
    """ABORT or COMMIT, read from a control batch's first record's key.

    Raises:
        CorruptRecordError: the batch holds no record, or its key is not a
            control record key Kafka writes.
    """
    records = decode_records(batch, header)
    if not records or records[0].key is None or len(records[0].key) < KEY.size:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has no key")
    _, kind = KEY.unpack_from(records[0].key)
    return kind


def marker_coordinator_epoch(batch: bytes | memoryview, header: BatchHeader) -> int:
    """The coordinator epoch of a marker's value (-1 when it has none)."""
    records = decode_records(batch, header)
    value = records[0].value if records else None
    if value is None or len(value) < VALUE.size:
        return -1
    return VALUE.unpack_from(value)[1]
