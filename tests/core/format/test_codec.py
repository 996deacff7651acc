"""The compiled codec (the record walker, core/format/walker.pyx, and the modules built on it)
against the reference decoder (core/format/record.py) and kafka-python's encoder: the same
records from valid batches, the same verdict on corrupt ones."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from logfs.core.config import TopicConfig
from logfs.core.errors import CorruptRecordError, InvalidBatchError
from logfs.core.format import _checks, _columns, columnar, walker
from logfs.core.format.decoding import decode_records
from logfs.core.format.problems import PROBLEMS
from logfs.core.format.record import (
    HEADER_SIZE,
    encode_batch,
    read_header,
    records_section,
    varint,
    write_crc,
)
from logfs.core.format.validate import prepare_batches
from logfs.core.log import _keymap, _line
from logfs.core.storage import _scan, books

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=30)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(
        st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2
    ),
)
records_st = st.lists(record_st, min_size=1, max_size=30)


COMPILED = (walker, _checks, _columns, _keymap, _line, _scan, books)


@pytest.mark.parametrize("module", COMPILED, ids=lambda m: m.__name__)
def test_the_codec_is_compiled(module):
    """No silent fallback: each module is the extension pip built, not Python source."""
    assert module.__file__.endswith(".so"), module.__file__


@pytest.mark.parametrize("module", COMPILED, ids=lambda m: m.__name__)
def test_without_the_codec_logfs_says_to_reinstall(module):
    """A checkout or install without a built extension fails at import, saying what to do."""
    script = f"import sys; sys.modules[{module.__name__!r}] = None; import logfs.core.format"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode != 0
    assert "ImportError: logfs's compiled codec" in run.stderr
    assert "pip install ." in run.stderr


def test_every_problem_is_worded():
    assert set(PROBLEMS) == set(walker.Problem) - {walker.Problem.OK}


def encode(records, base=0) -> bytes:
    keys, values, headers = (list(x) for x in zip(*records, strict=True))
    return encode_batch(base, values, keys=keys, headers=headers, timestamps=1_700_000_000_000)


def kafka_encode(records) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )  # fmt: skip
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
    return bytes(builder.build())


def walked(batch: bytes) -> list[tuple]:
    """(offset, timestamp, key, value) of every record, found by the compiled walker."""
    cols = columnar.decode([(read_header(batch), memoryview(batch))])
    buf = cols.buf.tobytes()

    def field(start, length):
        return None if length < 0 else buf[start : start + length]

    return [
        (int(o), int(t), field(ks, kl), field(vs, vl))
        for o, t, ks, kl, vs, vl in zip(
            cols.offset,
            cols.timestamp,
            cols.key_start,
            cols.key_len,
            cols.value_start,
            cols.value_len,
            strict=True,
        )  # fmt: skip
    ]


def reference(batch: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value) for r in decode_records(batch)]


@SETTINGS
@given(records_st, st.booleans())
def test_walker_decodes_what_either_encoder_built(records, by_kafka):
    batch = kafka_encode(records) if by_kafka else encode(records)
    assert walked(batch) == reference(batch)
    assert [r[1:] for r in walked(batch)] == [
        (1_700_000_000_000 + i * by_kafka, k, v) for i, (k, v, _) in enumerate(records)
    ]
    ((_, info),), _ = prepare_batches([batch], TopicConfig(), 0, 0)  # the strict walk too
    assert info.stream_bytes == sum(len(v or b"") + 1 for _, v, _ in records)


def with_body(batch: bytes, body: bytes) -> bytes:
    """``batch`` with another records section, its length field and CRC made right."""
    out = bytearray(batch[:HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    write_crc(out, 0, len(out))
    return bytes(out)


mutation_st = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.integers(1, 5)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=3)),
)


def mutate(body: bytes, mutations) -> bytes:
    body = bytearray(body)
    for kind, at, arg in mutations:
        at %= len(body) + 1
        if kind == "set" and at < len(body):
            body[at] = arg
        elif kind == "cut":
            del body[at : at + arg]
        elif kind == "insert":
            body[at:at] = arg
    return bytes(body)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_st, st.lists(mutation_st, min_size=1, max_size=3))
def test_walker_and_reference_agree_on_corrupt_records(records, mutations):
    good = encode(records)
    batch = with_body(good, mutate(good[HEADER_SIZE:], mutations))
    try:
        expected = reference(batch)
    except CorruptRecordError:
        expected = None
    try:
        got = walked(batch)
    except CorruptRecordError:
        got = None
    assert got == expected
    if expected is None:  # what the reference cannot read, the broker's check refuses
        with pytest.raises(InvalidBatchError):
            prepare_batches([batch], TopicConfig(), 0, 0)


def test_walker_reports_where_and_what():
    body = encode([(None, b"abc", [])])[HEADER_SIZE:]
    bad = bytearray(body)
    bad[4] = 2 * 7  # key length 7 in a record of 10 bytes
    data = np.frombuffer(bytes(bad), np.uint8)
    fields = np.zeros((6, 1), np.int64)
    one = np.array([0], np.int64), np.array([len(bad)], np.int64), np.array([1], np.int64)
    assert walker.walk_records(data, *one, fields)[:3] == (walker.Problem.KEY_LENGTH, 0, 0)
    data = np.frombuffer(body, np.uint8)
    assert walker.walk_records(data, *one, fields)[0] == walker.Problem.OK
    assert fields[:, 0].tolist() == [0, 0, 5, -1, 6, 3]  # ts, offset, key at/len, value at/len


def test_one_walker_three_strictnesses():
    """Record 0 claims 60 headers it does not hold: the broker's check (FULL) refuses it,
    the cleaner's loops (FIELDS: keys and values) read past it, and a lookup (HOP) steps
    over it to a later record but refuses to return it."""
    body = bytearray(encode([(b"k%d" % i, b"v", []) for i in range(3)])[HEADER_SIZE:])
    first_length = body[0] >> 1
    assert body[first_length] == 0  # record 0's header count, its last byte
    body[first_length] = 2 * 60
    data = np.frombuffer(bytes(body), np.uint8)
    one = np.array([0], np.int64), np.array([len(body)], np.int64), np.array([3], np.int64)
    fields = np.zeros((6, 3), np.int64)
    assert walker.walk_records(data, *one, fields)[:3] == (walker.Problem.HEADER_COUNT, 0, 0)
    latest: dict = {}
    assert _keymap.map_keys(bytes(body), 3, 100, 0, latest) == -1
    assert latest == {b"k0": 100, b"k1": 101, b"k2": 102}
    offsets = _keymap.OffsetMap()
    assert offsets.map(bytes(body), 3, 100, 0) == -1 and len(offsets) == 3
    start, end, _, key, value, _ = walker.find_record(bytes(body), 3, 2)
    assert (key, value) == (b"k2", b"v") and end == len(body)
    assert walker.find_record(bytes(body), 3, 0)[0] == -2


P = walker.Problem
WITH_FIGURES = {P.DECLARED, P.SHORT_RECORD, P.SECTION, P.OFFSET_ORDER}


def quick_and_slow(body: bytes, count: int, strict: bool, keys: bool) -> tuple:
    """`walk_records` of one section with the quick read of the usual record and
    without it (`read_record` alone): the two results and fields."""
    data = np.frombuffer(body, np.uint8)
    section = np.array([0], np.int64), np.array([len(body)], np.int64)
    out = []
    for quick in (True, False):
        fields = np.full((6, count), -7, np.int64)
        args = (np.array([count], np.int64), fields, strict, keys, quick)
        result = walker.walk_records(data, *section, *args)
        if result[0] not in WITH_FIGURES:  # found and wanted are set for these only
            result = result[:3]
        out.append((result, fields.tolist()))
    return out


def test_the_quick_read_of_a_record_is_read_records_own():
    """Producers' usual records (a short value, no key or a short one, no headers)
    are read by `quick_record`, which checks each field after reading it; anything
    else, good or bad, goes to `read_record`. Every byte of the records before the
    last one's reach, changed to each of a few values, gives the same problem at
    the same record, or the same fields, both ways."""
    records = [(None if i % 3 else b"k%d" % i, b"v" * (90 + i), []) for i in range(6)]
    records[4] = (b"key", b"value", [("h", b"x")])  # headers: never the quick read
    body = bytes(encode(records)[HEADER_SIZE:])
    assert len(body) > 4 * 100  # several records lie QUICK_ROOM (64) bytes before the end
    assert quick_and_slow(body, 6, True, False)[0][0][0] == walker.Problem.OK
    seen = set()
    for position in range(len(body) - 64):
        for value in (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, body[position] ^ 0x10):
            bad = bytearray(body)
            bad[position] = value
            for strict, keys in ((True, False), (False, True)):
                fast, slow = quick_and_slow(bytes(bad), 6, strict, keys)
                assert fast == slow, (position, value, strict, keys)
                seen.add(fast[0][0])
    assert len(seen) >= 8, seen  # most of the walker's problems were met


@given(st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=50), st.integers(-1, 255))
def test_gather(values, separator):
    buf = b"".join(v or b"" for v in values) + b"tail"
    starts, lengths, at = [], [], 0
    for v in values:
        starts.append(at)
        lengths.append(-1 if v is None else len(v))
        at += len(v or b"")
    data = np.frombuffer(buf, np.uint8)
    starts, lengths = np.array(starts, np.int64), np.array(lengths, np.int64)
    sep = b"" if separator < 0 else bytes([separator])
    assert _columns.gather(data, starts, lengths, separator) == b"".join(
        (v or b"") + sep for v in values
    )
    joined, offsets = _columns.gather(data, starts, lengths, with_offsets=True)
    assert joined == b"".join(v or b"" for v in values)
    assert offsets.tolist() == np.cumsum([0] + [len(v or b"") for v in values]).tolist()


# ---------------------------------------------------------------- tables


def walk(batch: bytes) -> list[tuple]:
    """(offset delta, timestamp, key, value) of every record of an uncompressed batch, by
    `walk_records` alone, strict as for a producer's batch."""
    header = read_header(batch)
    body = bytes(records_section(batch, header))
    data = np.frombuffer(body, np.uint8)
    count = header.records_count
    fields = np.full((6, count), -7, np.int64)
    section = np.array([0], np.int64), np.array([len(body)], np.int64)
    result = walker.walk_records(data, *section, np.array([count], np.int64), fields, strict=True)
    assert result == (walker.Problem.OK, 0, 0, 0, 0)
    ts, od, ks, kl, vs, vl = fields.tolist()
    return [
        (od[i], header.base_timestamp + ts[i],
         None if kl[i] < 0 else body[ks[i] : ks[i] + kl[i]],
         None if vl[i] < 0 else body[vs[i] : vs[i] + vl[i]])
        for i in range(count)
    ]  # fmt: skip


