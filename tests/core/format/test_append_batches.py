"""Whole producer batches: `validate.split_batches`, `Log.append_batches` and
the mount's ``append.batches`` (docs/mount.md).

Batches are built by an independent Kafka encoder, kafka-python's
`DefaultRecordBatchBuilder`, and what logfs stores is read back by logfs
(the mount's ``offset/<n>`` and xattrs, the Store API) and by kafka-python's
decoder over the segment files. The validator is tested directly first: a
table of every refusal, and properties — any one changed byte is refused
unless the CRC does not cover it, and whatever is accepted decodes in logfs
and in kafka-python alike.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import struct
import time

import numpy as np
import pyfuse3
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import decode_varint
from mount_helpers import Daemon
from stress import scale

from logfs import Store
from logfs.core.config import TopicConfig
from logfs.core.errors import (
    BatchTooLargeError,
    InvalidBatchError,
    ReadOnlyError,
    RecordTooLargeError,
)
from logfs.core.format import compression
from logfs.core.format.decoding import decode_records
from logfs.core.format.record import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Record,
    crc32c,
    read_header,
)
from logfs.core.format.validate import prepare_batches, prepare_run, split_batches
from logfs.core.tools.offline import check
from logfs.mount import Operations

CODECS = {
    "none": DefaultRecordBatch.CODEC_NONE,
    "gzip": DefaultRecordBatch.CODEC_GZIP,
    "snappy": DefaultRecordBatch.CODEC_SNAPPY,
    "lz4": DefaultRecordBatch.CODEC_LZ4,
    "zstd": DefaultRecordBatch.CODEC_ZSTD,
}
SETTINGS = settings(
    max_examples=scale(200, 3000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
T0 = 1_700_000_000_000

# ---------------------------------------------------------------- building batches


def kafka_batch(
    records, codec: int = 0, *, deltas=None, producer=(-1, -1, -1), transactional=False
) -> bytes:
    """A batch as a Kafka producer builds it: ``records`` are (key, value,
    headers, timestamp); ``deltas`` overrides the offset deltas 0..n-1."""
    producer_id, epoch, sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 30,
    )
    for i, (key, value, headers, timestamp) in enumerate(records):
        delta = i if deltas is None else deltas[i]
        assert builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def sample_records(n: int, start: int = 0) -> list[tuple]:
    """Compressible records: keyed and not, with and without headers, a null value."""
    out = []
    for i in range(start, start + n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = b'{"order": %d, "item": "espresso"}\nline two' % i
        if i % 7 == 6:
            value = None
        headers = [] if i % 2 else [("trace", b"t-%d" % i), ("empty", b""), ("null", None)]
        out.append((key, value, headers, T0 + i))
    return out


def as_records(records, first_offset: int) -> list[Record]:
    return [
        Record(first_offset + i, ts, key, value, tuple(headers))
        for i, (key, value, headers, ts) in enumerate(records)
    ]


def rebuilt(batch: bytes, body: bytes | None = None, **fields) -> bytes:
    """``batch`` with header fields and/or its records section replaced, its
    length and CRC made consistent again (what a buggy producer might send)."""
    header = read_header(batch)
    body = batch[HEADER_SIZE:] if body is None else body
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    new = bytearray(HEADER.pack(*header._replace(batch_length=length, crc=0, **fields)) + body)
    struct.pack_into(">I", new, CRC_OFFSET, crc32c(bytes(new[ATTRIBUTES_OFFSET:])))
    return bytes(new)


def kafka_read(data: bytes) -> list[tuple]:
    """kafka-python's view of a .log file: per batch its header fields, CRC
    validity and records (offset, timestamp, key, value, headers)."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        out.append(
            (
                batch.base_offset,
                batch.validate_crc(),
                batch.compression_type,
                batch.timestamp_type,
                (batch.producer_id, batch.producer_epoch, batch.base_sequence),
                [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch],
            )
        )
    return out


def log_files(data, topic: str, partition: int = 0) -> bytes:
    directory = data / f"{topic}-{partition}"
    return b"".join(
        (directory / name).read_bytes()
        for name in sorted(os.listdir(directory))
        if name.endswith(".log")
    )


