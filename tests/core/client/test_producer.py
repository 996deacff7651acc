"""The Producer (core/client/producer.py): the same sends give the same records, whether
they go through a live mount's ``append.batches`` or straight to the store.

Most tests run twice, ``store`` (a plain data dir) and ``mount`` (a real mount
of it, which holds DATA's lock: a flush that succeeds went through the mount).
Records are read back with a read-only `Store` and with kafka-python's
independent codec.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
from pathlib import Path

import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2
from kafka.record import MemoryRecords
from mount_helpers import Daemon, force_unmount, wait_live, wait_unmounted

from logfs import LogfsError, Producer, Store
from logfs.core.client import delivery, mountinfo
from logfs.core.client.producer import ProducerError, Receipt
from logfs.core.errors import (
    InvalidConfigError,
    InvalidTopicError,
    RecordTooLargeError,
    UnknownTopicError,
)
from logfs.core.format import compression
from logfs.core.format.batching import Cutter
from logfs.core.format.record import HEADER_SIZE

pytestmark = pytest.mark.timeout(180)

T0 = 1_700_000_000_000


class Target:
    """A data dir with topics, mounted or not."""

    def __init__(self, tmp_path: Path, kind: str, stack: contextlib.ExitStack) -> None:
        self.data = tmp_path / "data"
        self.mnt = tmp_path / "mnt"
        self.kind = kind
        self.stack = stack
        self.daemon: Daemon | None = None

    def start(self, topics: dict[str, tuple[int, dict]] | None = None, *options: str) -> Target:
        with Store(self.data) as store:
            for name, (partitions, config) in (topics or {}).items():
                store.create_topic(name, partitions, config)
        if self.kind == "mount":
            self.mnt.mkdir(exist_ok=True)
            self.daemon = self.stack.enter_context(Daemon(self.data, self.mnt, *options))
            assert wait_live(self.data) == str(self.mnt)
        return self

    def producer(self, **kwargs) -> Producer:
        # Through a mount the lock is the daemon's: waiting for it would only hide a bug.
        return Producer(self.data, lock_timeout=0.5 if self.kind == "mount" else 5, **kwargs)


@pytest.fixture(params=["store", "mount"])
def target(request, tmp_path):
    with contextlib.ExitStack() as stack:
        yield Target(tmp_path, request.param, stack)


def records(data, topic: str, partition: int) -> list[tuple]:
    with Store(data, read_only=True) as store:
        log = store.log(topic, partition)
        return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in log.scan()]


def kafka_batches(data, topic: str, partition: int) -> list:
    """Every batch of the partition's segments, decoded and CRC-checked by kafka-python."""
    out = []
    for path in sorted(Path(data, f"{topic}-{partition}").glob("*.log")):
        memory = MemoryRecords(path.read_bytes())
        while memory.has_next():
            batch = memory.next_batch()
            assert batch.validate_crc()
            out.append(batch)
    return out


