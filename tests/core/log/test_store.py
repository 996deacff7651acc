import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from logfs import Store
from logfs.core.errors import InvalidTopicError, LogfsError, TopicExistsError, UnknownTopicError
from logfs.core.log.store import read_checkpoint


def test_api_of_the_contract(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("orders", partitions=3, config={"segment.bytes": 1 << 20})
        log = store.log("orders", 0)
        first = log.append([b"a", b"b"])
        assert log.read(first).value == b"a"
        assert [r.value for r in log.scan(first)] == [b"a", b"b"]
        assert (log.log_start_offset, log.next_offset) == (0, 2)
        log.flush()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        ".lock", "config", "log-start-offset-checkpoint", "logfs-reserve", "orders-0", "orders-1",
        "orders-2", "recovery-point-offset-checkpoint",
    ]  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "data" / "orders-0").iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]  # fmt: skip
    assert (tmp_path / "data" / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    text = (tmp_path / "data" / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n3\norders 0 2\norders 1 0\norders 2 0\n"
    assert (tmp_path / "data/config/orders.properties").read_text() == "segment.bytes=1048576\n"


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "a/b", "x" * 250, "ü"])
def test_kafka_topic_name_rules(tmp_path, name):
    with Store(tmp_path) as store, pytest.raises(InvalidTopicError):
        store.create_topic(name)


@pytest.mark.parametrize("existing, new", [("a.b", "a_b"), ("a_b", "a.b"), ("x._y", "x_.y")])
def test_topics_colliding_in_kafka_metric_names_are_refused(tmp_path, existing, new):
    with Store(tmp_path) as store:
        store.create_topic(existing)
        with pytest.raises(InvalidTopicError, match=f"collides with existing topic '{existing}'"):
            store.create_topic(new)
        assert store.topics() == {existing: 1}
        store.delete_topic(existing)
        store.create_topic(new)  # once the other is gone, the name is free
        assert store.topics() == {new: 1}


def test_topic_lifecycle(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("my-topic.v1_x", 2)
        with pytest.raises(TopicExistsError):
            store.create_topic("my-topic.v1_x")
        store.add_partitions("my-topic.v1_x", 4)
        assert store.partitions("my-topic.v1_x") == [0, 1, 2, 3]
        store.set_topic_config("my-topic.v1_x", {"flush.ms": "5"})
        assert store.topic_config("my-topic.v1_x").flush_ms == 5
        store.delete_topic("my-topic.v1_x")
        assert store.topics() == {}
        with pytest.raises(UnknownTopicError):
            store.log("my-topic.v1_x", 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".lock", "config", "log-start-offset-checkpoint", "logfs-reserve",
        "recovery-point-offset-checkpoint",
    ]  # fmt: skip


def test_bad_config_changes_nothing(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("t", 1, {"flush.ms": "5"})
        with pytest.raises(LogfsError):
            store.set_topic_config("t", {"flush.ms": "7", "segment.bytes": "tiny"})
        assert store.topic_overrides("t") == {"flush.ms": "5"}


def test_one_writer_at_a_time(tmp_path):
    with Store(tmp_path):
        with pytest.raises(LogfsError, match="in use"):
            Store(tmp_path)
        with Store(tmp_path, read_only=True) as reader:
            assert reader.topics() == {}


def test_log_start_offset_survives_restart(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("t", 1, {"segment.bytes": "1000", "retention.bytes": "2000"})
        log = store.log("t", 0)
        for i in range(100):
            log.append([b"%040d" % i])
        log.enforce_retention()
        start = log.log_start_offset
        assert start > 0
    assert read_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): start}
    with Store(tmp_path) as store:
        assert store.log("t", 0).log_start_offset == start


def kafka_batch(base_offset, records, compression=0):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    buf = builder.build()
    buf[0:8] = base_offset.to_bytes(8, "big")
    return bytes(buf)


def test_kafka_broker_log_dir_opens_read_only(tmp_path):
    """A log dir as a Kafka broker leaves it: extra files, preallocated
    indexes, compressed batches from an independent encoder."""
    data = tmp_path / "kafka-logs"
    part = data / "orders-0"
    part.mkdir(parents=True)
    (data / "meta.properties").write_text("version=1\nbroker.id=0\ncluster.id=abc\n")
    (data / "cleaner-offset-checkpoint").write_text("0\n0\n")
    checkpoint = "0\n2\norders 0 9\n__consumer_offsets 0 0\n"
    (data / "recovery-point-offset-checkpoint").write_text(checkpoint)
    (data / "log-start-offset-checkpoint").write_text("0\n1\norders 0 0\n")
    (data / "__consumer_offsets-0").mkdir()
    (data / "__consumer_offsets-0" / "00000000000000000000.log").write_bytes(b"")
    (data / "orders-1.8a7f-delete").mkdir()
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (part / "partition.metadata").write_text("version: 0\ntopic_id: abc\n")
    (part / "00000000000000000000.snapshot").write_bytes(b"\0" * 20)
    (part / "00000000000000000000.txnindex").write_bytes(b"")
    expected = []
    blob = b""
    offset = 0
    for codec in range(5):
        records = [
            (b"k%d" % i if i % 2 else None, b"value %d/%d" % (codec, i), [("h", b"%d" % i)], ts)
            for i, ts in enumerate(range(1000, 1003))
        ]
        blob += kafka_batch(offset, records, codec)
        expected += [(offset + i, k, v, tuple(h), ts) for i, (k, v, h, ts) in enumerate(records)]
        offset += len(records)
    (part / "00000000000000000000.log").write_bytes(blob)
    # an active segment's preallocated indexes: nothing but a zero-filled tail
    (part / "00000000000000000000.index").write_bytes(bytes(8 * 1024))
    (part / "00000000000000000000.timeindex").write_bytes(bytes(12 * 1024))
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    with Store(data, read_only=True) as store:
        assert store.topics() == {"__consumer_offsets": 1, "orders": 1}
        log = store.log("orders", 0)
        got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in log.scan()]
        assert got == expected
        assert log.read(7).value == b"value 2/1"  # mid-batch offset of a snappy batch
        assert log.offset_for_time(1002) == 2
    assert {p: p.read_bytes() for p in data.rglob("*") if p.is_file()} == before