def fingerprint(path) -> dict[str, str]:
    """Every file under ``path``: its content's hash (tests/mount/test_badinput.py)."""
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha1(f.read()).hexdigest()
    return out


GOOD = kafka_batch(sample_records(5))
ONE = kafka_batch([(None, b"v", [], T0)])  # one record: room for hand-made records sections


def bad_batches() -> dict[str, tuple[bytes, str]]:
    """Every way a batch is refused: name -> (bytes, what the error says)."""
    header = read_header(GOOD)
    flipped = bytearray(GOOD)
    flipped[-1] ^= 0x01
    wrong_magic = bytearray(GOOD)
    wrong_magic[LOG_OVERHEAD + 4] = 1
    plain = GOOD[HEADER_SIZE:]
    return {
        "flipped crc byte": (bytes(flipped), "stored crc"),
        "wrong magic": (bytes(wrong_magic), "magic 1"),
        "length field too large": (
            GOOD[:8] + struct.pack(">i", header.batch_length + 1) + GOOD[12:],
            "length field says",
        ),
        "length field too small": (
            GOOD[:8] + struct.pack(">i", header.batch_length - 1) + GOOD[12:],
            "length field says",
        ),
        "truncated": (GOOD[:-3], "length field says"),
        "offset deltas with a gap": (
            kafka_batch(sample_records(3), deltas=[0, 1, 3]),
            "last offset delta 3",
        ),
        "offset deltas out of order": (
            kafka_batch(sample_records(3), deltas=[1, 0, 2]),
            "offset delta out of order",
        ),
        "offset deltas repeated": (
            kafka_batch(sample_records(3), deltas=[0, 0, 2]),
            "record 1: offset delta",
        ),
        "control batch": (rebuilt(GOOD, attributes=0x20), "control batch"),
        "transactional batch": (
            kafka_batch(sample_records(2), producer=(7, 0, 0), transactional=True),
            "transactional batch",
        ),
        "unknown codec": (rebuilt(GOOD, attributes=5), "unknown compression codec 5"),
        "no records": (
            rebuilt(GOOD, b"", records_count=0, last_offset_delta=0),
            "0 records",
        ),
        "fewer records than counted": (
            rebuilt(GOOD, records_count=6, last_offset_delta=5),
            "6 records declared, 5 found",
        ),
        "bytes after the records": (rebuilt(GOOD, plain + b"\x00"), "records take"),
        # records sections by hand: zig-zag varints, so n is the byte 2n and -1 is 1
        "a record longer than its fields": (
            rebuilt(ONE, bytes([2 * 7, 0, 0, 0, 0, 0, 0, 0])),
            "do not fill its length",
        ),
        "a record shorter than its fields": (
            rebuilt(ONE, bytes([2 * 6, 0, 0, 0, 2, 0x61, 1])),  # its header count is missing
            "bad header count",
        ),
        "a key longer than its record": (
            rebuilt(ONE, bytes([2 * 7, 0, 0, 0, 2 * 9, 0, 0, 0])),
            "bad key length",
        ),
        "a value length below -1": (
            rebuilt(ONE, bytes([2 * 6, 0, 0, 0, 1, 3, 0])),
            "bad value length",
        ),
        "a null header key": (
            rebuilt(ONE, bytes([2 * 8, 0, 0, 0, 1, 1, 2, 1, 1])),
            "malformed headers",
        ),
        "a header key that is not utf-8": (
            rebuilt(ONE, bytes([2 * 9, 0, 0, 0, 1, 1, 2, 2, 0xFF, 1])),
            "malformed headers",
        ),
        "a varint of 11 bytes": (
            rebuilt(ONE, bytes([2 * 15, 0, *[0xFF] * 10, 0, 1, 1, 0])),
            "longer than 10 bytes",
        ),
        "a timestamp past 64 bits": (
            rebuilt(ONE, bytes([2 * 6, 0, 2, 0, 1, 1, 0]), base_timestamp=(1 << 63) - 1),
            "outside a 64-bit integer",
        ),
        "garbage in place of gzip": (
            rebuilt(GOOD, b"\x1f\x8b" + bytes(30), attributes=1),
            "cannot decompress gzip",
        ),
    }