def kafka_records(data, topic: str, partition: int) -> list[tuple]:
    return [
        (r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
        for batch in kafka_batches(data, topic, partition)
        for r in batch
    ]


def sends(producer: Producer) -> None:
    """Keys, headers, timestamps, tombstones, explicit partitions; all deterministic."""
    for i in range(300):
        producer.send(
            "orders",
            b"order %d" % i,
            key=b"customer-%d" % (i % 11),
            headers=[("source", b"test"), ("seq", b"%d" % i), ("none", None)],
            timestamp=T0 + i,
        )
    producer.send("orders", None, key=b"customer-3", timestamp=T0 + 300)  # a tombstone
    producer.send("orders", b"\x00binary\nvalue\xff", partition=2, timestamp=T0 + 301)
    producer.send("orders", b"", key=b"", partition=1, timestamp=T0 + 302)


# ---------------------------------------------------------------- the same records either way


def test_store_and_mount_give_the_same_records(tmp_path):
    results = {}
    for kind in ("store", "mount"):
        with contextlib.ExitStack() as stack:
            target = Target(tmp_path / kind, kind, stack).start({"orders": (3, {})})
            with target.producer() as producer:
                sends(producer)
                receipts = producer.flush()
            contents = {p: records(target.data, "orders", p) for p in range(3)}
        results[kind] = receipts, contents
    assert results["store"] == results["mount"]
    receipts, contents = results["store"]
    assert sum(len(c) for c in contents.values()) == 303
    for receipt in receipts:  # contiguous: one per partition, covering exactly its records
        offsets = [r[0] for r in contents[receipt.partition]]
        assert (receipt.first_offset, receipt.last_offset) == (0, len(offsets) - 1)
    assert [r[:2] for r in receipts] == [("orders", 0), ("orders", 1), ("orders", 2)]
    by_value = {r[3]: r for c in contents.values() for r in c}
    assert by_value[b"order 7"][1:] == (
        T0 + 7,
        b"customer-7",
        b"order 7",
        (("source", b"test"), ("seq", b"7"), ("none", None)),
    )
    assert by_value[None][2] == b"customer-3"
    assert contents[2][-1][3] == b"\x00binary\nvalue\xff"
    assert contents[1][-1][2:4] == (b"", b"")


def test_records_decode_with_kafka_python(target):
    target.start({"orders": (3, {}), "gz": (1, {"compression.type": "gzip"})})
    with target.producer() as producer:
        sends(producer)
        for i in range(100):
            producer.send("gz", b"compressible " * 20, key=b"%d" % i, timestamp=T0 + i)
    for topic, partitions in (("orders", 3), ("gz", 1)):
        for p in range(partitions):
            assert kafka_records(target.data, topic, p) == records(target.data, topic, p)


def test_receipts_are_contiguous_across_flushes(target):
    target.start({"t": (2, {})})
    with target.producer() as producer:
        got = []
        for round_ in range(3):
            for i in range(10):
                producer.send("t", b"%d-%d" % (round_, i), partition=i % 2)
            got.append(producer.flush())
        assert producer.flush() == []  # nothing pending, nothing appended
    assert got == [
        [Receipt("t", 0, 0, 4), Receipt("t", 1, 0, 4)],
        [Receipt("t", 0, 5, 9), Receipt("t", 1, 5, 9)],
        [Receipt("t", 0, 10, 14), Receipt("t", 1, 10, 14)],
    ]
    assert [r[3] for r in records(target.data, "t", 1)][5:10] == [
        b"1-%d" % i for i in (1, 3, 5, 7, 9)
    ]


def test_flush_returns_once_durable(target):
    target.start({"t": (1, {"flush.ms": "3600000"})}, "flush.ms=3600000")
    with target.producer() as producer:
        producer.send("t", b"a")
        producer.send("t", b"b")
        assert producer.flush() == [("t", 0, 0, 1)]
        if target.kind == "mount":
            state = json.loads((target.mnt / "t/0/state").read_text())
        else:
            with Store(target.data, read_only=True) as store:
                log = store.log("t", 0)
                state = {"recovery_point": log.recovery_point, "next_offset": log.next_offset}
        assert state["recovery_point"] == state["next_offset"] == 2


def test_buffer_memory_flushes_from_send_and_keeps_the_receipts(target):
    target.start({"t": (1, {})})
    with target.producer(buffer_memory=20_000) as producer:
        for i in range(200):
            producer.send("t", b"x" * 100 + b"%d" % i)
        assert len(records(target.data, "t", 0)) > 0  # sent before flush() was called
        assert producer.flush() == [("t", 0, 0, 199)]  # one contiguous run


def test_close_flushes_and_then_refuses(target):
    target.start()
    producer = target.producer()
    with producer:
        producer.send("t", b"pending at close")
    assert [r[3] for r in records(target.data, "t", 0)] == [b"pending at close"]
    producer.close()  # idempotent
    with pytest.raises(ProducerError, match="closed"):
        producer.send("t", b"late")
    with pytest.raises(ProducerError, match="closed"):
        producer.flush()


# ---------------------------------------------------------------- batches and compression


def test_batches_are_cut_at_batch_size(target):
    target.start({"t": (1, {}), "one": (1, {})})
    with target.producer(batch_size=4096) as producer:
        for i in range(100):
            producer.send("t", b"%03d" % i + b"v" * 497, partition=0, timestamp=T0)
    with target.producer(batch_size=0) as producer:
        for i in range(5):
            producer.send("one", b"%d" % i)
    batches = kafka_batches(target.data, "t", 0)
    assert len(batches) > 10
    assert all(b.size_in_bytes <= 4096 for b in batches)
    assert sum(b.records_count for b in batches) == 100
    assert [b.records_count for b in kafka_batches(target.data, "one", 0)] == [1] * 5


@pytest.mark.parametrize(
    "batch_bytes, max_message_bytes, bounds, starts",
    [
        (HEADER_SIZE + 100, 1 << 20, [40, 40, 40, 20], [False, False, True, False]),
        (HEADER_SIZE + 100, 1 << 20, [150, 10, 100], [False, True, True]),  # a big one alone
        (1 << 20, HEADER_SIZE + 100, [60, 40, 1], [False, False, True]),  # max.message.bytes
        (0, 1 << 20, [1, 1, 1], [False, True, True]),  # batch.size 0: one record a batch
    ],
)
def test_the_one_cutting_rule(batch_bytes, max_message_bytes, bounds, starts):
    cutter = Cutter(batch_bytes, max_message_bytes)
    assert [cutter.add(size) for size in bounds] == starts


def test_compression_follows_the_topic(target):
    target.start(
        {
            "plain": (1, {}),
            "gz": (1, {"compression.type": "gzip"}),
            "zs": (1, {"compression.type": "zstd"}),
            "unc": (1, {"compression.type": "uncompressed"}),
        }
    )
    value = b"a compressible value " * 10
    for codec in (None, "lz4"):
        with target.producer(compression_type=codec) as producer:
            for topic in ("plain", "gz", "zs", "unc"):
                for _ in range(50):
                    producer.send(topic, value)
    expected = {
        "plain": [compression.NONE, compression.LZ4],  # "producer": the producer's codec
        "gz": [compression.GZIP] * 2,  # the topic's codec, whatever the producer's
        "zs": [compression.ZSTD] * 2,
        "unc": [compression.NONE] * 2,
    }
    for topic, codecs in expected.items():
        batches = kafka_batches(target.data, topic, 0)
        assert [b.compression_type for b in batches] == codecs, topic
        assert [r[3] for r in records(target.data, topic, 0)] == [value] * 100


@pytest.mark.mount
def test_mount_wide_defaults_count(tmp_path):
    """A topic without its own compression.type takes the mount's -o default."""
    with contextlib.ExitStack() as stack:
        target = Target(tmp_path, "mount", stack).start({"t": (1, {})}, "compression.type=snappy")
        with target.producer() as producer:
            producer.send("t", b"v" * 100)
        assert [b.compression_type for b in kafka_batches(target.data, "t", 0)] == [
            compression.SNAPPY
        ]


def test_record_too_large_is_refused_by_send(target):
    target.start({"small": (1, {"max.message.bytes": "1000"})})
    with target.producer() as producer:
        producer.send("small", b"x" * (1000 - HEADER_SIZE - 20))  # fits exactly-ish
        with pytest.raises(RecordTooLargeError, match=r"max.message.bytes=1000"):
            producer.send("small", b"x" * 1000)
        with pytest.raises(RecordTooLargeError):
            producer.send("small", b"v", headers=[("h", b"x" * 1000)])
        assert producer.flush() == [("small", 0, 0, 0)]  # only the one that fits
    (batch,) = kafka_batches(target.data, "small", 0)
    assert batch.size_in_bytes <= 1000


def test_a_full_batch_is_never_over_max_message_bytes(target):
    """batch.size above the topic's limit: batches are cut at the limit."""
    target.start({"t": (1, {"max.message.bytes": "2000", "compression.type": "gzip"})})
    with target.producer(batch_size=1 << 20) as producer:
        for _ in range(50):
            producer.send("t", os.urandom(300))  # incompressible: gzip makes batches grow
    batches = kafka_batches(target.data, "t", 0)
    assert all(b.size_in_bytes <= 2000 for b in batches)
    assert sum(b.records_count for b in batches) == 50


def test_a_batch_larger_than_one_write(target):
    """A record of 3 MiB is one batch, carried by several 1 MiB FUSE writes."""
    target.start({"big": (1, {"max.message.bytes": str(4 << 20)})})
    value = os.urandom(3 << 20)
    with target.producer() as producer:
        producer.send("big", b"small")
        producer.send("big", value)
        producer.send("big", b"small again")
        assert producer.flush() == [("big", 0, 0, 2)]
    assert [r[3] for r in records(target.data, "big", 0)] == [b"small", value, b"small again"]


# ---------------------------------------------------------------- partitions and topics


def test_keyed_records_follow_kafkas_partitioner(target):
    target.start({"t": (7, {})})
    keys = [b"key-%d" % i for i in range(200)] + [b"", b"\xff" * 13]
    with target.producer() as producer:
        chosen = [producer.send("t", k, key=k) for k in keys]
    for key, partition in zip(keys, chosen, strict=True):
        assert partition == (kafka_murmur2(key) & 0x7FFFFFFF) % 7
    for p in range(7):
        assert [r[2] for r in records(target.data, "t", p)] == [
            k for k, c in zip(keys, chosen, strict=True) if c == p
        ]


def test_unkeyed_records_stick_to_a_partition_until_its_batch_fills(target):
    target.start({"t": (3, {})})
    with target.producer(batch_size=2048) as producer:
        chosen = [producer.send("t", b"v" * 100) for _ in range(60)]
        runs = [chosen[0]]
        for p in chosen[1:]:
            if p != runs[-1]:
                runs.append(p)
        assert len(runs) > 2  # moved on as batches filled...
        assert all((b - a) % 3 == 1 for a, b in zip(runs, runs[1:], strict=False))  # round robin
        assert all(len(run) > 10 for run in _runs(chosen)[:-1])  # ...not record by record
        receipts = producer.flush()
    assert sum(r.last_offset - r.first_offset + 1 for r in receipts) == 60


def _runs(items):
    out = []
    for item in items:
        if out and out[-1][0] == item:
            out[-1].append(item)
        else:
            out.append([item])
    return out


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_send_many_gives_the_records_send_gives(target, codec):
    target.start({"one": (3, {}), "many": (3, {})})
    keys = [b"k%d" % (i % 5) if i % 3 else None for i in range(400)]
    values = [b"value %d" % i if i % 7 else None for i in range(400)]
    headers = [(("h", b"%d" % i),) if i % 2 else () for i in range(400)]
    with target.producer(compression_type=codec) as producer:
        for k, v, h in zip(keys, values, headers, strict=True):
            producer.send("one", v, key=k, headers=h, partition=1, timestamp=T0)
        assert producer.send_many(
            "many", values, keys=keys, headers=headers, partition=1, timestamp=T0
        ) == {1: 400}
        plain = [b"line %d" % i for i in range(1000)]  # the column-wise encoder
        assert producer.send_many("many", plain, partition=2, timestamp=T0) == {2: 1000}
        producer.flush()
    assert kafka_records(target.data, "many", 1) == kafka_records(target.data, "one", 1)
    # one cutting rule: the same records make the same batches either way
    cut = [b.records_count for b in kafka_batches(target.data, "many", 1)]
    assert len(cut) > 1 and cut == [b.records_count for b in kafka_batches(target.data, "one", 1)]
    assert [r[3] for r in kafka_records(target.data, "many", 2)] == plain
    wanted = compression.BY_NAME[codec]
    assert {b.compression_type for b in kafka_batches(target.data, "many", 1)} == {wanted}


def test_send_many_places_keys_by_hash_and_unkeyed_rows_together(target):
    target.start({"t": (5, {})})
    keys = [b"key-%d" % i if i % 2 else None for i in range(100)]
    with target.producer(batch_size=1024) as producer:
        counts = producer.send_many("t", [b"v%d" % i for i in range(100)], keys=keys)
        receipts = producer.flush()
    assert sum(counts.values()) == 100
    assert sum(r.last_offset - r.first_offset + 1 for r in receipts) == 100
    unkeyed = set()
    for p in range(5):
        for _, _, key, value, _ in records(target.data, "t", p):
            i = int(value[1:])
            if key is None:
                unkeyed.add(p)
            else:
                assert p == (kafka_murmur2(key) & 0x7FFFFFFF) % 5
            assert key == keys[i]
    assert len(unkeyed) == 1  # one sticky partition for the call's unkeyed records
    assert all(
        b.size_in_bytes <= 1024 for p in range(5) for b in kafka_batches(target.data, "t", p)
    )


def test_send_many_of_a_record_too_large_queues_nothing(target):
    target.start({"t": (1, {"max.message.bytes": 2000})})
    with target.producer() as producer:
        with pytest.raises(RecordTooLargeError):
            producer.send_many("t", [b"small"] * 50 + [b"x" * 3000], partition=0)
        assert producer.send_many("t", [b"after"], partition=0) == {0: 1}
        with pytest.raises(UnknownTopicError):
            producer.send_many("t", [b"v"], partition=1)
        assert producer.send_many("t", []) == {}
    assert [r[3] for r in records(target.data, "t", 0)] == [b"after"]


def test_a_missing_topic_is_created(target):
    target.start(None, "partitions=2")
    with target.producer() as producer:
        assert producer.send("new", b"first", partition=0) == 0
        assert producer.flush() == [("new", 0, 0, 0)]
    with Store(target.data, read_only=True) as store:
        # The store's auto-created topic has one partition; the mount's mkdir the mount's count.
        assert store.topics() == {"new": 1 if target.kind == "store" else 2}


def test_bad_arguments(target):
    target.start({"t": (2, {})})
    with pytest.raises(InvalidConfigError, match="brotli"):
        Producer(target.data, compression_type="brotli")
    with target.producer() as producer:
        with pytest.raises(InvalidTopicError):
            producer.send("no/slash", b"v")
        with pytest.raises(UnknownTopicError, match=r"partition 2 .* \[0, 2\)"):
            producer.send("t", b"v", partition=2)
        with pytest.raises(TypeError, match="value must be bytes"):
            producer.send("t", "text")
        with pytest.raises(TypeError, match="header name"):
            producer.send("t", b"v", headers=[(b"name", b"v")])
        assert producer.flush() == []


# ---------------------------------------------------------------- finding the writer


def test_lock_held_by_another_writer(tmp_path):
    data = tmp_path / "data"
    with Producer(data, lock_timeout=0.3) as producer:
        producer.send("t", b"kept")  # creates the topic: DATA is free now
        holder = Store(data)
        try:
            with pytest.raises(LogfsError, match="in use by another logfs process"):
                producer.flush()
        finally:
            holder.close()
        assert producer.flush() == [("t", 0, 0, 0)]  # the batches waited
    assert [r[3] for r in records(data, "t", 0)] == [b"kept"]


@pytest.mark.mount
def test_falls_back_to_the_store_when_the_daemon_was_killed(tmp_path):
    with contextlib.ExitStack() as stack:
        target = Target(tmp_path, "mount", stack).start({"t": (1, {})}, "auto_unmount")
        producer = target.producer()
        producer.send("t", b"through the mount")
        assert producer.flush() == [("t", 0, 0, 0)]
        os.kill(target.daemon.pid, signal.SIGKILL)
        target.daemon.proc.wait(timeout=30)
        if not wait_unmounted(target.mnt, timeout=10):
            # fusermount3's auto_unmount does not detach a mount something still uses
            # (seen under load): gone either way is what this test is about.
            force_unmount(target.mnt)
        assert mountinfo.read_record(target.data) is not None  # left behind, stale
        producer.send("t", b"through the store")
        assert producer.flush() == [("t", 0, 1, 1)]
        producer.close()
    assert [r[3] for r in records(target.data, "t", 0)] == [
        b"through the mount",
        b"through the store",
    ]


@pytest.mark.mount
def test_a_dead_mount_left_in_the_table_is_not_used(tmp_path):
    """Killed without auto_unmount: every access to the mount would fail with ENOTCONN."""
    with contextlib.ExitStack() as stack:
        target = Target(tmp_path, "mount", stack).start({"t": (1, {})})
        os.kill(target.daemon.pid, signal.SIGKILL)
        target.daemon.proc.wait(timeout=30)
        with target.producer() as producer:
            producer.send("t", b"v")
            assert producer.flush() == [("t", 0, 0, 0)]
    assert [r[3] for r in records(target.data, "t", 0)] == [b"v"]


def test_producer_is_exported():
    import logfs

    assert logfs.Producer is Producer and "Producer" in logfs.__all__


def test_writes_carry_whole_batches_of_at_most_a_mebibyte():
    batches = [bytes([i]) * size for i, size in enumerate([300_000] * 7 + [1_500_000, 10])]
    writes = list(delivery.chunks(batches, delivery.MAX_WRITE))
    assert b"".join(writes) == b"".join(batches)
    assert [len(w) for w in writes] == [900_000, 900_000, 300_000, 1_500_000, 10]


def test_receipts_merge_only_contiguous_runs(tmp_path):
    """Another writer's records between two writes split the run (the mount path)."""
    producer = Producer(tmp_path / "data")
    producer._done(("t", 0), 0, 5)
    producer._done(("t", 1), 0, 2)
    producer._done(("t", 0), 5, 5)  # right after: the same run
    producer._done(("t", 0), 12, 3)  # offsets 10 and 11 are someone else's
    assert producer.flush() == [("t", 0, 0, 9), ("t", 1, 0, 1), ("t", 0, 12, 14)]


@pytest.mark.parametrize("live", [False, True])
def test_an_eio_counts_as_the_mount_gone_only_once_its_record_is_dead(tmp_path, monkeypatch, live):
    """The kernel ends a request it was copying to a daemon killed at that moment with EIO,
    not ENOTCONN: the writer tells the two apart by the mount's record, as when opening."""
    partition = tmp_path / "mnt" / "t" / "0"
    partition.mkdir(parents=True)
    (partition / "append.batches").write_bytes(b"")  # stands in for the mount's file
    monkeypatch.setattr(mountinfo, "live_record", lambda data, timeout: object() if live else None)

    def write(fd, data):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(delivery.os, "write", write)
    with pytest.raises(LogfsError) as refused:
        delivery.append_through_mount(
            tmp_path / "data", tmp_path / "mnt", "t", 0, [b"batch"], lambda *r: None
        )
    if live:  # a live mount's EIO is what the store would have raised
        assert "went away" not in str(refused.value)
        assert "Input/output error" in str(refused.value)
    else:
        assert isinstance(refused.value, ProducerError)
        assert "the mount went away" in str(refused.value)