VALID = {
    "keys": [(b"key-%d" % i, b"value-%d" % i, []) for i in range(5)],
    "null keys": [(None, b"value", [])] * 3,
    "empty key and value": [(b"", b"", [])],
    "null values": [(b"k", None, []), (None, None, []), (b"", None, [])],
    "headers": [(b"k", b"v", [("h1", b"x"), ("h2", None), ("", b"")]), (None, b"w", [])],
    "utf-8 header keys": [(None, b"v", [("cl\u00e9", b"\xff"), ("\u65e5\u672c", b"")])],
    "many records": [(None, b"%06d" % i, []) for i in range(5000)],
    "multi-byte lengths": [(b"k" * 200, bytes(70_000), [("h", bytes(300))])],
}


@pytest.mark.parametrize("by_kafka", [False, True], ids=["logfs", "kafka-python"])
@pytest.mark.parametrize("name", list(VALID))
def test_walker_reads_what_the_reference_reads(name, by_kafka):
    records = VALID[name]
    batch = kafka_encode(records) if by_kafka else encode(records)
    expected = [(r.offset, r.timestamp, r.key, r.value) for r in decode_records(batch)]
    assert walk(batch) == expected
    assert [(k, v) for _, _, k, v in expected] == [(k, v) for k, v, _ in records]
    # append.batches' check accepts it, and counts what `stream` will serve
    ((_, info),), _ = prepare_batches([batch], TopicConfig(), 0, 0)
    assert info.max_timestamp == max(t for _, t, _, _ in expected)
    assert info.stream_bytes == sum(len(v or b"") + 1 for _, v, _ in records)