# ---------------------------------------------------------------- the validator, directly


@pytest.mark.parametrize("name", list(bad_batches()))
def test_the_validator_refuses(name):
    batch, says = bad_batches()[name]
    with pytest.raises(InvalidBatchError, match=says):
        prepare_batches([GOOD, batch], TopicConfig(), 0, T0)


def test_oversize_batches_are_invalid_and_too_large():
    config = TopicConfig(max_message_bytes=len(GOOD) - 1)
    with pytest.raises(BatchTooLargeError, match="exceeds max.message.bytes") as e:
        prepare_batches([GOOD], config, 0, T0)
    assert isinstance(e.value, RecordTooLargeError)  # Kafka's RecordTooLargeException
    assert isinstance(e.value, InvalidBatchError)  # EINVAL through append.batches
    # a batch that fits only uncompressed is refused once the topic recompresses it
    incompressible = kafka_batch([(None, os.urandom(2000), [], T0)])
    config = TopicConfig(max_message_bytes=len(incompressible), compression_type="gzip")
    with pytest.raises(BatchTooLargeError, match="once compressed with gzip"):
        prepare_batches([incompressible], config, 0, T0)


def test_compacted_topics_need_keys():
    config = dataclasses.replace(TopicConfig(), cleanup_policy="compact")
    with pytest.raises(InvalidBatchError, match="no key"):
        prepare_batches([GOOD], config, 0, T0)  # record 0 has no key
    assert prepare_batches([kafka_batch([(b"k", b"v", [], T0)])], config, 0, T0)[1] == 1


def test_split_batches_cuts_whole_batches():
    data = GOOD + kafka_batch(sample_records(2)) + GOOD[:30]
    batches, used = split_batches(data)
    assert [bytes(b) for b in batches] == [GOOD, kafka_batch(sample_records(2))]
    assert used == len(data) - 30
    assert split_batches(b"") == ([], 0)
    assert split_batches(GOOD[:11]) == ([], 0)  # not even the length field yet
    with pytest.raises(InvalidBatchError, match="batch length 48"):
        split_batches(GOOD[:8] + struct.pack(">i", 48))
    with pytest.raises(InvalidBatchError, match="batch length -1"):
        split_batches(GOOD + GOOD[:8] + struct.pack(">i", -1))
    with pytest.raises(BatchTooLargeError, match="exceeds"):
        split_batches(GOOD[:8] + struct.pack(">i", 200 << 20))  # over any produce request
    with pytest.raises(BatchTooLargeError, match="exceeds the limit of 100"):
        split_batches(GOOD[:20], max_batch_bytes=100)
    with pytest.raises(InvalidBatchError, match="magic 0"):
        split_batches(GOOD[:16] + b"\x00")  # seen before the batch is complete


def test_a_runs_pieces_are_its_batches_with_their_offsets():
    """A run's buffers for one writev: each batch where it lies, or, prepared
    from a read-only request, its base offset given apart and then the rest of
    it; batches ``start:end`` only, in order."""
    batches = [GOOD, kafka_batch(sample_records(2)), kafka_batch(sample_records(3))]
    data = memoryview(b"".join(batches)).toreadonly()
    for buffer, apart in ((data, True), (bytearray(data), False)):  # else patched in place
        cut, _ = split_batches(buffer)
        run, count = prepare_run(cut, TopicConfig(), 100, T0, buffer)
        assert count == read_header(GOOD).last_offset_delta + 1 + 2 + 3
        ends = np.cumsum(run.sizes)
        pieces = [bytes(p) for p in run.pieces(1, 3, ends)]
        assert (run.base_offsets is not None) == apart
        assert len(pieces) == (4 if apart else 2)
        firsts = [100 + count - 5, 100 + count - 3]
        want = [struct.pack(">q", f) + b[8:] for f, b in zip(firsts, batches[1:], strict=True)]
        assert b"".join(pieces) == b"".join(want)


