"""The log cleaner (core/log/cleaner.py): Kafka's compaction semantics in tables,
an independent decoder (kafka-python) over every cleaned segment, crashes at
each step of a cleaning, and a property: the latest value of every key is
what a dictionary says, before cleaning, after it and after reopening."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import trio
from compacted import latest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from stress import scale

from logfs import Store
from logfs.core.errors import InvalidConfigError, InvalidRecordError, OffsetOutOfRangeError
from logfs.core.format.record import encode_batch, read_header, records_section
from logfs.core.log import cleaner
from logfs.core.log._keymap import OffsetMap
from logfs.core.log.store import CLEANER_FILE
from logfs.core.tools.offline import check
from logfs.daemon import Cleaner

NOW = int(time.time() * 1000)
DAY = 24 * 3600 * 1000
LATER = NOW + 2 * DAY  # past the default delete.retention.ms of everything appended now


def compacted(store: Store, name="c", **config) -> None:
    settings_ = {"cleanup.policy": "compact", "segment.bytes": 1024, **config}
    store.create_topic(name, 1, {k: str(v) for k, v in settings_.items()})


def put(log, key: bytes, value: bytes | None, timestamp: int | None = None) -> int:
    return log.append([value], keys=[key], timestamp=timestamp)


def records(log) -> list[tuple[int, bytes, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in log.scan()]


def kafka_decoded(directory: Path) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of every .log, read by kafka-python; every CRC checked."""
    out = []
    for path in sorted(directory.glob("*.log")):
        batches = MemoryRecords(path.read_bytes())
        while batches.has_next():
            batch = batches.next_batch()
            assert batch.validate_crc(), path
            out += [(r.offset, r.key, r.value) for r in batch]
    return out


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "data") as store:
        yield store


def clean(store: Store, now: int | None = None, force: bool = True):
    """``now`` defaults to a second from now: every record appended so far is older."""
    now = int(time.time() * 1000) + 1000 if now is None else now
    return cleaner.clean_store(store, now_ms=now, force=force)


# ---------------------------------------------------------------- configuration


