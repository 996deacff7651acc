"""``Producer("kafka://HOST:PORT")``: logfs's own producer over the wire, to a
listener with no access to its data directory; the same receipts, records and
errors as through the mount or the store."""

from __future__ import annotations

import pytest
from kafka_helpers import Served, stored

from logfs.core.client import Producer
from logfs.core.errors import InvalidConfigError, RecordTooLargeError
from logfs.core.log import Store


def test_producer_over_the_wire_creates_topics_and_appends_exactly(tmp_path):
    data = tmp_path / "data"
    with Served(data, "partitions=3") as served:
        with Producer(f"kafka://{served.bootstrap}", compression_type="zstd") as producer:
            sent = {}
            for i in range(3000):
                key = f"user-{i % 17}".encode()
                p = producer.send("clicks", f"click {i}".encode(), key=key,
                                  headers=[("i", str(i).encode())])  # fmt: skip
                sent.setdefault(p, []).append((key, f"click {i}".encode()))
            receipts = producer.flush()
            assert producer.partitions_for("clicks") == 3
        assert sorted((r.partition, r.first_offset, r.last_offset) for r in receipts) == [
            (p, 0, len(sent[p]) - 1) for p in sorted(sent)
        ]
    for p, records in sent.items():
        got = stored(data, "clicks", p)
        assert [(r.key, r.value) for r in got] == records
        assert [r.headers[0][1] for r in got] == [v.split(b" ")[1] for _, v in records]


def test_topic_settings_come_from_the_listener(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("small", config={"max.message.bytes": "2000"})
    with Served(data) as served, Producer(f"kafka://{served.bootstrap}") as producer:
        with pytest.raises(RecordTooLargeError):
            producer.send("small", b"x" * 3000)
        producer.send("small", b"fits")
        [receipt] = producer.flush()
        assert (receipt.first_offset, receipt.last_offset) == (0, 0)
    assert [r.value for r in stored(data, "small")] == [b"fits"]


def test_a_bad_address_is_refused():
    with pytest.raises(InvalidConfigError):
        Producer("kafka://nohost")