@SETTINGS
@given(data=st.data())
def test_split_batches_at_any_cut(data):
    batches = [GOOD, kafka_batch(sample_records(1)), kafka_batch(sample_records(9), 1)]
    stream = b"".join(batches)
    cut = data.draw(st.integers(0, len(stream)))
    got, used = split_batches(memoryview(stream)[:cut])
    ends = [sum(map(len, batches[: i + 1])) for i in range(len(batches))]
    whole = [i for i, end in enumerate(ends) if end <= cut]
    assert [bytes(b) for b in got] == [batches[i] for i in whole]
    assert used == (ends[whole[-1]] if whole else 0)


def attributes_cleared(body: bytes, count: int) -> bytes:
    """A records section as kafka-python can read it: each record's attributes
    byte cleared. Kafka reads that int8 and ignores it; kafka-python reads it
    as a varint, so a byte with its high bit set throws it off the record's
    fields (found: attributes 0x80, then a misread header count of -49)."""
    out, pos = bytearray(body), 0
    for _ in range(count):
        length, start = decode_varint(out, pos)
        out[start] = 0
        pos = start + length
    return bytes(out)


@SETTINGS
@given(
    which=st.sampled_from(list(CODECS)),
    position=st.integers(0, 10_000),
    xor=st.integers(1, 255),
)
def test_any_changed_byte_is_refused_unless_the_crc_does_not_cover_it(which, position, xor):
    batch = bytearray(kafka_batch(sample_records(20), CODECS[which]))
    position %= len(batch)
    batch[position] ^= xor
    uncovered = position < 8 or 12 <= position < 16  # base offset, partition leader epoch
    if uncovered:
        _, count = prepare_batches([bytes(batch)], TopicConfig(), 0, T0)
        assert count == 20
    else:
        with pytest.raises(InvalidBatchError):
            prepare_batches([bytes(batch)], TopicConfig(), 0, T0)


@SETTINGS
@given(
    which=st.sampled_from(list(CODECS)),
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.binary(max_size=3), st.integers(0, 3)), max_size=4
    ),
    count=st.integers(-1, 4),
)
def test_whatever_is_accepted_decodes_in_logfs_and_kafka(which, edits, count):
    """Records sections damaged in any way, then given a correct length and
    CRC (so that only the record checks stand between them and the log):
    either refused, or decodable by both codecs with the same records."""
    records = sample_records(4)
    body = bytearray(kafka_batch(records)[HEADER_SIZE:])
    for position, insert, delete in edits:
        position %= len(body) + 1
        body[position : position + delete] = insert
    codec = CODECS[which]
    compressed = compression.compress(codec, bytes(body))
    n = len(records) + count if count >= 0 else len(records)
    batch = rebuilt(
        kafka_batch(records), compressed, attributes=codec, records_count=n, last_offset_delta=n - 1
    )
    try:
        ((_, info),), _ = prepare_batches([batch], TopicConfig(), 0, T0)
    except InvalidBatchError:
        event("refused")
        return
    event("accepted")
    ours = decode_records(batch)
    readable = compression.compress(codec, attributes_cleared(bytes(body), n))
    kafka = DefaultRecordBatch(
        rebuilt(batch, readable, attributes=codec, records_count=n, last_offset_delta=n - 1)
    )
    assert kafka.validate_crc()
    theirs = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kafka]
    assert ours == theirs
    assert info.stream_bytes == sum(len(r.value or b"") + 1 for r in ours)
    assert info.max_timestamp == max(r.timestamp for r in ours)


@SETTINGS
@given(
    fields=st.tuples(
        st.sampled_from([0, 8, 0x40]) | st.integers(-(1 << 15), (1 << 15) - 1),  # attributes
        st.none() | st.integers(-(1 << 31), (1 << 31) - 1),  # last offset delta (None: right)
        st.just(T0) | st.integers(-(1 << 63), (1 << 63) - 1),  # base timestamp
        st.sampled_from([1, 5]) | st.integers(1 - (1 << 31), (1 << 31) - 1),  # records count
    ),
    body=st.binary(max_size=200) | st.sampled_from([GOOD[HEADER_SIZE:], ONE[HEADER_SIZE:]]),
)
def test_any_header_with_a_right_crc_is_refused_cleanly_or_decodes(fields, body):
    attributes, last_delta, base_timestamp, count = fields
    batch = rebuilt(
        ONE,
        body,
        attributes=attributes,
        last_offset_delta=count - 1 if last_delta is None else last_delta,
        base_timestamp=base_timestamp,
        records_count=count,
    )
    try:
        prepare_batches([batch], TopicConfig(), 0, T0)
    except InvalidBatchError:
        event("refused")
        return
    event("accepted")
    assert len(decode_records(batch)) == count


