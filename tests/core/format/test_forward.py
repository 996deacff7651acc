"""A stored batch forwarded as another producer's (format/forward.py), read back by an
independent decoder (kafka-python's) and checked as a broker checks a producer's batch."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

from logfs.core.config import TopicConfig
from logfs.core.errors import InvalidBatchError
from logfs.core.format import compression, read_header, with_producer
from logfs.core.format.record import (
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    encode_batch,
    varint,
    write_crc,
)
from logfs.core.format.validate import prepare_batches


def accepted(batch: bytes, transactional: bool = True) -> None:
    """Checked as a broker checks a producer's batch (raises InvalidBatchError)."""
    prepare_batches([batch], TopicConfig(), 0, 1000, None, transactional=transactional)


def records(batch: bytes) -> tuple[DefaultRecordBatch, list]:
    decoded = DefaultRecordBatch(batch)
    assert decoded.validate_crc()
    return decoded, [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded]


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.ZSTD])
@pytest.mark.parametrize("transactional", [True, False])
def test_the_header_is_the_producers_and_the_records_are_unchanged(codec, transactional):
    stored = encode_batch(
        4200, [b"a", None, b"c" * 300], keys=[None, b"k", b"k2"],
        headers=[(), (("h", b"v"),), ()], timestamps=[1000, 1005, 1003], codec=codec,
    )  # fmt: skip
    out = with_producer(stored, 77, 3, 1000, transactional=transactional)
    batch, got = records(out)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 1000)
    assert batch.is_transactional == transactional and batch.compression_type == codec
    assert read_header(out).base_offset == 0
    _, before = records(stored)
    assert got == [(o - 4200, *rest) for o, *rest in before]
    accepted(out, transactional)


def thinned(base_offset: int, kept: list[tuple[int, bytes, bytes]], last_delta: int) -> bytes:
    """A batch as the log cleaner leaves it: the records ``kept`` (offset delta, key,
    value) of an offset range that still ends at ``last_delta``."""
    body = b""
    for delta, key, value in kept:
        record = b"\x00" + varint(0) + varint(delta) + varint(len(key)) + key
        record += varint(len(value)) + value + varint(0)
        body += varint(len(record)) + record
    buf = bytearray(HEADER_SIZE + len(body))
    buf[HEADER_SIZE:] = body
    HEADER.pack_into(
        buf, 0, base_offset, len(buf) - 12, -1, 2, 0, 0, last_delta, 5, 5, -1, -1, -1, len(kept)
    )
    write_crc(buf, 0, len(buf))
    return bytes(buf)


def test_a_thinned_batch_is_encoded_again_at_consecutive_offsets():
    stored = thinned(10, [(0, b"1", b"x"), (2, b"3", b"z")], last_delta=2)
    _, before = records(stored)
    assert [o for o, *_ in before] == [10, 12]
    with pytest.raises(InvalidBatchError, match="last offset delta 2 with 2 records"):
        accepted(stored, transactional=False)  # as a broker refuses it from a producer
    out = with_producer(stored, 5, 0, 0, transactional=True)
    header = read_header(out)
    assert (header.last_offset_delta, header.records_count, header.producer_id) == (1, 2, 5)
    _, got = records(out)
    assert [(o, t, k, v) for o, t, k, v, _ in got] == [(0, 5, b"1", b"x"), (1, 5, b"3", b"z")]
    accepted(out)


def test_log_append_time_is_kept():
    stored = encode_batch(0, [b"v"], timestamps=1234, timestamp_type=LOG_APPEND_TIME)
    assert read_header(with_producer(stored, 1, 0, 0, transactional=False)).timestamp_type == (
        LOG_APPEND_TIME
    )