def test_compaction_settings_have_kafkas_names_and_defaults():
    from logfs.core.config import TopicConfig

    config = TopicConfig()
    assert (config.cleanup_policy, config.min_cleanable_dirty_ratio) == ("delete", 0.5)
    assert (config.min_compaction_lag_ms, config.delete_retention_ms) == (0, DAY)
    for policy, normal in [
        ("compact", "compact"),
        ("compact,delete", "compact,delete"),
        ("delete, compact", "compact,delete"),
    ]:
        assert TopicConfig.from_properties({"cleanup.policy": policy}).cleanup_policy == normal
    for key, value in [
        ("cleanup.policy", "squash"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.compaction.lag.ms", "-1"),
        ("max.compaction.lag.ms", "0"),
        ("delete.retention.ms", "x"),
    ]:
        with pytest.raises(InvalidConfigError, match=key):
            TopicConfig.from_properties({key: value})


def test_compacted_topics_refuse_records_without_a_key(store):
    compacted(store)
    log = store.log("c", 0)
    with pytest.raises(InvalidRecordError, match="needs a key"):
        log.append([b"no key"])
    with pytest.raises(InvalidRecordError):
        log.append([b"a", b"b"], keys=[b"k", None])
    with pytest.raises(InvalidRecordError):
        log.append_packed(b"line\n", np.array([4]))
    put(log, b"k", None)  # a tombstone has a key
    assert log.next_offset == 1


# ---------------------------------------------------------------- semantics


def test_the_latest_record_of_every_key_survives_at_its_offset(store):
    compacted(store)
    log = store.log("c", 0)
    for i in range(200):
        put(log, b"k%d" % (i % 7), b"v%d" % i)
    before = records(log)
    active = Path(log.active_segment.log_path).read_bytes()
    [(_, _, stats)] = clean(store)
    after = records(log)
    cleaned_end = log.active_segment.base_offset
    cleanable = [r for r in before if r[0] < cleaned_end]
    last = {k: o for o, k, _ in cleanable}  # each key's latest offset in the cleanable part
    expected = [r for r in cleanable if last[r[1]] == r[0]] + before[len(cleanable) :]
    assert after == expected and len(after) < len(before)
    assert stats.records_kept == len(expected) - len(before[len(cleanable) :])
    assert Path(log.active_segment.log_path).read_bytes() == active  # never touched
    assert latest(log) == {b"k%d" % (i % 7): b"v%d" % i for i in range(193, 200)}
    assert kafka_decoded(log.dir) == after  # an independent decoder agrees
    for offset, _, value in before:  # offsets never change; cleaned ones are gone
        if (offset, _, value) in after:
            assert log.read(offset).value == value
        else:
            with pytest.raises(OffsetOutOfRangeError):
                log.read(offset)
    assert check(store.path) == []


def test_the_cleaned_groups_fit_segment_bytes_and_are_indexed(store):
    compacted(store, **{"index.interval.bytes": 64})
    log = store.log("c", 0)
    for i in range(600):
        put(log, b"key-%03d" % (i % 150), b"value-%d" % i)
    clean(store)
    assert all(s.size <= 1024 for s in log.segments)
    kept = records(log)
    store.close()
    with Store(store.path) as reopened:  # indexes load and point at the right batches
        log = reopened.log("c", 0)
        assert records(log) == kept
        for offset, _, value in kept:
            assert log.read(offset).value == value
    assert check(store.path) == []


def test_tombstones_stay_for_delete_retention_ms_then_go(store):
    compacted(store, **{"delete.retention.ms": 1000})
    log = store.log("c", 0)
    put(log, b"a", b"1", NOW)
    put(log, b"b", b"1", NOW)
    put(log, b"a", None, NOW)  # delete a
    for i in range(40):
        put(log, b"filler-%d" % i, b"x" * 40, NOW)
    clean(store, now=NOW + 500)  # younger than delete.retention.ms: kept
    assert [(k, v) for _, k, v in records(log) if k in (b"a", b"b")] == [(b"b", b"1"), (b"a", None)]
    clean(store, now=NOW + 1500)  # older: gone, and the value it deleted stays gone
    assert [(k, v) for _, k, v in records(log) if k in (b"a", b"b")] == [(b"b", b"1")]
    assert b"a" not in latest(log)


def test_min_compaction_lag_keeps_young_segments_dirty(store):
    compacted(store, **{"min.compaction.lag.ms": 60_000})
    log = store.log("c", 0)
    for i in range(100):
        put(log, b"k", b"%d" % i, NOW)
    assert clean(store, now=NOW + 1000) == []  # every segment younger than the lag
    assert len(records(log)) == 100
    [(_, _, stats)] = clean(store, now=NOW + 61_000)
    assert stats.records_kept == 1 and len(records(log)) < 100  # k's latest in that part


def test_dirty_ratio_and_max_compaction_lag_decide_when(store):
    compacted(store, **{"min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 10_000})
    log = store.log("c", 0)
    for i in range(100):
        put(log, b"k%d" % (i % 3), b"v", NOW)
    tp = ("c", 0)
    assert clean(store, now=NOW + 1000, force=False)  # all dirty: ratio 1.0 >= 0.99
    first_dirty = store.first_dirty(*tp)
    for i in range(30):  # more dirt, a segment or two, but below the ratio
        put(log, b"k%d" % (i % 3), b"w", NOW)
    assert clean(store, now=NOW + 1000, force=False) == []
    assert store.first_dirty(*tp) == first_dirty
    assert clean(store, now=NOW + 20_000, force=False)  # but past max.compaction.lag.ms
    text = (store.path / CLEANER_FILE).read_text().split("\n")
    assert text[:2] == ["0", "1"] and text[2] == f"c 0 {store.first_dirty(*tp)}"


def test_compressed_batches_are_cleaned_with_their_codec(store):
    compacted(store, **{"compression.type": "gzip"})
    log = store.log("c", 0)
    for i in range(0, 400, 4):
        log.append([b"v%d" % j for j in range(i, i + 4)], keys=[b"k%d" % (j % 5) for j in range(4)])
    clean(store)
    codecs = {h.codec for s in log.segments for _, h, _ in s.batches(0)}
    assert codecs == {1}  # gzip
    assert kafka_decoded(log.dir) == records(log)


def test_retention_applies_only_with_the_delete_policy(store):
    for policy, deletes in [("compact", False), ("compact,delete", True)]:
        name = policy.replace(",", "_")
        compacted(store, name, **{"cleanup.policy": policy, "retention.bytes": 2048})
        log = store.log(name, 0)
        for i in range(200):
            put(log, b"k%d" % i, b"v" * 30)
        assert (log.enforce_retention() > 0) == deletes


# ---------------------------------------------------------------- crashes


def scenario(data: Path, count: int = 400, segment_bytes: int = 1024) -> None:
    """A compacted log with duplicates and tombstones in many segments."""
    with Store(data) as store:
        compacted(store, **{"delete.retention.ms": 0, "segment.bytes": segment_bytes})
        log = store.log("c", 0)
        rng = random.Random(3)
        for i in range(count):
            key = b"k%d" % rng.randrange(30)
            put(log, key, None if i % 11 == 0 else b"v%d" % i, NOW)


def test_a_crash_at_each_step_leaves_the_log_before_or_after(tmp_path, monkeypatch):
    """Each rename, unlink and fsync of a cleaning fails in turn, as a crash
    there would stop it (all earlier steps done, none later); reopening must
    give each group of segments as it was before the cleaning or after it:
    the latest value of every key, nothing deleted back."""
    reference = tmp_path / "reference"
    scenario(reference, 120, 2048)  # four segments: three groups to clean
    with Store(reference) as store:
        before = records(store.log("c", 0))
        want = latest(store.log("c", 0))
        clean(store, now=NOW + 1)
        after = records(store.log("c", 0))
    assert before != after
    outcomes = set()
    step = 0
    while True:
        data = tmp_path / f"crash-{step}"
        scenario(data, 120, 2048)
        calls = [0]

        def crashing(name, real, step=step, calls=calls):
            def call(*args, **kwargs):
                calls[0] += 1
                if calls[0] == step + 1:
                    raise SystemExit(f"crash before {name} #{calls[0]}")
                return real(*args, **kwargs)

            return call

        store = Store(data)
        with monkeypatch.context() as m:
            for name in ("rename", "replace", "unlink", "fdatasync"):
                m.setattr(os, name, crashing(name, getattr(os, name)))
            try:
                clean(store, now=NOW + 1)
                crashed = False
            except SystemExit:
                crashed = True
        for fd in store._lock_fds:  # the process is gone: no flush, no close
            os.close(fd)
        store._lock_fds = ()
        with Store(data) as reopened:
            log = reopened.log("c", 0)
            got = records(log)
            # each group is swapped whole: what is left is before for some groups
            # and after for the others, so a subset of before holding all of after
            assert set(after) <= set(got) <= set(before), f"a crash at step {step}"
            assert got == sorted(got) and latest(log) == want
            outcomes.add("before" if got == before else "after" if got == after else "part")
        assert check(data) == []
        if not crashed:
            break
        step += 1
    assert step > 10  # every rename and unlink of three groups was a crash point
    assert outcomes == {"before", "part", "after"}


def test_sigkill_of_logfs_compact_at_random_moments(tmp_path):
    rng = random.Random(int(os.environ.get("LOGFS_STRESS_SEED", "5")))
    outcomes = set()
    for round_ in range(scale(4, 40)):
        data = tmp_path / f"r{round_}"
        scenario(data)
        with Store(data) as store:
            want = latest(store.log("c", 0))
        # ~30 KB to read and write at 10 KB/s: the cleaning takes ~3 s after a
        # start of ~0.2 s, so the kills land inside it, in any of its steps
        proc = subprocess.Popen(
            [sys.executable, "-m", "logfs.cli", "compact", str(data)]
            + ["--io-max-bytes-per-second", "10000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 2.8))
        proc.send_signal(signal.SIGKILL)
        outcomes.add(proc.wait())
        with Store(data) as store:
            assert latest(store.log("c", 0)) == want  # no key lost or brought back
        assert check(data) == []
    assert -signal.SIGKILL in outcomes  # killed mid-way (some rounds may finish first)


# ---------------------------------------------------------------- the property

KEYS = [b"a", b"b", b"c", b"d", b""]  # the empty key is a key


@settings(max_examples=scale(40, 400), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b"d", b""]), st.none() | st.binary(max_size=30)
        ),
        max_size=120,
    ),
    st.sampled_from([200, 1024, 1 << 20]),
)
def test_latest_values_match_a_dictionary_through_cleaning_and_reopening(
    tmp_path_factory, ops, seg
):
    data = tmp_path_factory.mktemp("prop") / "data"
    model: dict[bytes, bytes] = {}
    with Store(data) as store:
        compacted(store, **{"segment.bytes": seg})
        log = store.log("c", 0)
        for key, value in ops:
            put(log, key, value)
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        assert latest(log) == model
        clean(store, now=LATER)  # tombstones past delete.retention.ms go too
        assert latest(log) == model
    with Store(data) as store:
        assert latest(store.log("c", 0)) == model
    assert check(data) == []


def test_cleaned_batches_keep_headers_timestamps_and_time_lookups(store):
    for kind in ("CreateTime", "LogAppendTime"):
        name = f"c-{kind}"
        compacted(store, name, **{"message.timestamp.type": kind})
        log = store.log(name, 0)
        for i in range(120):
            log.append(
                [b"v%d" % i, b"w%d" % i],
                keys=[b"k%d" % (i % 4), b"u%d" % i],  # k* repeat, u* are unique
                headers=[[("n", b"%d" % i)], []],
                timestamp=[NOW + 10 * i, NOW + 10 * i + 5] if kind == "CreateTime" else None,
            )
        before = {r.offset: r for r in log.scan()}
        clean(store, now=NOW + 10_000 if kind == "CreateTime" else None)
        after = list(log.scan())
        assert len(after) < len(before)
        for record in after:  # every field of a kept record is as it was
            assert record == before[record.offset]
        for ts in (NOW + 3, NOW + 600, NOW + 1001):
            want = min((r.offset for r in after if r.timestamp >= ts), default=None)
            if kind == "CreateTime":
                assert log.offset_for_time(ts) == want
        assert kafka_decoded(log.dir) == [(r.offset, r.key, r.value) for r in after]


@settings(max_examples=scale(60, 600), deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=3000))
def test_the_offset_map_knows_every_key_it_was_given(keys):
    """The compiled map (128-bit key hashes, open addressing, growing) holds
    exactly the keys mapped, whatever their lengths (the hash's 16-byte
    blocks and tails) and however many (it grows past its first 4096 slots)."""
    batch = encode_batch(0, [b"v"] * len(keys), keys=keys)
    header = read_header(batch)
    latest = OffsetMap()
    assert latest.map(records_section(batch, header), len(keys), 0, 0) == -1
    assert len(latest) == len(set(keys))
    assert all(latest.contains(k) for k in keys)
    assert not any(latest.contains(k + b"\xff") for k in keys if k + b"\xff" not in keys)