keys = st.none() | st.binary(max_size=20)
header_lists = st.lists(
    st.tuples(
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
        st.none() | st.binary(max_size=8),
    ),
    max_size=3,
)


@SETTINGS
@given(
    records=st.lists(
        st.tuples(keys, st.none() | st.binary(max_size=300), header_lists, st.integers(0, 1 << 45)),
        min_size=1,
        max_size=30,
    ),
    which=st.sampled_from(list(CODECS)),
    base=st.integers(0, 1 << 40),
)
def test_prepared_batches_keep_their_records(records, which, base):
    batch = kafka_batch(records, CODECS[which])
    ((prepared, info),), count = prepare_batches([batch], TopicConfig(), base, T0)
    assert count == len(records)
    assert prepared[8:] == batch[8:]  # only the base offset is rewritten
    assert decode_records(prepared) == as_records(records, base)
    assert info.size == len(batch) and info.last_offset == base + len(records) - 1
    assert info.max_timestamp == max(ts for *_, ts in records)
    assert info.stream_bytes == sum(len(v or b"") + 1 for _, v, _, _ in records)


def test_create_time_topics_correct_a_wrong_max_timestamp():
    batch = rebuilt(GOOD, max_timestamp=0, attributes=0x08)  # LogAppendTime set by a producer
    ((prepared, info),), _ = prepare_batches([batch], TopicConfig(), 10, T0 + 99)
    header = read_header(prepared)
    assert header.max_timestamp == info.max_timestamp == T0 + 4
    assert header.timestamp_type == 0
    assert DefaultRecordBatch(prepared).validate_crc()
    assert decode_records(prepared) == as_records(sample_records(5), 10)


# ---------------------------------------------------------------- through the Store API


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "data")
    store.create_topic("t")
    yield store
    store.close()
    assert check(tmp_path / "data") == []


def test_every_codec_through_the_store(store, tmp_path):
    log = store.log("t", 0)
    log.append([b"logfs's own record"])  # so that the first batch gets offset 1, not 0
    expected, batches, first = [log.read(0)], [], 1
    for n, codec in enumerate(CODECS.values()):
        records = sample_records(40, start=40 * n)
        batches.append(kafka_batch(records, codec, producer=(1000 + n, 3, 17 * n)))
        expected += as_records(records, first)
        first += len(records)
    assert log.append_batches(batches[:2]) == 1
    assert log.append_batches(batches[2:]) == 81
    assert log.next_offset == first and log.unflushed_messages == first
    got = list(log.scan())
    assert got[1:] == expected[1:]
    assert log.read(123) == expected[123]
    store.close()
    stored = kafka_read(log_files(tmp_path / "data", "t"))
    assert [b[:5] for b in stored[1:]] == [
        (1 + 40 * n, True, codec, 0, (1000 + n, 3, 17 * n))
        for n, codec in enumerate(CODECS.values())
    ]
    assert [r for b in stored[1:] for r in b[5]] == expected[1:]
    with Store(tmp_path / "data", read_only=True) as again:
        assert list(again.log("t", 0).scan(1)) == expected[1:]


def test_nothing_is_appended_unless_every_batch_is_valid(store, tmp_path):
    log = store.log("t", 0)
    log.append_batches([GOOD])
    log.flush()
    before = fingerprint(tmp_path / "data")
    for name, (batch, _) in bad_batches().items():
        with pytest.raises(InvalidBatchError):
            log.append_batches([GOOD, batch, GOOD])
        assert log.next_offset == 5, name
    log.flush()
    assert fingerprint(tmp_path / "data") == before
    assert log.append_batches([]) == 5


