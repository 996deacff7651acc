"""The log's one-line fast path (core/log/_line.pyx, `Log.append_line`) against
the general path (`Log.append`): the same bytes in every file, the same state
in memory, batches an independent codec reads, and every case it must leave to
the general path declined. The mount's use of it is tested in
mount/test_line_writers.py."""

from __future__ import annotations

import random

import crc32c
from kafka.record import MemoryRecords

from logfs.core.config import TopicConfig
from logfs.core.log import Log
from logfs.core.log._line import crc32c_of
from logfs.core.storage import DESCRIPTORS


def log_state(log: Log) -> dict:
    """What a log shows of its segments after appends, by public names only: the
    line path must leave what `Log.append` leaves (sizes, offsets, timestamps,
    index entries still in memory, stream marks, what the next flush syncs)."""
    segments = [
        {
            "base": s.base_offset,
            "size": s.size,
            "next": s.next_offset,
            "timestamps": (s.max_timestamp, s.tail.offset_of_max, s.first_timestamp),
            "since_index_entry": s.tail.bytes_since_index_entry,
            "offset_index": [s.offset_index.entry(i) for i in range(len(s.offset_index))],
            "time_index": [s.time_index.entry(i) for i in range(len(s.time_index))],
            "stream": (s.stream.size, s.stream.marks()),
        }
        for s in log.segments
    ]
    ticket = log.prepare_flush()  # what the next flush syncs, and how many records
    flush = (sorted(ticket.segments), ticket.messages, ticket.next_offset)
    ticket.sync()
    log.complete_flush(ticket)
    return {"segments": segments, "flush": flush, "next_offset": log.next_offset}


def test_fast_path_writes_what_the_general_path_writes(tmp_path):
    """The line path and Log.append leave byte-identical segments, indexes and
    time indexes, and the same state in memory, across rolls and index
    entries (a fixed clock): the books are kept by the same owners."""
    config = TopicConfig.from_properties({"segment.bytes": "4096", "index.interval.bytes": "300"})
    rng = random.Random(3)
    values = [bytes([97 + i % 26]) * rng.randrange(0, 400) for i in range(600)]
    values += [b"long " * 3000]  # a record length of three varint bytes
    logs, states = [], []
    for name, fast in (("general", False), ("fast", True)):
        log = Log(tmp_path / name / "t-0", "t", 0, config, clock=lambda: 1_700_000_000_000)
        taken = 0
        for value in values:
            if not fast or log.append_line(value) is None:
                log.append([value])
            else:
                taken += 1
        if fast:
            assert taken > len(values) * 0.9  # the fast path took nearly all
        states.append(log_state(log))
        log.close()
        logs.append(tmp_path / name / "t-0")
    assert states[0] == states[1]
    first = states[0]["segments"][0]
    assert first["stream"][0] > 0 and first["offset_index"]  # counted and indexed
    assert states[0]["flush"][1] == len(values)
    general, fast = (sorted(p.iterdir()) for p in logs)
    assert [p.name for p in general] == [p.name for p in fast]
    assert len(general) > 6  # several segments: the rolls went the general way
    for a, b in zip(general, fast, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_fast_path_batches_decode_with_kafka_python(tmp_path):
    """The fast path's batches, read by an independent codec."""
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig.from_properties({}))
    values = [b"", b"x", b"line " * 30, b"y" * 20000]
    for value in values:
        assert log.append_line(value) is not None
    log.flush()
    records = MemoryRecords((tmp_path / "t-0" / "00000000000000000000.log").read_bytes())
    got = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
        got += [(r.offset, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(i, None, v, []) for i, v in enumerate(values)]
    log.close()


def test_the_compiled_crc32c_is_the_crc32c_packages():
    """Batches are checksummed in C (format/crc32c.h): with the processor's
    instruction where it has one and with the table elsewhere, each the package's
    CRC-32C, also when it extends the CRC of what came before (the batch's pieces).
    The sizes reach each path of the instruction's: eight bytes at a time, and three
    short (256-byte) or long (8 KiB) blocks side by side, joined, with what is left
    over on either side of their thresholds (768 and 24,576 bytes)."""
    rng = random.Random(5)
    sizes = [0, 1, 7, 8, 9, 15, 16, 17, 61, 100, 767, 768, 769, 775, 4095, 4096]
    sizes += [24575, 24576, 24577, 24583, 49152 + 767, 65537, (1 << 20) + 3]
    for size in sizes:
        data = rng.randbytes(size)
        for before in (0, 1, 0xFFFFFFFF, rng.getrandbits(32)):
            want = crc32c.crc32c(data, value=before)
            assert crc32c_of(data, before) == want, (size, before)
            assert crc32c_of(data, before, portable=True) == want, (size, before)
    assert crc32c_of(b"123456789") == 0xE3069283  # CRC-32C's check value


def test_fast_path_declines_what_it_cannot_do(tmp_path):
    config = TopicConfig.from_properties({"max.message.bytes": "1000"})
    log = Log(tmp_path / "t-0", "t", 0, config)
    assert log.append_line(b"first") == 0
    assert log.append_line(b"x" * 2000) is None  # over the limit: the general path refuses
    assert log.append_line(b"second") == 1
    assert [r.value for r in log.scan()] == [b"first", b"second"]
    log.fail("a test", OSError(5, "EIO"))
    assert log.append_line(b"third") is None  # offline: the general path raises
    compact = TopicConfig.from_properties({"cleanup.policy": "compact"})
    keyed = Log(tmp_path / "c-0", "c", 0, compact)
    keyed.append([b"v"], keys=[b"k"])
    assert keyed.append_line(b"no key") is None
    log.close()
    keyed.close()


def test_fast_path_follows_each_config_change(tmp_path):
    """What the config decides is worked out once per config: each change counts at once."""
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig())
    assert log.append_line(b"a" * 500) == 0
    log.set_config(TopicConfig.from_properties({"max.message.bytes": "300"}))
    assert log.append_line(b"a" * 500) is None
    assert log.append_line(b"short") == 1
    log.set_config(TopicConfig.from_properties({"compression.type": "gzip"}))
    assert log.append_line(b"short") is None
    log.set_config(TopicConfig.from_properties({"flush.messages": "4"}))
    assert log.unflushed_messages == 2
    assert log.append_line(b"third") == 2
    assert log.append_line(b"fourth") is None  # its write() would wait for the fsync
    log.flush()
    assert log.append_line(b"fourth") == 3
    log.set_config(TopicConfig.from_properties({"message.timestamp.type": "LogAppendTime"}))
    assert log.append_line(b"fifth") == 4
    log.flush()
    records = MemoryRecords((tmp_path / "t-0" / "00000000000000000000.log").read_bytes())
    timestamp_types = []
    while records.has_next():
        timestamp_types.append(records.next_batch().timestamp_type)
    assert timestamp_types == [0, 0, 0, 0, 1]
    log.close()


