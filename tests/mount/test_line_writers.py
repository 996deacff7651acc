"""Writers that write a line at a time, in both modes (docs/mount.md, "Writers
that write a line at a time"): one-line write()s taken before pyfuse3, and the
buffered mode (``-o acks=0``) through a real mount — lines whole and once under
concurrent writers, lines that straddle pages, fsync in the middle, reopen and
remount, errors at close, ``tail -f``, receipts. The log's one-line fast path
is tested against the general path in core/log/test_fast_path.py, a real nginx
logging every request in each mode in system/test_services.py."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import kafka_helpers
import pytest
import trio
from kio.index import load_request_schema
from mount_helpers import Daemon

from logfs import Store
from logfs.mount import Operations
from logfs.mount.tree.nodes import lines as line_framer

pytestmark = [pytest.mark.timeout(300)]

WRITER = r"""
import os, random, sys
path, tag = sys.argv[1], sys.argv[2]
count, seed, sync_at = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
for i in range(count):
    # lengths from a few bytes to over two pages: lines straddle page boundaries
    size = rng.choice((1, 10, 100, 1000, 4000, 5000, 9000))
    unit = b"%s-%d-" % (tag.encode(), i)
    body = unit * (size // len(unit) + 1)
    os.write(fd, b"%s %d %s\n" % (tag.encode(), i, body[:size]))
    if i == sync_at:
        os.fsync(fd)
        print(i, flush=True)
os.close(fd)
"""


def line_of(tag: str, i: int, size: int) -> bytes:
    unit = b"%s-%d-" % (tag.encode(), i)
    body = unit * (size // len(unit) + 1)
    return b"%s %d %s" % (tag.encode(), i, body[:size])


def check_writers(lines: list[bytes], tags: list[str], counts: dict[str, int]) -> None:
    """Every writer's lines whole, once, in its order."""
    seen: dict[str, list[int]] = {tag: [] for tag in tags}
    for line in lines:
        tag, i, body = line.split(b" ", 2)
        tag = tag.decode()
        seq = int(i)
        assert line == line_of(tag, seq, len(body)), f"torn or foreign line {line[:80]!r}"
        seen[tag].append(seq)
    for tag in tags:
        assert seen[tag] == list(range(counts[tag])), f"{tag}: lines missing, repeated or reordered"


def buffered_open(ops: Operations):
    """An O_WRONLY open of t/0/append in the buffered mode, in process."""
    framer = line_framer(ops.store.topic_config("t"))
    return ops.buffered.open(ops.view, ("t", "0", "append"), "t", 0, framer, os.O_WRONLY)


@pytest.fixture
def buffered(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "acks=0", log=tmp_path / "daemon.log") as daemon:
        (mnt / "t").mkdir()
        yield daemon


def test_buffered_concurrent_writers_whole_once_in_order(buffered):
    """Four writers on one append file, lines from 1 byte to over two pages;
    one fsyncs in the middle: its lines up to then are in the log at once."""
    mnt = buffered.mountpoint
    target = mnt / "t" / "0" / "append"
    counts = {f"w{w}": 400 for w in range(4)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(target),
                tag,
                str(n),
                str(w),
                "150" if w == 0 else "-1",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w, (tag, n) in enumerate(counts.items())
    ]
    synced = procs[0].stdout.readline()
    assert synced.strip() == "150"
    visible = [line for line in (mnt / "t" / "0" / "stream").read_bytes().split(b"\n") if line]
    mine = [int(line.split(b" ")[1]) for line in visible if line.startswith(b"w0 ")]
    assert mine[:151] == list(range(151))  # fsync returned: they are in the log
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    lines = (mnt / "t" / "0" / "stream").read_bytes().split(b"\n")
    assert lines[-1] == b""
    check_writers(lines[:-1], list(counts), counts)


def test_buffered_reopen_and_remount_continue_the_stream(tmp_path):
    """The kernel's offsets continue across opens of the file; a remount starts
    them again: every line once, partial pages resent or not."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    expected = []
    for mount in range(2):
        with Daemon(data, mnt, "acks=0", log=tmp_path / "daemon.log"):
            if mount == 0:
                (mnt / "t").mkdir()
            for round_ in range(30):
                with open(mnt / "t" / "0" / "append", "ab", buffering=0) as f:
                    for i in range(round_ % 4 + 1):
                        line = b"m%d r%d i%d " % (mount, round_, i) + b"y" * (round_ * 97 % 700)
                        f.write(line + b"\n")
                        expected.append(line)
                if round_ == 10:  # `>` truncates the kernel's idea of the file
                    with open(mnt / "t" / "0" / "append", "wb", buffering=0) as f:
                        f.write(b"truncated %d\n" % mount)
                    expected.append(b"truncated %d" % mount)
            got = (mnt / "t" / "0" / "stream").read_bytes().split(b"\n")[:-1]
            assert got == expected
    with Daemon(data, mnt):  # the default mode reads the same log
        assert (mnt / "t" / "0" / "stream").read_bytes().split(b"\n")[:-1] == expected


def test_buffered_writes_cost_no_round_trip_each(tmp_path):
    """With handle_killpriv_v2 asked at mount (logfs/mount/fuse/fuseinit.py) the kernel
    takes a buffered write() with no request to the daemon: libfuse's own trace
    (``-o debug``) shows a handful of requests for 2,000 one-line writes, not a
    security.capability lookup per write as before."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "daemon.log"
    with Daemon(data, mnt, "acks=0,debug", log=log):
        (mnt / "t").mkdir()
        before = log.read_text(errors="replace")
        fd = os.open(mnt / "t" / "0" / "append", os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(2000):
                os.write(fd, b"line %d\n" % i)
        finally:
            os.close(fd)
        assert (mnt / "t" / "0" / "stream").read_bytes() == b"".join(
            b"line %d\n" % i for i in range(2000)
        )
        trace = log.read_text(errors="replace")[len(before) :]
    assert trace.count("opcode: WRITE ") >= 1
    assert trace.count("opcode: WRITE ") + trace.count("opcode: GETXATTR ") < 20, trace[-2000:]


def test_one_line_writes_are_answered_before_pyfuse3(tmp_path):
    """The default mode's one-line write()s are appended and answered as the
    daemon receives them (logfs/mount/fuse/_fuseinit.c): libfuse's trace shows no
    WRITE request for them, nor for a write of two lines or a line over
    max.message.bytes, which the general framing takes there and refuses
    (tests/mount/test_bulk_writes.py); a write to a file whose topic was deleted
    takes pyfuse3's way and gets its ESTALE."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "daemon.log"
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("max.message.bytes=300\n")
        before = len(log.read_text(errors="replace"))
        fd = os.open(mnt / "t" / "0" / "append", os.O_WRONLY | os.O_APPEND)
        for i in range(200):
            os.write(fd, b"line %d\n" % i)
        one_line_trace = log.read_text(errors="replace")[before:]
        os.write(fd, b"two\nlines\n")
        with pytest.raises(OSError) as refused:
            os.write(fd, b"x" * 400 + b"\n")
        assert refused.value.errno == errno.EMSGSIZE
        expected = b"".join(b"line %d\n" % i for i in range(200)) + b"two\nlines\n"
        assert (mnt / "t" / "0" / "stream").read_bytes() == expected
        assert (mnt / "t" / "0" / "offset" / "199").read_bytes() == b"line 199"
        os.rmdir(mnt / "t")
        with pytest.raises(OSError) as stale:
            os.write(fd, b"after\n")
        assert stale.value.errno == errno.ESTALE
        with pytest.raises(OSError) as stale:
            os.close(fd)  # the close of a deleted topic's file says so, and closes it
        assert stale.value.errno == errno.ESTALE
        assert "opcode: WRITE " not in one_line_trace
        assert log.read_text(errors="replace")[before:].count("opcode: WRITE ") == 1


def test_a_one_line_write_is_in_the_log_when_it_returns(tmp_path):
    """The one-line write() is answered once its record is in the segment file,
    and its bookkeeping is done before the next request: the receipt, the
    record by offset and the stream are there right after each write()."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, log=tmp_path / "daemon.log"):
        (mnt / "t").mkdir()
        fd = os.open(mnt / "t" / "0" / "append", os.O_RDWR)
        try:
            for i in range(100):
                line = b"receipt %d " % i + b"x" * (i * 37 % 500)
                assert os.write(fd, line + b"\n") == len(line) + 1
                assert os.read(fd, 100) == b"0 %d %d\n" % (i, i)
                assert (mnt / "t" / "0" / "offset" / str(i)).read_bytes() == line
        finally:
            os.close(fd)
        stream = (mnt / "t" / "0" / "stream").read_bytes().splitlines()
        assert [line.split(b" ")[1] for line in stream] == [b"%d" % i for i in range(100)]
    segment = data / "t-0" / "00000000000000000000.log"
    assert segment.stat().st_size > 100 * 70  # 61-byte headers and the lines


def test_rows_of_one_line_writes_cross_rolls_and_keep_every_line(tmp_path):
    """A writer's lines taken in rows (each row's next line through what its first
    found, `Log.write_next_line`) across many rolls: every line is there once, in
    order, by offset through the indexes and in the stream, and `logfs check`
    finds the segments whole."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, log=tmp_path / "daemon.log"):
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("segment.bytes=8192\nindex.interval.bytes=512\n")
        lines = [b"row line %d %s\n" % (i, b"x" * (i * 7 % 120)) for i in range(3000)]
        fd = os.open(mnt / "t" / "0" / "append", os.O_WRONLY | os.O_APPEND)
        try:
            for line in lines:
                assert os.write(fd, line) == len(line)
        finally:
            os.close(fd)
        assert (mnt / "t" / "0" / "stream").read_bytes() == b"".join(lines)
        for n in (0, 1, 777, 1500, 2999):
            assert (mnt / "t" / "0" / "offset" / str(n)).read_bytes() == lines[n][:-1]
    assert len(list((data / "t-0").glob("*.log"))) > 20
    done = subprocess.run(
        [sys.executable, "-m", "logfs.cli", "check", str(data)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no problems found" in done.stdout


LINES_FOR = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
end, pause, n = time.monotonic() + float(sys.argv[2]), float(sys.argv[3]), 0
while time.monotonic() < end:
    os.write(fd, b"line %d\n" % n)
    n += 1
    if pause:
        time.sleep(pause)
os.close(fd)
print(n)
"""


@contextlib.contextmanager
def writing_lines(append: Path, seconds: float, pause: float = 0.0):
    """A process writing ``line <n>`` to ``append`` for ``seconds``, one line per
    write(), ``pause`` seconds apart; it prints how many. Killed if still running."""
    writer = subprocess.Popen(
        [sys.executable, "-c", LINES_FOR, str(append), str(seconds), str(pause)],
        stdout=subprocess.PIPE,
    )
    try:
        yield writer
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()


def test_one_line_writes_in_turn_through_handles_of_two_topics(tmp_path):
    """The one-line path follows each write()'s handle: lines written in turn
    through two topics' files land in each; a topic with flush.messages=3 sends
    the lines that reach it pyfuse3's way (their write() waits for the fsync);
    once one topic is deleted its handle answers ESTALE while the other's
    lines are still taken."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "daemon.log"
    with Daemon(data, mnt, "debug", log=log):
        (mnt / "a").mkdir()
        (mnt / "b").mkdir()
        (mnt / "b" / "config").write_text("flush.messages=3\n")
        fa = os.open(mnt / "a" / "0" / "append", os.O_WRONLY)
        fb = os.open(mnt / "b" / "0" / "append", os.O_WRONLY)
        before = len(log.read_text(errors="replace"))
        for i in range(30):
            os.write(fa, b"a %d\n" % i)
            os.write(fb, b"b %d\n" % i)
        declined = log.read_text(errors="replace")[before:].count("opcode: WRITE ")
        assert 1 <= declined <= 10  # at most b's every third line (the flusher may sync first)
        expected = b"".join(b"a %d\n" % i for i in range(30))
        assert (mnt / "a" / "0" / "stream").read_bytes() == expected
        os.rmdir(mnt / "a")
        with pytest.raises(OSError) as stale:
            os.write(fa, b"after\n")
        assert stale.value.errno == errno.ESTALE
        before = len(log.read_text(errors="replace"))
        os.write(fb, b"b 30\n")
        assert "opcode: WRITE " not in log.read_text(errors="replace")[before:]
        with pytest.raises(OSError) as stale:
            os.close(fa)
        assert stale.value.errno == errno.ESTALE
        os.close(fb)
        expected = b"".join(b"b %d\n" % i for i in range(31))
        assert (mnt / "b" / "0" / "stream").read_bytes() == expected


def test_a_stream_of_one_line_writes_leaves_room_for_the_rest(tmp_path):
    """One-line write()s that follow each other closely are taken one after the
    other before pyfuse3's loop (_fuseinit.c), a bounded number in a row: while
    a writer writes as fast as it can, other requests are answered promptly
    and the flusher keeps flush.ms."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, log=tmp_path / "daemon.log"):
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("flush.ms=100\n")
        with writing_lines(mnt / "t" / "0" / "append", 3) as writer:
            points, slowest = [], 0.0
            time.sleep(0.3)
            while writer.poll() is None:
                started = time.monotonic()
                state = json.loads((mnt / "t" / "0" / "state").read_text())
                slowest = max(slowest, time.monotonic() - started)
                points.append(state["recovery_point"])
                time.sleep(0.05)
            written = int(writer.communicate(timeout=30)[0])
        assert writer.returncode == 0
        assert written > 5000
        assert slowest < 1.0, f"a read of state waited {slowest:.3f} s behind the writer"
        moves = sum(1 for a, b in zip(points, points[1:], strict=False) if b > a)
        assert moves >= 6, f"the recovery point moved {moves} times in {len(points)} looks"
        lines = (mnt / "t" / "0" / "stream").read_bytes().splitlines()
        assert lines == [b"line %d" % i for i in range(written)]


API_VERSIONS = 18


def test_lines_in_a_row_leave_the_listener_answering_at_once(tmp_path):
    """While one-line write()s come in a row, `_fuseinit.c` waits in C for the
    next one (up to 10 ms, a timer the CPU seldom has to program), and the
    wait ends when the daemon's loop has work: a Kafka request sent meanwhile
    is answered at once, not after the row."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with kafka_helpers.mounted(data, mnt) as (_, address):
        (mnt / "t").mkdir()
        probe = load_request_schema(API_VERSIONS, 3)(
            client_software_name="probe", client_software_version="1"
        )
        waits = []
        with (
            writing_lines(mnt / "t" / "0" / "append", 3, pause=0.002) as writer,
            kafka_helpers.connect(address) as sock,
        ):
            time.sleep(0.3)
            while writer.poll() is None:
                started = time.perf_counter()
                answer = kafka_helpers.call(address, API_VERSIONS, 3, probe, sock)
                waits.append(time.perf_counter() - started)
                assert answer.error_code == 0
                time.sleep(0.003)
            written = int(writer.communicate(timeout=30)[0])
        assert writer.returncode == 0
        assert written > 300
        waits.sort()
        # Held until each row of lines ended (10 ms), the median wait was 9.6 ms.
        assert waits[len(waits) // 2] < 0.002, f"median {waits[len(waits) // 2] * 1e3:.2f} ms"
        lines = (mnt / "t" / "0" / "stream").read_bytes().splitlines()
        assert lines == [b"line %d" % i for i in range(written)]


def test_files_keep_no_set_id_bits(buffered):
    """The kernel leaves dropping set-user-ID and set-group-ID bits at a write to
    logfs (handle_killpriv_v2): files never keep them; directories keep theirs."""
    append = buffered.mountpoint / "t" / "0" / "append"
    os.chmod(append, 0o6640)
    assert os.stat(append).st_mode & 0o7777 == 0o640
    topic = buffered.mountpoint / "t"
    os.chmod(topic, 0o2755)
    assert os.stat(topic).st_mode & 0o7777 == 0o2755


def test_buffered_errors_reach_fsync_and_close(buffered, tmp_path):
    """An oversize line fails the close() that reaches it (and is logged);
    the lines around it are appended."""
    mnt = buffered.mountpoint
    (mnt / "t" / "config").write_text("max.message.bytes=200\n")
    f = open(mnt / "t" / "0" / "append", "ab", buffering=0)  # noqa: SIM115 - close() is tested
    f.write(b"good 1\n")
    f.write(b"x" * 1000 + b"\n")
    f.write(b"good 2\n")
    with pytest.raises(OSError) as failed:
        f.close()
    assert failed.value.errno == errno.EMSGSIZE
    assert (mnt / "t" / "0" / "stream").read_bytes() == b"good 1\ngood 2\n"
    assert "1 line(s) dropped" in buffered.output()
    # reported once: the next close is clean
    with open(mnt / "t" / "0" / "append", "ab", buffering=0) as f:
        f.write(b"good 3\n")
        f.write(b"y" * 1000 + b"\n")
        with pytest.raises(OSError) as failed:
            os.fsync(f.fileno())
        assert failed.value.errno == errno.EMSGSIZE
        f.write(b"good 4\n")
    assert (mnt / "t" / "0" / "stream").read_bytes() == b"good 1\ngood 2\ngood 3\ngood 4\n"


def test_buffered_tail_f_and_receipts(buffered):
    """``tail -f stream`` sees lines once they reach the log; an O_RDWR open
    stays direct: its receipts are there at once."""
    mnt = buffered.mountpoint
    stream = mnt / "t" / "0" / "stream"
    (mnt / "t" / "0" / "append").write_bytes(b"first\n")
    tail = subprocess.Popen(
        ["tail", "-n", "+1", "-f", str(stream)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    out = bytearray()

    def read() -> None:
        while chunk := os.read(tail.stdout.fileno(), 65536):
            out.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with open(mnt / "t" / "0" / "append", "ab", buffering=0) as f:
            for i in range(3):
                f.write(b"line %d\n" % i)
        deadline = time.monotonic() + 10
        while bytes(out) != b"first\nline 0\nline 1\nline 2\n":
            assert time.monotonic() < deadline, f"tail -f printed {bytes(out)!r}"
            time.sleep(0.05)
    finally:
        tail.kill()
        tail.wait()
        reader.join(timeout=10)
        tail.stdout.close()
    fd = os.open(mnt / "t" / "0" / "append", os.O_RDWR)
    try:
        os.write(fd, b"with a receipt\n")
        assert os.read(fd, 100) == b"0 4 4\n"
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "option, message",
    [
        ("acks=2", "acks=2: expected 1 (or all: the default) or 0 (buffered)"),
        ("io_uring=1", "io_uring=1: io_uring takes no value"),  # FUSE over io_uring
        (
            "io_uring,io_uring_spin_us=1001",
            "io_uring_spin_us=1001: expected microseconds, 0 to 1000",
        ),
        ("io_uring_spin_us=20", "io_uring_spin_us=20: only with -o io_uring"),
    ],
)
def test_mount_refuses_a_bad_mode(tmp_path, option, message):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "logfs.cli", "mount", str(data), str(mnt), "-o", option],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip() == f"logfs mount: {message}", done.stderr


def test_buffered_survives_many_small_closes(buffered):
    """Python's logging opens, writes and closes; each close delivers."""
    import logging

    path = Path(buffered.mountpoint) / "t" / "0" / "append"
    for i in range(20):
        handler = logging.FileHandler(path)
        logger = logging.getLogger(f"legacy-{i}")
        logger.addHandler(handler)
        logger.propagate = False
        logger.warning("record %d", i)
        handler.close()
        got = (Path(buffered.mountpoint) / "t" / "0" / "stream").read_bytes().split(b"\n")[:-1]
        assert got == [b"record %d" % j for j in range(i + 1)]


def test_buffered_lines_of_an_open_file_reach_the_log_within_seconds(buffered):
    """nginx keeps its log open for days: what it wrote reaches the log (and
    ``tail -f``) within about a second, without a close or an fsync."""
    mnt = buffered.mountpoint
    with open(mnt / "t" / "0" / "append", "ab", buffering=0) as f:
        for i in range(100):
            f.write(b"open %d\n" % i)
        started = time.monotonic()
        while (mnt / "t" / "0" / "stream").read_bytes().count(b"\n") < 100:
            assert time.monotonic() - started < 10, "lines of an open file never arrived"
            time.sleep(0.05)
    assert (mnt / "t" / "0" / "stream").read_bytes() == b"".join(
        b"open %d\n" % i for i in range(100)
    )


def test_buffered_unmount_takes_what_open_files_hold(tmp_path):
    """SIGTERM (``logfs umount``) while a writer keeps its file open: what the
    kernel held of it reaches the log before the mount goes."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "acks=0", log=tmp_path / "daemon.log") as daemon:
        (mnt / "t").mkdir()
        fd = os.open(mnt / "t" / "0" / "append", os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(50):
                os.write(fd, b"held %d\n" % i)
            assert daemon.terminate() == 0
        finally:
            with contextlib.suppress(OSError):  # the mount is gone
                os.close(fd)
    with Daemon(data, mnt, log=tmp_path / "daemon.log"):
        got = (mnt / "t" / "0" / "stream").read_bytes()
    assert got == b"".join(b"held %d\n" % i for i in range(50))


@pytest.mark.parametrize("seed", range(5))
def test_buffered_stream_dedupe_in_process(tmp_path, seed):
    """The kernel's write-backs as they come: a page sent again from its start,
    requests ahead of a gap, pages read back. Every line once, in order."""
    rng = random.Random(seed)
    lines = [b"%d " % i + b"z" * rng.choice((0, 5, 100, 3000, 5000, 9000)) for i in range(300)]
    stream = b"".join(line + b"\n" for line in lines)
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        ops = Operations(store, buffered=True)
        appends = ops.buffered
        file = buffered_open(ops).stream
        sent = 0  # what the kernel has handed over
        while sent < len(stream):
            end = min(len(stream), sent + rng.choice((1, 50, 4096, 10000, 70000)))
            start = sent - sent % 4096  # the partly written page, again
            if rng.random() < 0.3:
                assert file.read(start, 4096) == stream[start : min(start + 4096, sent)]
            if rng.random() < 0.3 and end - start > 2:  # in two pieces, the second first
                cut = rng.randrange(start + 1, end)
                file.write(cut, stream[cut:end])
                file.write(start, stream[start:cut])
            else:
                file.write(start, stream[start:end])
            sent = end
        assert appends.size(("t", "0", "append")) == len(stream)
        file.catch_up()
        assert file.take_error() is None
        assert [r.value for r in store.log("t", 0).scan()] == lines


def test_buffered_close_of_one_writer_leaves_anothers_partial_line(tmp_path):
    """A close while another writer's long line is half written back: the
    half stays pending; the last close makes a trailing partial line a record."""
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        ops = Operations(store, buffered=True)
        first, second = buffered_open(ops), buffered_open(ops)
        stream = first.stream
        assert stream is second.stream
        stream.write(0, b"whole\nhalf of a l")
        trio.run(first.release)  # one writer's last close; the other is still writing its line
        assert [r.value for r in store.log("t", 0).scan()] == [b"whole"]
        stream.write(17, b"ine\ntail")
        trio.run(second.flush)  # the last close
        assert [r.value for r in store.log("t", 0).scan()] == [
            b"whole",
            b"half of a line",
            b"tail",
        ]
