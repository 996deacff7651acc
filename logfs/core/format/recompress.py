"""A producer's batch re-encoded with another codec, as Kafka's broker does when
a topic's ``compression.type`` differs from the batch's (validate.py): records,
keys, headers, their own timestamps and offset deltas kept."""

from __future__ import annotations

from .decoding import decode_records
from .record import CODEC_MASK, TIMESTAMP_TYPE_BIT, BatchHeader, encode_batch, read_header


def recompressed(batch: memoryview, codec: int) -> tuple[bytearray, BatchHeader]:
    """The batch's records re-encoded with ``codec``, and its header to be:
    producer fields and leader epoch kept, the records' own timestamps kept."""
    header = read_header(batch)
    own_times = header._replace(attributes=header.attributes & ~TIMESTAMP_TYPE_BIT)
    records = decode_records(batch, own_times)
    encoded = encode_batch(
        0,
        [r.value for r in records],
        keys=[r.key for r in records],
        headers=[r.headers for r in records],
        timestamps=[r.timestamp for r in records],
        codec=codec,
    )
    new = read_header(encoded)
    header = header._replace(
        batch_length=new.batch_length,
        attributes=(header.attributes & ~CODEC_MASK) | codec,
        base_timestamp=new.base_timestamp,
    )
    return bytearray(encoded), header