GOOD = encode([(None, b"a", [])])  # the batch put before each bad one
TWO = encode([(None, b"a", [])] * 2)  # a header for two records


def record(*fields: int, delta: int = 0) -> bytes:
    """A record from its bytes after the length prefix; zig-zag, so n is the byte 2n and -1
    is 1. Without ``fields``: a well-formed record with offset ``delta`` and value b"a"."""
    body = bytes(fields or (0, 0, 2 * delta, 1, 2, 0x61, 0))
    return varint(len(body)) + body


AT = f"batch at position {len(GOOD)}"
# name: (header's batch, records section, message, whether the reference decoder refuses it)
MALFORMED = {
    "a truncated varint (a record length)": (
        TWO, record() + b"\x80", f"{AT}: 2 records declared, 1 found", True,
    ),
    "a truncated varint (timestamp delta)": (
        GOOD, record(0, 0x80, 0x80, 0x80, 0x80, 0x80),
        f"{AT}: record 0: timestamp delta overruns the record", True,
    ),
    "a truncated varint (offset delta)": (
        GOOD, record(0, 0, 0x80, 0x80, 0x80, 0x80),
        f"{AT}: record 0: offset delta overruns the record", True,
    ),
    "a varint over 10 bytes": (
        GOOD, record(0, *[0xFF] * 10, 0, 0, 1, 1, 0),
        f"{AT}: record 0: varint longer than 10 bytes", True,
    ),
    "a record length overrunning the section": (
        TWO, record() + varint(40) + record(delta=1)[1:],
        f"{AT}: its records take 49 bytes (at record 1), its records section holds 16", True,
    ),
    "a negative record length": (
        GOOD, b"\x01" + record()[1:], f"{AT}: record 0: length -1, at least 6 expected", True,
    ),
    "a record under 6 bytes": (
        GOOD, record(0, 0, 0, 1, 1), f"{AT}: record 0: length 5, at least 6 expected", True,
    ),
    "fewer records than declared": (TWO, record(), f"{AT}: 2 records declared, 1 found", True),
    "bytes after the records": (
        GOOD, record() + b"\x00",
        f"{AT}: its records take 8 bytes (at record 1), its records section holds 9", True,
    ),
    "a negative header count": (
        GOOD, record(0, 0, 0, 1, 2, 0x61, 1), f"{AT}: record 0: bad header count", True,
    ),
    "a header count beyond the record": (
        GOOD, record(0, 0, 0, 1, 2, 0x61, 2 * 3, 0, 1), f"{AT}: record 0: bad header count", True,
    ),
    "a header count missing": (
        GOOD, record(0, 0, 0, 1, 2, 0x61), f"{AT}: record 0: bad header count", True,
    ),
    "a key length beyond the record": (
        GOOD, record(0, 0, 0, 2 * 9, 0, 0, 0), f"{AT}: record 0: bad key length", True,
    ),
    "a key length below -1": (
        GOOD, record(0, 0, 0, 3, 2, 0x61, 0), f"{AT}: record 0: bad key length", True,
    ),
    "a value length beyond the record": (
        GOOD, record(0, 0, 0, 1, 2 * 9, 0, 0), f"{AT}: record 0: bad value length", True,
    ),
    "a null header key": (
        GOOD, record(0, 0, 0, 1, 1, 2, 1, 1), f"{AT}: record 0: malformed headers", True,
    ),
    "a header key that is not utf-8": (
        GOOD, record(0, 0, 0, 1, 1, 2, 2, 0xFF, 1), f"{AT}: record 0: malformed headers", True,
    ),
    "fields short of the record's length": (
        GOOD, record(0, 0, 0, 1, 2, 0x61, 0, 0),
        f"{AT}: record 0: its fields do not fill its length", True,
    ),
    "offset deltas out of order": (  # the reference reads any deltas: compacted segments
        TWO, record() + record(),
        f"{AT}: record 1: offset delta out of order (0, expected its index 1)", False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_records_are_refused_with_their_numbers(name):
    header, body, message, reference_refuses = MALFORMED[name]
    bad = with_body(header, body)
    with pytest.raises(InvalidBatchError) as e:
        prepare_batches([GOOD, bad], TopicConfig(), 0, 0)
    assert str(e.value) == message
    if reference_refuses:
        with pytest.raises(CorruptRecordError):
            decode_records(bad)


def test_a_compacted_topic_wants_keys():
    keyed = encode([(b"k", b"a", [])] * 2)
    prepare_batches([keyed], TopicConfig(cleanup_policy="compact"), 0, 0)
    half = encode([(b"k", b"a", []), (None, b"a", [])])
    with pytest.raises(InvalidBatchError) as e:
        prepare_batches([keyed, half], TopicConfig(cleanup_policy="compact"), 0, 0)
    where = f"batch at position {len(keyed)}"
    assert str(e.value) == f"{where}: record 1: no key, and the topic is compacted"


def test_walker_fills_fields_section_after_section():
    """Records of several sections land in one fields array, and a problem names its section."""
    bodies = [encode([(None, b"x" * i, [])] * i)[HEADER_SIZE:] for i in (1, 2, 3)]
    data = np.frombuffer(b"".join(bodies), np.uint8)
    ends = np.cumsum([len(b) for b in bodies]).astype(np.int64)
    starts, counts = ends - [len(b) for b in bodies], np.array([1, 2, 3], np.int64)
    fields = np.zeros((6, 6), np.int64)
    assert walker.walk_records(data, starts, ends, counts, fields, strict=True)[0] == 0
    assert fields[1].tolist() == [0, 0, 1, 0, 1, 2]  # offset deltas
    assert fields[5].tolist() == [1, 2, 2, 3, 3, 3]  # value lengths
    values = [data[s : s + n].tobytes() for s, n in zip(fields[4], fields[5], strict=True)]
    assert values == [b"x", b"xx", b"xx", b"xxx", b"xxx", b"xxx"]
    counts[2] = 4  # the third section declares a record it does not hold
    assert walker.walk_records(data, starts, ends, counts, fields)[:4] == (
        walker.Problem.DECLARED, 2, 3, 3,
    )  # fmt: skip
