"""The stream's lines in one compiled pass (`columnar.region_lines`,
`columnar.scan_lines`) against the record-at-a-time decoder (`decode_records`)
and the column-wise path (`value_lines` of `decode_region`), on many shapes
(nulls, empty values, values holding newlines, keys, headers, control,
compressed and transactional batches, regions cut anywhere) and on damaged
records."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logfs.core.errors import CorruptRecordError
from logfs.core.format import columnar, compression
from logfs.core.format.control import marker_batch, transactional_batch
from logfs.core.format.decoding import decode_records
from logfs.core.format.record import HEADER_SIZE, encode_batch, read_header, write_crc

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

value_st = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=300),
    st.lists(st.sampled_from([b"a", b"\n", b"bc", b"\r\n"]), max_size=20).map(b"".join),
)
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=20)),
    value_st,
    st.lists(
        st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
    ),
)


def region_of(batches: list[list[tuple]], lead: bytes) -> tuple[bytes, list[int], list]:
    """``batches`` encoded back to back after ``lead`` (bytes that are no batch),
    with gaps in offsets between them as after compaction."""
    region, positions, base = bytearray(lead), [], 7
    for records in batches:
        keys, values, headers = (list(x) for x in zip(*records, strict=True))
        positions.append(len(region))
        region += encode_batch(base, values, keys=keys, headers=headers, timestamps=1000)
        base += len(records) + 2
    return bytes(region), positions, [read_header(region, p) for p in positions]


@SETTINGS
@given(
    st.lists(st.lists(record_st, min_size=1, max_size=30), min_size=1, max_size=6),
    st.binary(max_size=70),
    st.integers(-1, 200),
    st.data(),
)
def test_region_lines_match_the_record_decoder(batches, lead, start, data):
    region, positions, headers = region_of(batches, lead)
    # Any subset of the batches, in order: the caller leaves out hidden ones.
    shown = data.draw(st.lists(st.booleans(), min_size=len(positions), max_size=len(positions)))
    chosen = [(p, h) for p, h, s in zip(positions, headers, shown, strict=True) if s]
    at, hs = [p for p, _ in chosen], [h for _, h in chosen]
    expected = b"".join(
        (r.value or b"") + b"\n"
        for p, h in chosen
        for r in decode_records(memoryview(region)[p : p + h.size], h)
        if r.offset >= start
    )
    got = columnar.region_lines(region, at, hs, start)
    assert bytes(got) == expected
    if chosen:
        cols = columnar.decode_region(region, at, hs, False)
        keep = cols.offset >= start
        assert columnar.value_lines(cols, keep) == expected


def test_region_lines_of_nothing_is_empty():
    assert bytes(columnar.region_lines(b"", [], [], 0)) == b""


@SETTINGS
@given(
    st.lists(st.lists(record_st, min_size=1, max_size=10), min_size=1, max_size=3),
    st.data(),
)
def test_damaged_records_fail_as_the_column_decoder_fails(batches, data):
    region, positions, headers = region_of(batches, b"")
    damaged = bytearray(region)
    # Any byte of a records section (the CRC is the caller's: read_region checks it).
    sections = [i for p, h in zip(positions, headers, strict=True)
                for i in range(p + HEADER_SIZE, p + h.size)]  # fmt: skip
    where = data.draw(st.sampled_from(sections))
    damaged[where] = data.draw(st.integers(0, 255))
    damaged = bytes(damaged)
    try:
        expected = columnar.value_lines(columnar.decode_region(damaged, positions, headers, False))
    except CorruptRecordError as e:
        with pytest.raises(CorruptRecordError) as got:
            columnar.region_lines(damaged, positions, headers)
        assert str(got.value) == str(e)
    else:
        assert bytes(columnar.region_lines(damaged, positions, headers)) == expected


def test_a_record_running_past_its_batch_is_named():
    batch = bytearray(encode_batch(0, [b"abc", b"defg"]))
    batch[HEADER_SIZE] = 0x7E  # the first record's length: 63, far past the batch
    header = read_header(batch)
    with pytest.raises(CorruptRecordError, match="batch at offset 0: record 0: .*section"):
        columnar.region_lines(bytes(batch), [0], [header])


def with_base(batch: bytes, base: int) -> bytes:
    """``batch`` moved to ``base`` (the base offset is outside the CRC)."""
    return base.to_bytes(8, "big") + batch[8:]


kind_st = st.sampled_from(["plain", "plain", "control", "gzip", "txn", "bad crc"])


def mixed_region(kinds: list[str], records: list[list[tuple]]) -> tuple[bytes, list]:
    """Batches of the given kinds back to back from offset 5; the batches and
    what each is."""
    region, made, base = b"", [], 5
    for kind, recs in zip(kinds, records, strict=True):
        keys, values, headers = (list(x) for x in zip(*recs, strict=True))
        if kind == "control":
            batch = marker_batch(7, 0, commit=False, coordinator_epoch=0, timestamp=1)
        elif kind == "txn":
            batch = transactional_batch(values, keys, 7, 0, timestamp=1)
        else:
            codec = compression.GZIP if kind == "gzip" else compression.NONE
            batch = encode_batch(0, values, keys=keys, headers=headers, codec=codec)
        batch = bytearray(with_base(batch, base))
        if kind == "bad crc":
            batch[-1] ^= 1
        made.append((len(region), read_header(batch), kind))
        region += bytes(batch)
        base += read_header(batch).last_offset_delta + 1
    return region, made


@SETTINGS
@given(
    st.lists(
        st.tuples(kind_st, st.lists(record_st, min_size=1, max_size=12)), min_size=1, max_size=6
    ),  # fmt: skip
    st.integers(0, 60),
    st.integers(0, 80),
    st.booleans(),
    st.data(),
)
def test_scan_lines_passes_exactly_the_batches_it_may(batches, start, end_offset, txns, data):
    kinds, records = [k for k, _ in batches], [r for _, r in batches]
    region, made = mixed_region(kinds, records)
    cut = data.draw(st.integers(0, len(region)))  # a read may end anywhere
    got = columnar.scan_lines(region[:cut], start, end_offset, transactions_shown=txns)
    expected, stop, after = b"", 0, -1
    for position, header, kind in made:  # the batches the pass may take, in order
        if position + header.size > cut or header.base_offset >= end_offset:
            break
        if kind in ("gzip", "bad crc") or (kind == "txn" and not txns):
            break
        if kind != "control":
            batch = memoryview(region)[position : position + header.size]
            expected += b"".join(
                (r.value or b"") + b"\n" for r in decode_records(batch, header) if r.offset >= start
            )
        stop, after = position + header.size, header.next_offset
    assert (bytes(got.lines), got.stop, got.next_offset) == (expected, stop, after)


def test_scan_lines_stops_at_a_torn_header():
    batch = encode_batch(0, [b"a", b"b"])
    region = batch + b"\0" * 12 + batch[12:]  # a header whose length is zero
    got = columnar.scan_lines(region, 0, 100, transactions_shown=True)
    assert (bytes(got.lines), got.stop, got.next_offset) == (b"a\nb\n", len(batch), 2)


def test_scan_lines_names_a_damaged_record():
    batch = bytearray(encode_batch(3, [b"abc", b"defg"]))
    batch[HEADER_SIZE] = 0x7E  # the first record's length: 63, far past the batch
    write_crc(batch, 0, len(batch))  # the CRC holds: only the walk can tell
    good = encode_batch(0, [b"x"])
    with pytest.raises(CorruptRecordError, match="batch at offset 3: record 0: .*section"):
        columnar.scan_lines(good + bytes(batch), 0, 100, transactions_shown=True)