def without_times(state: dict) -> dict:
    """`log_state` without what the clock decides (two logs on the real clock)."""
    for segment in state["segments"]:
        del segment["timestamps"], segment["time_index"]
    return state


def test_a_row_of_lines_writes_what_lines_one_at_a_time_write(tmp_path, monkeypatch):
    """`Log.write_next_line` (a row's next line, through what the row's first found)
    leaves what `write_line` leaves, across rolls, index entries, a line declined
    and a segment's file closed by the descriptor budget in the middle of a row;
    an independent codec reads every batch."""
    config = TopicConfig.from_properties({"segment.bytes": "4096", "index.interval.bytes": "300"})
    rng = random.Random(5)
    values = [bytes([97 + i % 26]) * rng.randrange(0, 400) for i in range(600)]
    values[250] = b"long " * 20000  # past the fast path's limit: declined, the row starts over
    states, files = [], []
    for name in ("one at a time", "in a row"):
        log = Log(tmp_path / name / "t-0", "t", 0, config)  # the real clock: rows are held
        other = Log(tmp_path / name / "u-0", "u", 0, config)
        write = log.write_next_line if name == "in a row" else log.write_line
        reused, previous = 0, None
        for i, value in enumerate(values):
            if i == 400:  # the budget closes the active segment's file: reopened, not written blind
                closed = DESCRIPTORS.closed
                monkeypatch.setattr(DESCRIPTORS, "limit", 1)
                other.append([b"x"])
                other.roll()  # a new segment opens its files
                assert DESCRIPTORS.closed > closed
                monkeypatch.undo()
            line = write(value, len(value))
            if line is None:
                log.append([value])  # the general path: a roll, or a line too long
                continue
            line.finish()
            reused += line is previous
            previous = line
        # A row's next lines come back in the `LineWrite` of its first.
        assert reused > len(values) * 0.8 if name == "in a row" else reused == 0
        states.append(without_times(log_state(log)))
        files.append(sorted((tmp_path / name / "t-0").glob("*.log")))
        log.close()
        other.close()
    assert states[0] == states[1]
    assert len(files[1]) > 6  # several segments: rows ended at the rolls
    got = []
    for segment in files[1]:
        records = MemoryRecords(segment.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            got += [(r.offset, r.value) for r in batch]
    assert got == list(enumerate(values))
