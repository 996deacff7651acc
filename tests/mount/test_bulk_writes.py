"""Writes of many records to append files, taken as the daemon receives them
(logfs/mount/fuse/_lines.pyx, `LineWrites.bulk`): lines cut anywhere by the
writes, ``append.bin`` frames and ``append.batches`` batches (built by
kafka-python's encoder) are framed and appended from the request's own bytes and
answered before pyfuse3 sees the request. libfuse's debug trace shows no WRITE
for them; what they append is what the general path appends, errors included,
and a write() that flush.messages makes wait for an fsync still goes the
general way."""

from __future__ import annotations

import errno
import json
import os
import random

import pytest
from mount_helpers import Daemon
from txn_helpers import decoded, producer_batch

from logfs.mount.files.framing import frame

pytestmark = [pytest.mark.timeout(300)]

KEPT = "kept beyond its append"  # _lines.pyx: the request's bytes still referenced


def pieces(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` cut at random: pieces of 1 byte to 300 KB, most large."""
    out, pos = [], 0
    while pos < len(data):
        size = rng.choice([1, 7, 100, 4096, 65536, 131072, 300_000])
        out.append(data[pos : pos + size])
        pos += size
    return out


def write_all(path, chunks, flags=os.O_WRONLY | os.O_APPEND) -> bytes:
    """Each chunk in one write(); what reading the file back gives (receipts)."""
    fd = os.open(path, flags)
    try:
        for chunk in chunks:
            assert os.write(fd, chunk) == len(chunk)
        if flags & os.O_ACCMODE == os.O_RDWR:
            return os.read(fd, 1 << 20)
        return b""
    finally:
        os.close(fd)


def trace_after(log, before: int) -> str:
    return log.read_text(errors="replace")[before:]


def test_lines_cut_anywhere_are_taken_whole_once_in_order(tmp_path):
    """Lines written in pieces that cut them anywhere (a piece without a newline,
    a partial line carried over many writes) are appended once, in order, with
    their receipts; none of the writes reaches pyfuse3."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    rng = random.Random(7)
    lines = [b"line %d %s\n" % (i, b"x" * rng.randrange(200)) for i in range(40_000)]
    text = b"".join(lines) + b"unterminated"
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("segment.bytes=1000000\n")
        before = len(log.read_text(errors="replace"))
        receipts = write_all(mnt / "t" / "0" / "append", pieces(text, rng), os.O_RDWR | os.O_APPEND)
        trace = trace_after(log, before)
        stream = (mnt / "t" / "0" / "stream").read_bytes()
        assert stream == b"".join(lines) + b"unterminated\n"  # the close made it a record
        assert (mnt / "t" / "0" / "offset" / "39999").read_bytes() == lines[-1][:-1]
        state = json.loads((mnt / "t" / "0" / "state").read_text())
        assert state["next_offset"] == 40_001 and state["segments"] > 3
        spans = [tuple(map(int, r.split())) for r in receipts.decode().splitlines()]
        assert spans[0][1] == 0 and spans[-1][2] == 39_999
        assert all(a[2] + 1 == b[1] for a, b in zip(spans, spans[1:], strict=False))
        assert "opcode: WRITE " not in trace, trace[-2000:]
    assert KEPT not in log.read_text(errors="replace")


def test_lines_the_line_path_leaves_are_taken_by_the_general_framing(tmp_path):
    """A one-line write() the line's path leaves (it ends a partial line, its topic
    parses keys) is framed and appended where the daemon receives it too."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "t").mkdir()
        (mnt / "k").mkdir()
        (mnt / "k" / "config").write_text("parse.key=true\n")
        before = len(log.read_text(errors="replace"))
        write_all(mnt / "t" / "0" / "append", [b"par", b"tial\n", b"whole\n"])
        write_all(mnt / "k" / "0" / "append", [b"key\tvalue\n", b"other\tthing\n"])
        trace = trace_after(log, before)
        assert (mnt / "t" / "0" / "stream").read_bytes() == b"partial\nwhole\n"
        assert (mnt / "k" / "0" / "offset" / "1").read_bytes() == b"thing"
        assert os.getxattr(mnt / "k" / "0" / "offset" / "1", "user.logfs.key") == b"other"
        assert "opcode: WRITE " not in trace, trace[-2000:]
    assert KEPT not in log.read_text(errors="replace")


def test_frames_and_batches_are_taken_where_the_request_holds_them(tmp_path):
    """``append.bin`` frames and kafka-python's batches, a frame and a batch cut
    over writes, keyed batches into a compacted topic whose keys are watched:
    appended as written, read back by kafka-python's decoder; no WRITE reaches
    pyfuse3."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    rng = random.Random(11)
    values = [b"value %d %s" % (i, b"\n" * (i % 3)) for i in range(20_000)]
    frames = b"".join(frame(v) for v in values)
    keys = [b"k%d" % (i % 97) for i in range(len(values))]
    batches = [
        producer_batch(values[i : i + 50], -1, -1, -1, keys=keys[i : i + 50])
        for i in range(0, len(values), 50)
    ]
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "t").mkdir()
        (mnt / "c").mkdir()
        (mnt / "c" / "config").write_text("cleanup.policy=compact\n")
        assert os.listdir(mnt / "c" / "keys") == []  # the mount keeps the live keys now
        before = len(log.read_text(errors="replace"))
        write_all(mnt / "t" / "0" / "append.bin", pieces(frames, rng))
        write_all(mnt / "c" / "0" / "append.batches", pieces(b"".join(batches), rng))
        trace = trace_after(log, before)
        for i in (0, 1, 2, 19_999):
            assert (mnt / "t" / "0" / "offset" / str(i)).read_bytes() == values[i]
        segment = next((data / "c-0").glob("*.log")).read_bytes()
        records = [r for _, rs in decoded(segment) for r in rs]
        assert [r.value for r in records] == values
        assert [r.offset for r in records] == list(range(len(values)))
        assert len(os.listdir(mnt / "c" / "keys")) == 97
        assert "opcode: WRITE " not in trace, trace[-2000:]
    assert KEPT not in log.read_text(errors="replace")


def test_refused_writes_append_nothing_and_the_next_ones_go_on(tmp_path):
    """A write with a line over max.message.bytes (EMSGSIZE) and one with a
    corrupt batch (its CRC) append nothing from their write; the writes after
    them are taken."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    good = b"".join(b"good %d\n" % i for i in range(1000))
    batch = bytearray(producer_batch([b"v%d" % i for i in range(100)], -1, -1, -1))
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("max.message.bytes=1000\n")
        fd = os.open(mnt / "t" / "0" / "append", os.O_WRONLY)
        with pytest.raises(OSError) as refused:
            os.write(fd, good + b"x" * 2000 + b"\n" + good)
        assert refused.value.errno == errno.EMSGSIZE
        assert os.write(fd, good) == len(good)
        os.close(fd)
        assert (mnt / "t" / "0" / "stream").read_bytes() == good
        batch[-1] ^= 1  # a record's byte: the CRC no longer holds
        (mnt / "b").mkdir()
        fd = os.open(mnt / "b" / "0" / "append.batches", os.O_WRONLY)
        with pytest.raises(OSError):
            os.write(fd, bytes(batch) * 50)
        batch[-1] ^= 1
        assert os.write(fd, bytes(batch) * 50) == len(batch) * 50
        os.close(fd)
        state = json.loads((mnt / "b" / "0" / "state").read_text())
        assert state["next_offset"] == 5000
    assert KEPT not in log.read_text(errors="replace")


def test_a_write_that_waits_for_flush_messages_goes_the_general_way(tmp_path):
    """With flush.messages, a write() that reaches it returns once its records
    are durable: that write goes to pyfuse3 (a WRITE in the trace), which waits
    for the fsync; its records are there."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    text = b"".join(b"durable %d\n" % i for i in range(5000))
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("flush.messages=1000\n")
        before = len(log.read_text(errors="replace"))
        write_all(mnt / "t" / "0" / "append", [text])
        trace = trace_after(log, before)
        assert trace.count("opcode: WRITE ") == 1, trace[-2000:]
        assert (mnt / "t" / "0" / "stream").read_bytes() == text
        state = json.loads((mnt / "t" / "0" / "state").read_text())
        assert state["unflushed_messages"] == 0, state
