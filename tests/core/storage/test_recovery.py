"""Recovery after an unclean shutdown: exactly the valid prefix survives."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logfs import Store
from logfs.core.errors import CorruptRecordError
from logfs.core.format.record import CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, read_header
from logfs.core.log.store import RECOVERY_POINT_FILE
from logfs.core.storage.logfile import base_offset_of, iter_batches, read_region, segment_name

CONFIG = {"segment.bytes": "3000", "index.interval.bytes": "200"}


def fill(path, batches):
    with Store(path) as store:
        store.create_topic("t", 1, CONFIG)
        log = store.log("t", 0)
        for i in range(batches):
            log.append([b"rec-%d-%d" % (i, j) for j in range(i % 5 + 1)])
        return [r.value for r in log.scan()]


def layout(partition_dir):
    """(segment path, [(position, size, base offset, next offset)]) in order."""
    out = []
    for name in sorted(os.listdir(partition_dir)):
        if name.endswith(".log"):
            data = (partition_dir / name).read_bytes()
            batches, pos = [], 0
            while pos < len(data):
                h = read_header(data, pos)
                batches.append((pos, h.size, h.base_offset, h.next_offset))
                pos += h.size
            out.append((partition_dir / name, batches))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(10, 60), st.data())
def test_garbage_anywhere_keeps_exactly_the_valid_prefix(tmp_path_factory, batches, data):
    path = tmp_path_factory.mktemp("d")
    values = fill(path, batches)
    segments = layout(path / "t-0")
    seg_index = data.draw(st.integers(0, len(segments) - 1), label="segment")
    seg_path, seg_batches = segments[seg_index]
    pos, size, base, _ = data.draw(st.sampled_from(seg_batches), label="batch")
    # Anything the CRC or the framing covers: the length, magic, crc and attributes..end.
    # (Like Kafka's, the CRC does not cover the base offset or the leader epoch.)
    where = pos + data.draw(
        st.sampled_from([*range(LOG_OVERHEAD - 4, LOG_OVERHEAD), *range(16, size)]), label="byte"
    )
    blob = bytearray(seg_path.read_bytes())
    blob[where] ^= data.draw(st.integers(1, 255), label="xor")
    seg_path.write_bytes(bytes(blob))
    (path / RECOVERY_POINT_FILE).unlink()  # as if nothing had been flushed
    with Store(path) as store:
        log = store.log("t", 0)
        assert [r.value for r in log.scan()] == values[:base]
        assert log.next_offset == base
        # later segments are gone, the log takes appends again
        assert all(s.base_offset <= base for s in log.segments)
        log.append([b"after"])
        assert log.read(base).value == b"after"
    with Store(path, read_only=True) as store:
        assert [r.value for r in store.log("t", 0).scan()] == values[:base] + [b"after"]


@settings(max_examples=20, deadline=None)
@given(st.integers(5, 40), st.integers(1, 200), st.booleans())
def test_torn_or_zero_filled_tail_is_cut(tmp_path_factory, batches, cut, zeros):
    """A torn last batch is cut. A read-only reader sees the log end there; a writer
    keeps the offsets handed out (the closed store's recovery point): the cut
    records are a gap at the log's end that reads as damage, and appends go on
    above it."""
    path = tmp_path_factory.mktemp("d")
    values = fill(path, batches)
    seg_path, seg_batches = layout(path / "t-0")[-1]
    data = seg_path.read_bytes()
    last_pos, last_size, last_base, _ = seg_batches[-1]
    if zeros:
        seg_path.write_bytes(data + bytes(cut))  # preallocated / zero-filled tail
        kept = len(values)
    else:
        seg_path.write_bytes(data[: last_pos + max(0, last_size - cut)])  # torn final write
        kept = last_base
    with Store(path, read_only=True) as store:
        log = store.log("t", 0)
        assert [r.value for r in log.scan()] == values[:kept]
        assert log.next_offset == kept
    with Store(path) as store:
        log = store.log("t", 0)
        assert log.next_offset == len(values)
        assert [r.value for r in log.scan(0, kept)] == values[:kept]
        for offset in range(kept, len(values)):
            with pytest.raises(CorruptRecordError, match=f"t-0 at offset {offset}"):
                log.read(offset)
        if kept < len(values):
            with pytest.raises(CorruptRecordError, match=f"t-0 at offset {kept}"):
                list(log.scan())
        assert log.append([b"after"]) == len(values)


def test_corrupt_crc_is_detected_without_checkpoint_loss(tmp_path):
    values = fill(tmp_path, 30)
    seg_path, seg_batches = layout(tmp_path / "t-0")[0]
    pos, _, base, _ = seg_batches[2]
    blob = bytearray(seg_path.read_bytes())
    blob[pos + CRC_OFFSET] ^= 0xFF
    seg_path.write_bytes(bytes(blob))
    (tmp_path / RECOVERY_POINT_FILE).write_text("garbled\n")
    with Store(tmp_path) as store:
        assert [r.value for r in store.log("t", 0).scan()] == values[:base]


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path):
    values = fill(tmp_path, 60)
    part = tmp_path / "t-0"
    index_files = sorted(part.glob("*.index"))
    assert any(p.stat().st_size for p in index_files)
    good = {p: p.read_bytes() for p in index_files}
    index_files[0].unlink()
    index_files[1].write_bytes(b"\xff" * 13)
    (part / sorted(p.name for p in part.glob("*.timeindex"))[0]).write_bytes(b"\x00\x01" * 6)
    with Store(tmp_path) as store:
        log = store.log("t", 0)
        assert [log.read(o).value for o in range(len(values))] == values
    assert {p: p.read_bytes() for p in index_files} == good


def walk_both_ways(fd, size, chunk):
    """(position, size, base offset, next offset) of each batch, walked batch by
    batch and region by region; both walks must agree."""
    walked = [
        (p, h.size, h.base_offset, h.next_offset)
        for p, h, _ in iter_batches(fd, 0, size, chunk=chunk)
    ]
    regions, position = [], 0
    while position < size:
        data, offsets, headers = read_region(fd, position, size, chunk)
        regions += [
            (position + o, h.size, h.base_offset, h.next_offset)
            for o, h in zip(offsets, headers, strict=True)
        ]
        position += offsets[-1] + headers[-1].size
    assert regions == walked
    return walked


@settings(max_examples=30, deadline=None)
@given(st.integers(5, 40), st.integers(HEADER_SIZE, 600))
def test_the_walker_finds_every_batch_whatever_its_chunk(tmp_path_factory, batches, chunk):
    path = tmp_path_factory.mktemp("d")
    fill(path, batches)
    for seg_path, expected in layout(path / "t-0"):
        with open(seg_path, "rb") as f:
            assert walk_both_ways(f.fileno(), seg_path.stat().st_size, chunk) == expected


@settings(max_examples=30, deadline=None)
@given(st.integers(5, 40), st.integers(HEADER_SIZE, 600), st.booleans(), st.data())
def test_the_walker_stops_at_the_first_bad_batch(tmp_path_factory, batches, chunk, cut, data):
    path = tmp_path_factory.mktemp("d")
    fill(path, batches)
    seg_path, seg_batches = layout(path / "t-0")[0]
    i = data.draw(st.integers(0, len(seg_batches) - 1), label="batch")
    pos, size, _, _ = seg_batches[i]
    blob = bytearray(seg_path.read_bytes())
    if cut:
        del blob[pos + data.draw(st.integers(1, size - 1), label="cut") :]  # inside it
    else:
        blob[pos + CRC_OFFSET] ^= 0xFF
    seg_path.write_bytes(bytes(blob))
    with open(seg_path, "rb") as f:
        walked = []
        with pytest.raises(CorruptRecordError) as e:
            for position, _, _ in iter_batches(f.fileno(), 0, len(blob), chunk=chunk, path="x"):
                walked.append(position)
        assert e.value.args[1] == pos and e.value.args[0].startswith("x: ")
        assert walked == [p for p, _, _, _ in seg_batches[:i]]
        with pytest.raises(CorruptRecordError):
            read_region(f.fileno(), pos, len(blob), chunk)


@pytest.mark.parametrize(
    "name, suffix, base",
    [
        ("00000000000000368769.log", ".log", 368769),
        ("00000000000000368769.timeindex", None, 368769),
        ("00000000000000368769.index", ".log", None),
        ("00000000000000368769.log.deleted", ".log", None),  # not loaded, not checked
        ("0000000000000036876.log", ".log", None),
        ("000000000000003687690.log", ".log", None),
        ("0000000000000036876x.log", None, None),
        ("0000000000000036876\u0661.log", None, None),  # a digit, but not an ASCII one
        ("00000000000000368769", None, None),
    ],
)
def test_segment_file_names(name, suffix, base):
    assert base_offset_of(name, suffix) == base
    if base is not None:
        assert segment_name(base, name[20:]) == name


WRITER = textwrap.dedent(
    """
    import sys
    from logfs import Store
    store = Store(sys.argv[1])
    if "t" not in store.topics():
        store.create_topic("t", 1, {"segment.bytes": "20000", "flush.messages": "1000000"})
    log = store.log("t", 0)
    n = int(sys.argv[2])
    while True:
        values = [b"%d" % (n + i) for i in range(n % 7 + 1)]
        log.append(values)
        n += len(values)
        sys.stdout.write(f"{n}\\n")
        sys.stdout.flush()
    """
)


def test_kill_9_mid_append_loses_nothing_acknowledged(tmp_path):
    """A writer process appends and acknowledges; SIGKILL it at random moments."""
    import random

    rng = random.Random(1)
    acked = 0
    for _cycle in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(acked)], stdout=subprocess.PIPE
        )
        lines = 0
        target = rng.randrange(50, 3000)
        while lines < target:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
            lines += 1
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read().split()  # acknowledged before the kill landed
        if rest:
            acked = int(rest[-1])
        proc.stdout.close()
        proc.wait()
        with Store(tmp_path) as store:
            log = store.log("t", 0)
            values = [int(r.value) for r in log.scan()]
            # every acknowledged record is there, once, in order; nothing torn
            assert values[:acked] == list(range(acked))
            assert values == list(range(len(values)))
            # the next writer continues from the log end
            acked = log.next_offset