def test_batches_roll_segments_and_are_indexed(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t", config={"segment.bytes": "4096", "index.interval.bytes": "512"})
        log = store.log("t", 0)
        batches = [kafka_batch(sample_records(10, 10 * i), i % 5) for i in range(60)]
        for i in range(0, 60, 7):
            log.append_batches(batches[i : i + 7])
        assert log.segment_count > 5
        expected = [r for i in range(60) for r in as_records(sample_records(10, 10 * i), 10 * i)]
        assert [log.read(n) for n in range(0, 600, 37)] == expected[::37]
        assert log.offset_for_time(T0 + 333) == 333
        assert list(log.scan()) == expected
    assert check(tmp_path / "data") == []
    with Store(tmp_path / "data") as store:  # reopened: the indexes and stream agree
        assert list(store.log("t", 0).scan(590)) == expected[590:]


def test_log_append_time_topics_stamp_the_batch(store, tmp_path):
    store.create_topic("stamped", config={"message.timestamp.type": "LogAppendTime"})
    log = store.log("stamped", 0)
    before = int(time.time() * 1000)
    log.append_batches([kafka_batch(sample_records(30), CODECS["lz4"]), GOOD])
    after = int(time.time() * 1000)
    store.close()
    stored = kafka_read(log_files(tmp_path / "data", "stamped"))
    assert [b[:4] for b in stored] == [(0, True, CODECS["lz4"], 1), (30, True, 0, 1)]
    stamps = {r.timestamp for b in stored for r in b[5]}
    assert len(stamps) == 1 and before <= stamps.pop() <= after
    records = [r for b in stored for r in b[5]]
    plain = as_records(sample_records(30) + sample_records(5), 0)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (r.key, r.value, r.headers) for r in plain
    ]


@pytest.mark.parametrize(
    ("topic_codec", "sent", "stored"),
    [("gzip", "none", "gzip"), ("uncompressed", "zstd", "none"), ("snappy", "lz4", "snappy")],
)
def test_topics_with_a_codec_recompress(store, tmp_path, topic_codec, sent, stored):
    store.create_topic("z", config={"compression.type": topic_codec})
    log = store.log("z", 0)
    records = sample_records(50)
    log.append_batches([kafka_batch(records, CODECS[sent], producer=(42, 1, 9))])
    assert list(log.scan()) == as_records(records, 0)
    store.close()
    ((base, crc_ok, codec, ts_type, producer, got),) = kafka_read(log_files(tmp_path / "data", "z"))
    assert (base, crc_ok, codec, ts_type, producer) == (0, True, CODECS[stored], 0, (42, 1, 9))
    assert got == as_records(records, 0)


