"""A stored batch forwarded as another producer's, for a mirror: its records, keys,
headers, timestamps and codec unchanged, its header the forwarding producer's.

The header gets the producer's id, epoch and base sequence and the transactional bit;
base offset 0 and partition leader epoch -1 (the receiving broker assigns both); the
CRC is computed again. A batch the log cleaner thinned (fewer records than its offset
range, record offsets with gaps) is one a broker refuses from a producer (the record
count must be the last offset delta + 1): its records are encoded again at consecutive
offsets, with the same codec and timestamp type.
"""

from __future__ import annotations

from .decoding import decode_records
from .record import HEADER, TRANSACTIONAL_BIT, BatchHeader, encode_batch, write_crc


def with_producer(
    batch: bytes | memoryview, producer_id: int, epoch: int, sequence: int, *, transactional: bool
) -> bytes:
    """A copy of the whole batch ``batch`` as the producer ``producer_id`` sends it
    (module docstring). A batch of no records cannot be sent: the caller skips it."""
    header = BatchHeader._make(HEADER.unpack_from(batch, 0))
    if header.records_count != header.last_offset_delta + 1:
        records = decode_records(batch, header)
        batch = encode_batch(
            0, [r.value for r in records], keys=[r.key for r in records],
            headers=[r.headers for r in records], timestamps=[r.timestamp for r in records],
            codec=header.codec, timestamp_type=header.timestamp_type,
        )  # fmt: skip
        header = BatchHeader._make(HEADER.unpack_from(batch, 0))
    out = bytearray(batch)
    attributes = header.attributes & ~TRANSACTIONAL_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    HEADER.pack_into(
        out, 0, *header._replace(
            base_offset=0, partition_leader_epoch=-1, attributes=attributes,
            producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        )
    )  # fmt: skip
    write_crc(out, 0, len(out))
    return bytes(out)