def test_append_to_topic_partitions_like_kafka(tmp_path):
    from kafka.partitioner.default import murmur2 as kafka_murmur2

    with Store(tmp_path) as store:
        store.create_topic("t", 3)
        keys = [b"a", None, b"b", None, b"a"]
        receipts = store.append_to_topic("t", [b"1", b"2", b"3", b"4", b"5"], keys)
        assert sum(n for _, _, n in receipts) == 5
        for key, value in [(b"a", b"1"), (b"b", b"3"), (b"a", b"5")]:
            p = (kafka_murmur2(key) & 0x7FFFFFFF) % 3
            assert value in [r.value for r in store.log("t", p).scan()]
        unkeyed = {
            p for p in range(3) if {b"2", b"4"} <= {r.value for r in store.log("t", p).scan()}
        }
        assert len(unkeyed) == 1  # one append's unkeyed records stay together
        # successive unkeyed appends rotate over the partitions
        chosen = [store.append_to_topic("t", [b"x"])[0][0] for _ in range(3)]
        assert sorted(chosen) == [0, 1, 2]


def test_a_full_disk_gives_the_reserve_back_for_a_settings_file(tmp_path, monkeypatch):
    """The first write of a settings file finds the disk full: DATA's reserve is
    given back and the write tried again; a checkpoint makes the reserve again."""
    import errno as errnos

    from logfs.core.log import topics
    from logfs.core.storage.reserve import RESERVE_BYTES, RESERVE_FILE

    reserve = tmp_path / RESERVE_FILE
    with Store(tmp_path) as store:
        assert reserve.stat().st_size == RESERVE_BYTES
        store.create_topic("t")
        real, calls = topics.replace_file, []

        def full_once(path, text):
            calls.append(path)
            if len(calls) == 1:
                raise OSError(errnos.ENOSPC, "No space left on device")
            real(path, text)

        monkeypatch.setattr(topics, "replace_file", full_once)
        store.set_topic_config("t", {"retention.ms": "1000"})
        assert len(calls) == 2 and not reserve.exists()
        assert store.topic_overrides("t") == {"retention.ms": "1000"}

        def always_full(path, text):
            raise OSError(errnos.ENOSPC, "No space left on device")

        monkeypatch.setattr(topics, "replace_file", always_full)
        with pytest.raises(OSError):  # no reserve left to give: the error stands
            store.set_topic_config("t", {"retention.ms": "2000"})
        assert store.topic_overrides("t") == {"retention.ms": "1000"}
        store.checkpoint()
        assert reserve.stat().st_size == RESERVE_BYTES
