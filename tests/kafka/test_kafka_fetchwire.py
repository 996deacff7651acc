"""Fetch responses written field by field (fetchwire.py) against kio's generic
writer, byte for byte, over every version served and many shapes: topics and
partitions of every count, long names (multi-byte varints), errors, aborted
transactions (none asked, none, many), regions empty and large; and the frame
decoded by kio into the values it was built from."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from logfs.kafka import fetch, fetchwire
from logfs.kafka.protocol import FETCH, Region, Reply, Request, encode_response, schema

I64 = st.integers(-(2**63), 2**63 - 1)
REGIONS = st.one_of(
    st.none(),
    st.builds(Region, st.integers(3, 1000), st.integers(0, 2**40), st.integers(1, 2**27)),
)
PARTITIONS = st.builds(
    fetchwire.Partition,
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([0, 1, 3, 6, 74]),  # none, out of range, unknown partition, ...
    I64,
    I64,
    I64,
    st.one_of(st.none(), st.lists(st.tuples(I64, I64), max_size=130)),
    REGIONS,
)
TOPICS = st.lists(
    st.tuples(st.text(min_size=1, max_size=200), st.lists(PARTITIONS, max_size=3)), max_size=3
)


def kio_parts(version: int, correlation_id: int, topics) -> list[bytes | Region]:
    reply = Reply(None)
    reply.body = fetch._kio_body(schema(FETCH, version), reply, topics)
    return encode_response(Request(FETCH, version, correlation_id, "c", None), reply)


def joined(parts: list[bytes | Region]) -> list[bytes | Region]:
    """Adjacent bytes joined, empty ones dropped: the same frame however it is cut."""
    out: list[bytes | Region] = []
    for part in parts:
        if isinstance(part, bytes) and out and isinstance(out[-1], bytes):
            out[-1] += part
        elif not isinstance(part, bytes) or part:
            out.append(part)
    return out


@settings(max_examples=150, deadline=None)
@given(version=st.integers(4, 12), correlation_id=st.integers(-(2**31), 2**31 - 1), topics=TOPICS)
def test_the_frame_is_kios(version, correlation_id, topics):
    assert joined(fetchwire.encode(version, correlation_id, topics)) == joined(
        kio_parts(version, correlation_id, topics)
    )


def test_size_field_counts_the_regions():
    region = Region(5, 100, 1 << 20)
    topics = [("t", [fetchwire.Partition(0, 0, 10, 10, 0, None, region)])]
    parts = fetchwire.encode(12, 7, topics)
    size = int.from_bytes(parts[0][:4], "big", signed=True)
    assert size == sum(len(p) if isinstance(p, bytes) else p.size for p in parts) - 4
    assert parts[1] == region


def test_kio_reads_back_what_was_written():
    """Records stand for their regions' bytes: filled in, the frame parses as kio's."""
    aborted = [(5, 100), (6, 2**40)]
    topics = [
        ("a" * 130, [fetchwire.Partition(2, 1, 99, 50, 7, aborted, Region(0, 0, 70))]),
        ("b", [fetchwire.Partition(0, 0, 3, 3, 0, [], None)]),
    ]
    for version in range(4, 13):
        frame = b"".join(
            p if isinstance(p, bytes) else b"\x07" * p.size
            for p in fetchwire.encode(version, 11, topics)
        )
        m = schema(FETCH, version)
        header = 4 + (5 if version >= 12 else 4)  # size, correlation id (+ tags)
        body, used = entity_reader(m.FetchResponse)(memoryview(frame), header)
        assert header + used == len(frame)
        first, second = body.responses
        assert first.topic == "a" * 130 and second.topic == "b"
        p = first.partitions[0]
        assert (p.partition_index, p.error_code.value, p.high_watermark) == (2, 1, 99)
        assert p.last_stable_offset == 50 and bytes(p.records) == b"\x07" * 70
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == aborted
        q = second.partitions[0]
        assert q.aborted_transactions == () and bytes(q.records) == b""


@pytest.mark.parametrize("version", [3, 13])
def test_versions_outside_are_refused(version):
    with pytest.raises(ValueError, match=f"v{version}"):
        fetchwire.encode(version, 0, [])
