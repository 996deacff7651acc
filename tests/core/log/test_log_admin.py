"""The core of Kafka 4's topic settings and admin calls, without a network:
every topic key parsed and checked as Kafka's LogConfig does, DeleteRecords on a
log (the start moves, whole segments go, the checkpoint keeps it), segment files
kept ``file.delete.delay.ms`` before they go (across a restart too), the
leader-epoch-checkpoint, preallocated segments, the segment jitter, and the
bounds on producers' timestamps."""

from __future__ import annotations

import os
import random
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from logfs.core.config import IGNORED, LONG_MAX, TopicConfig
from logfs.core.errors import (
    InvalidConfigError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)
from logfs.core.log import Store
from logfs.core.log.epochs import LeaderEpochs
from logfs.core.storage import preallocate
from logfs.core.topic_keys import LIST_KEYS, PARSERS, SYNONYMS, refuse_here


def test_every_key_has_a_field_a_type_and_kafkas_bounds():
    fields = TopicConfig().to_properties()
    assert set(PARSERS) == set(fields)
    assert set(IGNORED) <= set(fields) and set(fields) >= LIST_KEYS
    assert set(SYNONYMS) <= set(fields)
    for key, value, ok in [
        ("compression.gzip.level", "-1", True),
        ("compression.gzip.level", "0", False),
        ("compression.gzip.level", "9", True),
        ("compression.gzip.level", "10", False),
        ("compression.zstd.level", "-131072", True),
        ("compression.zstd.level", "23", False),
        ("compression.lz4.level", "0", False),
        ("local.retention.ms", "-2", True),
        ("local.retention.bytes", "-3", False),
        ("min.insync.replicas", "0", False),
        ("segment.jitter.ms", "0", True),
        ("file.delete.delay.ms", "-1", False),
        ("leader.replication.throttled.replicas", "*", True),
        ("leader.replication.throttled.replicas", "*,0:1", False),
        ("follower.replication.throttled.replicas", " 0:1 , 2:3", True),
        ("retention.bytes", "-7", True),
        ("unclean.leader.election.enable", "TRUE", True),
    ]:
        if ok:
            TopicConfig.from_properties({key: value})
        else:
            with pytest.raises(InvalidConfigError, match=key):
                TopicConfig.from_properties({key: value})
    with pytest.raises(InvalidConfigError, match="conflict"):
        TopicConfig.from_properties({"min.compaction.lag.ms": "9", "max.compaction.lag.ms": "8"})
    with pytest.raises(InvalidConfigError, match="Tiered Storage"):
        refuse_here({"remote.storage.enable": "true"})
    assert TopicConfig().message_timestamp_after_max_ms == 3600000  # Kafka 4's default


def test_the_segment_jitter_is_drawn_below_its_bound():
    config = TopicConfig.from_properties({"segment.jitter.ms": "1000", "segment.ms": "300"})
    draws = {config.random_segment_jitter(random.Random(i)) for i in range(200)}
    assert min(draws) >= 0 and max(draws) < 300 and len(draws) > 50
    assert TopicConfig().random_segment_jitter() == 0


def fill(log, batches=10, per=10):
    for i in range(batches):
        log.append([b"%d-%d" % (i, j) for j in range(per)])