def test_from_a_gap_before_the_first_segment(store):
    """A compacted log whose first segments were cleaned away starts with a
    gap: the stream from any offset in it is the records after it."""
    from logfs.core.log.lines import FromStream

    compacted(store)
    log = store.log("c", 0)
    for i in range(200):
        put(log, b"k%d" % (i % 3), b"v%d" % i)
    clean(store)
    first = log.segments[0].base_offset
    assert first > 0 and log.log_start_offset == 0
    for start in (0, first - 1, first):
        stream = FromStream(log, start)
        data, _ = stream.lines(start, 1 << 20)
        want = b"".join((r.value or b"") + b"\n" for r in log.scan() if r.offset >= start)
        assert stream.size() == len(want) and bytes(data) == want[: len(data)]


# ---------------------------------------------------------------- a swap that does not happen


def dirty_log(store: Store, key: bytes = b"k"):
    log = store.log("c", 0)
    for i in range(300):
        put(log, key + b"%d" % (i % 10), b"v%d" % i)
    return log


def test_a_given_up_swap_leaves_first_dirty_and_the_segments_as_they_were(store):
    compacted(store)
    dirty_log(store)
    assert clean(store)
    first_dirty = store.first_dirty("c", 0)
    log = dirty_log(store, b"j")  # the first group keeps its k records
    segments, kept = list(log.segments), records(log)
    log.flush()  # so that what is read below stays readable once offline
    steps = cleaner.cleaning(store, log, int(time.time() * 1000) + 1000, force=True)
    mapped = steps.send(None)()  # the offset map
    cleaned = steps.send(mapped)()  # the first group, written aside
    assert cleaned is not None and os.path.exists(cleaned.log_path)
    # the partition goes offline before the swap: it is given up
    log.fail("a write", OSError(errno.EIO, "Input/output error"))
    with pytest.raises(StopIteration) as done:
        steps.send(cleaned)
    assert done.value.value is None
    assert store.first_dirty("c", 0) == first_dirty > 0
    assert log.segments == segments and records(log) == kept
    assert not [name for name in os.listdir(log.dir) if name.endswith(".cleaned")]
    store.checkpoint()
    text = (store.path / CLEANER_FILE).read_text().split("\n")
    assert text[2] == f"c 0 {first_dirty}"


def test_a_failed_swap_leaves_first_dirty_and_takes_the_partition_offline(store, monkeypatch):
    compacted(store)
    dirty_log(store)
    assert clean(store)
    first_dirty = store.first_dirty("c", 0)
    log = dirty_log(store, b"j")  # the first group keeps its k records

    real_rename = os.rename

    def rename(src, dst):  # fails where a file is there to rename
        real_rename(src, src)  # FileNotFoundError for a missing one, as the real one
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="Input/output error"):
        clean(store)
    assert store.first_dirty("c", 0) == first_dirty > 0
    assert log.failure == "swapping in a cleaned segment failed: EIO (Input/output error)"


def test_the_mounts_cleaner_runs_the_same_driver(store):
    compacted(store)
    log = dirty_log(store)
    background = Cleaner(store, now_ms=lambda: int(time.time() * 1000) + 1000)
    assert trio.run(background.clean_log, log) is True
    first_dirty = store.first_dirty("c", 0)
    assert first_dirty == log.segments[-1].base_offset and background.cleanings == 1
    assert latest(log) == {b"k%d" % k: b"v%d" % (290 + k) for k in range(10)}
    assert trio.run(background.clean_log, log) is False  # nothing dirty any more
