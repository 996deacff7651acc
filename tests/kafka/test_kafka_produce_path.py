"""The Produce path without copies: records read as views of the request frame
(protocol.records_as_views) are the same message kio reads, and the log
appends them in place (`Log.append_batches` with ``buffer``) with the same
result as from a copy: same bytes on disk, same checks, same refusals."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_helpers import encode_request
from kio.index import load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader
from test_kafka_protocol import PRODUCE, batch

from logfs.core.errors import InvalidBatchError
from logfs.core.format import split_batches
from logfs.core.log import Store
from logfs.kafka.protocol import BadRequest, read_request

VERSIONS = range(3, 13)


def request(version: int, topics: dict[str, dict[int, bytes | None]], acks: int = -1):
    t = load_request_schema(PRODUCE, version)
    m = __import__(t.__module__, fromlist=["x"])
    return t(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=tuple(
            m.TopicProduceData(
                name=name,
                partition_data=tuple(
                    m.PartitionProduceData(index=p, records=r) for p, r in parts.items()
                ),
            )
            for name, parts in topics.items()
        ),
    )


def as_bytes(body):
    """``body`` with every records view turned into bytes, to compare with kio's."""
    return dataclasses.replace(
        body,
        topic_data=tuple(
            dataclasses.replace(
                topic,
                partition_data=tuple(
                    dataclasses.replace(p, records=None if p.records is None else bytes(p.records))
                    for p in topic.partition_data
                ),
            )
            for topic in body.topic_data
        ),
    )


records = st.one_of(st.none(), st.binary(max_size=300), st.just(batch([b"x", b"yy"])))
topics = st.dictionaries(
    st.text(min_size=1, max_size=12),
    st.dictionaries(st.integers(0, 2**31 - 1), records, max_size=4),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(VERSIONS), topics=topics, acks=st.sampled_from((-1, 0, 1)))
def test_records_as_views_read_what_kio_reads(version, topics, acks):
    frame = encode_request(PRODUCE, version, request(version, topics, acks))[4:]
    ours = read_request(memoryview(bytearray(frame)).toreadonly())
    request_type = load_request_schema(PRODUCE, version)
    header_type = HeaderV2 if request_type.__flexible__ else HeaderV1
    _, header_size = entity_reader(header_type)(frame, 0)
    kio_body, _ = entity_reader(request_type)(frame, header_size)
    assert as_bytes(ours.body) == kio_body
    for topic in ours.body.topic_data:
        for p in topic.partition_data:
            # views of the received frame, which the log may patch
            assert p.records is None or not p.records.readonly


@pytest.mark.parametrize("version", VERSIONS)
def test_records_of_a_bytes_frame_are_read_only_views(version):
    sent = batch([b"v"], timestamp=1)
    frame = encode_request(PRODUCE, version, request(version, {"t": {0: sent}}))[4:]
    parsed = read_request(frame)
    records = parsed.body.topic_data[0].partition_data[0].records
    assert records.readonly and bytes(records) == sent


@pytest.mark.parametrize("version", (8, 9))
def test_records_past_the_frame_end_are_a_bad_request(version):
    frame = bytearray(encode_request(PRODUCE, version, request(version, {"t": {0: b"abc"}}))[4:])
    # the records' length field is just before their 3 bytes (and the tagged fields)
    tail = 3 + (3 if version >= 9 else 0)
    position = len(frame) - tail - (1 if version >= 9 else 4)
    frame[position : position + (1 if version >= 9 else 4)] = (
        b"\x7f" if version >= 9 else (1 << 30).to_bytes(4, "big")
    )
    with pytest.raises(BadRequest):
        read_request(memoryview(frame).toreadonly())


def test_in_place_appends_are_the_appends_from_a_copy(tmp_path):
    sent = [batch([b"a%d" % i for i in range(n)]) for n in (1, 5, 30, 2)]
    with Store(tmp_path / "copy") as copied, Store(tmp_path / "place") as placed:
        for store in (copied, placed):
            store.create_topic("t", 1, {"segment.bytes": "700"})  # rolls inside a request
        for _ in range(3):
            joined = b"".join(sent)
            copied.log("t", 0).append_batches(split_batches(joined)[0])
            buffer = bytearray(joined)
            batches, _ = split_batches(memoryview(buffer))
            placed.log("t", 0).append_batches(batches, buffer)
        a, b = copied.log("t", 0), placed.log("t", 0)
        assert [(r.offset, r.value) for r in a.scan()] == [(r.offset, r.value) for r in b.scan()]
        assert a.next_offset == b.next_offset == 3 * 38
    files = sorted(p.name for p in (tmp_path / "copy" / "t-0").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "place" / "t-0").iterdir())
    for name in files:
        if name.endswith(".log"):
            copy = (tmp_path / "copy" / "t-0" / name).read_bytes()
            assert copy == (tmp_path / "place" / "t-0" / name).read_bytes()


def test_in_place_appends_refuse_what_copies_refuse(tmp_path):
    good, bad = batch([b"x"]), bytearray(batch([b"y"]))
    bad[-1] ^= 1  # the CRC no longer matches
    with Store(tmp_path) as store:
        store.create_topic("t", 1)
        log = store.log("t", 0)
        buffer = bytearray(good + bad)
        with pytest.raises(InvalidBatchError, match="CRC|crc"):
            log.append_batches(split_batches(memoryview(buffer))[0], buffer)
        assert log.next_offset == 0
        shorter = bytearray(good + good)
        with pytest.raises(ValueError, match="exactly"):
            log.append_batches(split_batches(memoryview(shorter))[0][:1], shorter)
        assert log.next_offset == 0
        # Read-only bytes are not the log's to patch: written as they are, the
        # base offset apart.
        log.append_batches(split_batches(batch([b"z"]))[0], batch([b"z"]))
        assert log.append_batches(split_batches(good)[0], good) == 1
        assert [r.value for r in log.scan(0)] == [b"z", b"x"]


def test_unknown_tagged_fields_are_skipped():
    """A flexible request may carry tagged fields Produce does not define:
    skipped, as Kafka's broker skips them (kio's own reader refuses them)."""
    plain = encode_request(PRODUCE, 9, request(9, {"t": {0: batch([b"v"])}}))[4:]
    assert plain[-1] == 0  # the request's own tagged fields: none
    tagged = bytearray(plain[:-1] + b"\x01\x05\x02xy")  # one: tag 5, 2 bytes
    ours = read_request(memoryview(tagged).toreadonly())
    _, header_size = entity_reader(HeaderV2)(plain, 0)
    kio_body, _ = entity_reader(load_request_schema(PRODUCE, 9))(plain, header_size)
    assert as_bytes(ours.body) == kio_body
    with pytest.raises(BadRequest):  # a tag running past the frame's end
        read_request(memoryview(bytearray(plain[:-1] + b"\x01\x05\x09xy")).toreadonly())