def test_delete_records_moves_the_start_and_drops_whole_segments(tmp_path):
    data = tmp_path / "data"
    config = {"segment.bytes": "600", "file.delete.delay.ms": "0"}
    with Store(data) as store:
        store.create_topic("t", config=config)
        log = store.log("t", 0)
        fill(log)
        segments = log.segment_count
        assert log.delete_records(35) == 35
        assert log.log_start_offset == 35 and log.segment_count < segments
        assert log.segments[0].base_offset <= 35 < log.segments[0].next_offset
        with pytest.raises(OffsetOutOfRangeError):
            log.read(34)
        assert [r.offset for r in log.scan()][:2] == [35, 36]
        assert log.delete_records(10) == 35  # never back
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records(101)
        names = sorted(p.name for p in (data / "t-0").iterdir() if p.suffix == ".log")
        assert int(names[0][:20]) == log.segments[0].base_offset  # the files went at once
        store.checkpoint()
        assert (data / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 35\n"
        assert log.delete_records(-1) == 100  # -1: the log end
        store.create_topic("c", config={"cleanup.policy": "compact"})
        with pytest.raises(PolicyViolationError):
            store.log("c", 0).delete_records(0)
    with Store(data) as store:  # the start is in log-start-offset-checkpoint
        assert store.log("t", 0).log_start_offset == 100


def test_deleted_segments_stay_aside_for_the_delay_across_a_restart(tmp_path):
    data = tmp_path / "data"
    now = [int(time.time() * 1000)]
    with Store(data) as store:
        store.create_topic("t", config={"segment.bytes": "600", "file.delete.delay.ms": "60000"})
        log = store.log("t", 0)
        log.clock = lambda: now[0]
        fill(log)
        log.delete_records(60)
        aside = [p.name for p in (data / "t-0").iterdir() if ".deleted." in p.name]
        assert aside and all(n.endswith(f".deleted.{now[0] + 60000}") for n in aside)
        assert not any(
            p.name.startswith("0000000000000000000")
            and p.name.endswith(".log")
            and int(p.name[:20]) < log.segments[0].base_offset
            for p in (data / "t-0").iterdir()
        )
        now[0] += 59000
        log.enforce_retention()
        assert any(".deleted." in p.name for p in (data / "t-0").iterdir())  # not yet
    with Store(data) as store:  # a restart keeps the delay (the time is in the name)
        assert any(".deleted." in p.name for p in (data / "t-0").iterdir())
        log = store.log("t", 0)
        log.enforce_retention(now_ms=now[0] + 2000)
        assert not any(".deleted." in p.name for p in (data / "t-0").iterdir())


def test_the_epoch_answers_are_kafkas():
    epochs = LeaderEpochs("/nonexistent")
    epochs.entries = [(0, 0), (3, 40), (5, 90)]
    assert epochs.end_offset_for(5, 120) == (5, 120)  # the latest: the log end
    assert epochs.end_offset_for(3, 120) == (3, 90)
    assert epochs.end_offset_for(4, 120) == (3, 90)  # the largest at or below
    assert epochs.end_offset_for(6, 120) == (-1, -1)  # past the latest
    assert epochs.end_offset_for(-1, 120) == (-1, -1)


def test_preallocate_reserves_the_segment_and_gives_back_what_it_did_not_use(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("p", config={"preallocate": "true", "segment.bytes": "8388608"})
        store.create_topic("q", config={"segment.bytes": "8388608"})
        reserved = os.stat(store.log("p", 0).segments[0].log_path)
        plain = os.stat(store.log("q", 0).segments[0].log_path)
        # the test's file system reserves space (ext4, xfs, tmpfs do): a file system that
        # cannot is told apart here, not skipped over
        assert reserved.st_blocks * 512 >= 8388608, "no space reserved (fallocate KEEP_SIZE)"
        assert reserved.st_size == plain.st_size == 0 and plain.st_blocks == 0
        log = store.log("p", 0)
        log.append([b"x" * 100])
        first = log.segments[0].log_path
        log.roll()
        rolled = os.stat(first)
        assert rolled.st_size > 0 and rolled.st_blocks * 512 < 65536  # given back
        assert os.stat(log.segments[1].log_path).st_blocks * 512 >= 8388608


def test_bulk_writes_reserve_the_next_blocks_and_the_roll_gives_them_back(tmp_path):
    """A write of 64 KiB or more reserves disk blocks past the segment's end, the
    file's size unchanged: room for four writes like it, at most 8 MiB past it and
    not past segment.bytes (books.pyx, `reserve_ahead`). A small write reserves
    nothing; the roll gives the rest back."""
    lines = b"".join(b"%099d\n" % i for i in range(10_000))  # 1 MB of lines
    encoded = 1.1 * len(lines)  # with their batches' and records' headers

    def allocated(path) -> tuple[int, int]:
        st = os.stat(path)
        return st.st_size, st.st_blocks * 512

    with Store(tmp_path / "data") as store:
        store.create_topic("b", config={"segment.bytes": str(64 << 20)})
        log = store.log("b", 0)
        log.append([b"x" * 100])
        path = log.segments[0].log_path
        assert allocated(path)[1] <= 8192
        log.append_lines(lines, limit=1000)
        size, blocks = allocated(path)
        assert size == log.segments[0].size  # the batches, nothing more
        assert blocks >= size + 4 * len(lines)
        for _ in range(10):  # the next reserved once they reach the end of the last
            log.append_lines(lines, limit=1000)
            size, blocks = allocated(path)
            assert size == log.segments[0].size
            assert size <= blocks <= size + 5 * encoded + 65536
        for _ in range(13):  # 4 MB writes: 8 MiB ahead, then up to segment.bytes
            log.append_lines(lines * 4, limit=1000)
            size, blocks = allocated(path)
            assert blocks <= min(size + (8 << 20) + 4 * encoded, 64 << 20) + 65536
        assert size > 60 << 20  # the last writes reached segment.bytes
        log.roll()
        size, blocks = allocated(path)
        assert size == log.segments[0].size and blocks < size + 65536  # given back


def test_the_roll_gives_back_blocks_a_crash_left_reserved(tmp_path):
    """Blocks reserved past the active segment's end before a crash (no book
    remembers them once the store opens again) are given back when it rolls."""
    with Store(tmp_path / "data") as store:
        store.create_topic("b")
        store.log("b", 0).append([b"x" * 100])
        path = store.log("b", 0).segments[0].log_path
    with open(path, "r+b") as f:  # as a bulk write's reservation the crash left
        assert preallocate.reserve(f.fileno(), 4 << 20)
    with Store(tmp_path / "data") as store:
        log = store.log("b", 0)
        log.append([b"y" * 100])  # a small write: reserves nothing of its own
        assert os.stat(path).st_blocks * 512 >= 4 << 20
        log.roll()
        st = os.stat(path)
        assert st.st_size == log.segments[0].size and st.st_blocks * 512 < 65536


def batch(timestamps) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, stamp in enumerate(timestamps):
        builder.append(i, timestamp=stamp, key=None, value=b"v", headers=[])
    return bytes(builder.build())


def test_a_producers_timestamps_are_bounded_as_kafka_bounds_them(tmp_path):
    now = 10_000_000_000
    with Store(tmp_path / "data") as store:
        store.create_topic("t", config={"message.timestamp.before.max.ms": "1000"})
        store.create_topic("stamped", config={"message.timestamp.type": "LogAppendTime"})
        log = store.log("t", 0)
        log.clock = lambda: now
        log.append_batches([batch([now, now + 3600_000])])  # an hour ahead: Kafka 4's bound
        with pytest.raises(InvalidTimestampError, match="out of range"):
            log.append_batches([batch([now, now + 3600_001])])
        with pytest.raises(InvalidTimestampError):
            log.append_batches([batch([now, now - 1001])])  # behind, inside the batch
        assert log.next_offset == 2  # nothing of the refused batches
        stamped = store.log("stamped", 0)
        stamped.append_batches([batch([now + 10 * 3600_000])])  # stamped anew: not checked
        assert stamped.next_offset == 1
        assert TopicConfig().message_timestamp_before_max_ms == LONG_MAX