def test_read_only_logs_refuse_batches(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
    with Store(tmp_path / "data", read_only=True) as store, pytest.raises(ReadOnlyError):
        store.log("t", 0).append_batches([GOOD])


STREAM = GOOD + ONE + kafka_batch(sample_records(12), CODECS["gzip"])


@SETTINGS
@given(
    chunks=st.lists(
        st.binary(max_size=64)
        | st.tuples(st.integers(0, len(STREAM)), st.integers(0, len(STREAM))).map(
            lambda cut: STREAM[min(cut) : max(cut)]
        ),
        max_size=6,
    )
)
def test_random_writes_to_append_batches(tmp_path, chunks):
    """Through `Operations` (no kernel): each write() appends exactly the
    batches it completes, or fails with EINVAL leaving DATA and the held
    bytes as they were; close() inside a batch is EINVAL."""
    data = tmp_path / f"data-{time.monotonic_ns()}"
    with Store(data) as store:
        store.create_topic("t")
        ops = Operations(store)

        def call(method, *args):
            return trio.run(getattr(ops, method), *args)

        inode = pyfuse3.ROOT_INODE
        for name in (b"t", b"0", b"append.batches"):
            inode = call("lookup", inode, name, None).st_ino
        fh = call("open", inode, os.O_WRONLY, None).fh
        log, held = store.log("t", 0), b""
        for chunk in chunks:
            before, next_offset = fingerprint(data), log.next_offset
            try:
                batches, used = split_batches(held + chunk, log.config.max_message_bytes)
                _, count = prepare_batches(batches, log.config, 0, T0)
            except InvalidBatchError:
                with pytest.raises(pyfuse3.FUSEError) as e:
                    call("write", fh, 0, chunk)
                assert e.value.errno == errno.EINVAL
                assert fingerprint(data) == before
                continue
            assert call("write", fh, 0, chunk) == len(chunk)
            assert log.next_offset == next_offset + count
            held = (held + chunk)[used:]
        if held:
            with pytest.raises(pyfuse3.FUSEError) as e:
                call("flush", fh)
            assert e.value.errno == errno.EINVAL
        call("release", fh)
    assert check(data) == []


# ---------------------------------------------------------------- through a real mount


def expected_xattrs(record: Record) -> dict[str, bytes]:
    """What docs/mount.md says `offset/<n>` carries for ``record``."""
    out = {
        "user.logfs.offset": str(record.offset).encode(),
        "user.logfs.timestamp": str(record.timestamp).encode(),
        "user.logfs.headers": json.dumps(
            [
                [k, None if v is None else v.decode("utf-8", "backslashreplace")]
                for k, v in record.headers
            ]
        ).encode(),
    }
    if record.key is not None:
        out["user.logfs.key"] = record.key
    for name, value in record.headers:
        out.setdefault(f"user.logfs.header.{name}", value or b"")
    return out


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_kafka_batches_through_a_real_mount(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    with Store(data) as store:
        store.create_topic("t")
        store.create_topic("small", config={"max.message.bytes": "3000"})
    expected, batches = [], []
    for n, codec in enumerate([*CODECS.values()] * 2):
        records = sample_records(30, start=30 * n)
        batches.append(kafka_batch(records, codec, producer=(5, 0, 30 * n)))
        expected += as_records(records, 30 * n)
    stream = b"".join(batches)
    with Daemon(data, mountpoint):
        path = mountpoint / "t" / "0" / "append.batches"
        fd = os.open(path, os.O_RDWR)
        try:
            # a batch split over writes, then many batches in one write, then the rest
            cuts = [0, 10, len(batches[0]) + 5, sum(map(len, batches[:7])) + 61, len(stream)]
            for start, end in zip(cuts, cuts[1:], strict=False):
                assert os.write(fd, stream[start:end]) == end - start
            os.fsync(fd)
            receipts = os.read(fd, 4096).decode().splitlines()
        finally:
            os.close(fd)
        assert receipts == ["0 0 29", "0 30 209", "0 210 299"]  # one per write() that appended
        state = json.loads((mountpoint / "t" / "0" / "state").read_text())
        assert state["next_offset"] == 300 and state["recovery_point"] == 300
        for record in expected[::7]:
            file = mountpoint / "t" / "0" / "offset" / str(record.offset)
            assert file.read_bytes() == (record.value or b"")
            assert {
                name: os.getxattr(file, name) for name in os.listxattr(file)
            } == expected_xattrs(record)
        # bad batches: EINVAL, and DATA stays byte for byte as it was
        before = fingerprint(data)
        bad = {name: batch for name, (batch, _) in bad_batches().items() if name != "truncated"}
        bad["oversize"] = kafka_batch([(None, os.urandom(3000), [], T0)])
        for name, batch in bad.items():
            small = name == "oversize"
            fd = os.open(
                mountpoint / ("small" if small else "t") / "0" / "append.batches", os.O_WRONLY
            )
            try:
                with pytest.raises(OSError) as e:
                    os.write(fd, batch + GOOD)
                assert e.value.errno == errno.EINVAL, name
            finally:
                os.close(fd)  # nothing held: the failed write left nothing pending
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, GOOD[:-3])
        with pytest.raises(OSError) as e:
            os.close(fd)  # closed inside a batch: dropped, and close() says so
        assert e.value.errno == errno.EINVAL
        assert fingerprint(data) == before
        assert not (mountpoint / "t" / "0" / "offset" / "300").exists()
    with Store(data, read_only=True) as store:
        log = store.log("t", 0)
        assert list(log.scan()) == expected
        assert [log.read(n) for n in (0, 29, 30, 150, 299)] == [
            expected[n] for n in (0, 29, 30, 150, 299)
        ]
    stored = kafka_read(log_files(data, "t"))
    assert [b[:5] for b in stored] == [
        (30 * n, True, codec, 0, (5, 0, 30 * n)) for n, codec in enumerate([*CODECS.values()] * 2)
    ]
    assert [r for b in stored for r in b[5]] == expected
    assert check(data) == []
