"""`columnar.encode_lines`: the lines of appended text found and encoded in one
compiled pass, against `encode_plain` of the same lines (which the record-at-a-time
encoder checks, test_columnar.py) and kafka-python's codec; and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from logfs.core.errors import TooLargeError
from logfs.core.format import columnar, line_lengths
from logfs.core.format.record import CREATE_TIME, LOG_APPEND_TIME

NOW = 1_700_000_000_000
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
lines_st = st.lists(
    st.one_of(
        st.binary(max_size=40), st.binary(min_size=100, max_size=400), st.just(b"x" * 20_000)
    ).map(lambda v: v.replace(b"\n", b"-")),
    min_size=1,
    max_size=300,
)


def both(lines, cut, budget, base, ts_type):
    text = b"".join(line + b"\n" for line in lines)
    cut = min(cut, len(lines[0]))
    lengths = line_lengths(text, len(text))
    plain = columnar.encode_plain(
        text, lengths, base, budget, timestamp=NOW, timestamp_type=ts_type
    )
    fused = columnar.encode_lines(
        memoryview(text)[cut:], text[:cut], base, budget,
        timestamp=NOW, timestamp_type=ts_type, limit=max(lengths),
    )  # fmt: skip
    return plain, fused


@SETTINGS
@given(
    lines_st,
    st.integers(0, 500),
    st.integers(64, 20_000),
    st.integers(0, 2**40),
    st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
)
def test_encode_lines_matches_encode_plain(lines, cut, budget, base, ts_type):
    """Same bytes and facts, for any lines, head, batch budget and offsets: empty
    lines, lines longer than a batch, a head of any part of the first line."""
    plain, fused = both(lines, cut, budget, base, ts_type)
    assert bytes(fused.data) == bytes(plain.data)
    for a, b in zip(plain[1:], fused[1:], strict=True):
        assert a.dtype == b.dtype == np.int64 and a.tolist() == b.tolist()
    assert int(fused.last_offsets[-1]) == base + len(lines) - 1


@settings(max_examples=30, deadline=None)
@given(lines_st, st.integers(0, 50))
def test_kafka_python_reads_what_encode_lines_writes(lines, cut):
    """An independent codec validates every batch's CRC and reads back each line."""
    _, fused = both(lines, cut, 16 * 1024, 5, CREATE_TIME)
    values, position = [], 0
    for size in fused.sizes.tolist():
        batch = DefaultRecordBatch(bytes(fused.data[position : position + size]))
        assert batch.validate_crc()
        values += [record.value for record in batch]
        position += size
    assert values == lines


def test_short_lines_grow_the_output():
    """Empty and one-byte lines take several times their bytes encoded: the
    output grows past its first size and keeps every record."""
    lines = [b""] * 5000 + [b"a"] * 5000
    plain, fused = both(lines, 0, 16 * 1024, 0, CREATE_TIME)
    assert bytes(fused.data) == bytes(plain.data) and len(fused.data) > 5 * 10_000


def test_a_line_over_the_limit_is_refused():
    text = b"short\n" + b"y" * 101 + b"\nafter\n"
    with pytest.raises(TooLargeError, match="101 bytes exceeds 100"):
        columnar.encode_lines(text, b"", 0, 16384, timestamp=NOW, timestamp_type=0, limit=100)
    with pytest.raises(TooLargeError, match="106 bytes exceeds 105"):  # the head counts
        columnar.encode_lines(
            text, b"x" * 101, 0, 16384, timestamp=NOW, timestamp_type=0, limit=105
        )


@pytest.mark.parametrize(
    ("text", "head"), [(b"no newline at the end", b""), (b"a\nb", b""), (b"", b"head")]
)
def test_text_must_be_whole_lines(text, head):
    with pytest.raises(ValueError):
        columnar.encode_lines(text, head, 0, 16384, timestamp=NOW, timestamp_type=0, limit=100)


def test_no_lines_no_batches():
    fused = columnar.encode_lines(b"", b"", 0, 16384, timestamp=NOW, timestamp_type=0, limit=1)
    assert len(fused.data) == 0 and fused.sizes.tolist() == []
