"""FUSE over io_uring (``-o io_uring``, mount/fuse/_fusering.c).

With the fuse module's ``enable_uring`` on, the kernel hands requests over the
ring: the kernel's own count of the ring's completions (the daemon's io_uring
descriptor in /proc/<pid>/fdinfo) grows with them, and every path works as over
/dev/fuse: one-line writes taken in rows, bulk appends, producer batches of a
MiB, reads, rolls, unmounts, kill -9; between the lines of a row the daemon
watches the ring instead of sleeping (``-o io_uring_spin_us``). With it off (or on
a kernel without it), the mount says so and works over /dev/fuse. Records are read
back with kafka-python's codec from the segment files.

The tests set the module parameter for themselves and put it back after.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from mount_helpers import Daemon, force_unmount, sh, uring_switch, wait_live

from logfs import Producer, Store

pytestmark = [pytest.mark.timeout(180)]

ON_MESSAGE = "FUSE requests come over io_uring"
OFF_MESSAGE = "the kernel does not offer it"


def ring_completions(pid: int) -> int | None:
    """The completions the kernel posted to the daemon's io_uring (its CQ head, as the
    daemon consumed them), or None if the daemon holds no io_uring."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[io_uring]":
                for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
                    if line.startswith("CqHead:"):
                        return int(line.split()[1])
    return None


def write_each(path: Path, lines: list[bytes]) -> None:
    """Each line in a ``write()`` of its own, through one open file: one-line writes in rows."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        for line in lines:
            assert os.write(fd, line) == len(line)
    finally:
        os.close(fd)


# `write_each` as a program of its own: the lines on stdin, the file in argv[1].
WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for line in sys.stdin.buffer.read().splitlines(keepends=True):
    assert os.write(fd, line) == len(line)
"""


def alone_write_each(path: Path, lines: list[bytes]) -> None:
    """`write_each` in a process of its own: a writer that no other thread of the
    test's process (one an earlier test left) holds up between its lines."""
    run = [sys.executable, "-c", WRITER, str(path)]
    subprocess.run(run, input=b"".join(lines), check=True, timeout=120)


def log_values(data: Path, topic: str) -> list[bytes]:
    """Every record value of ``topic``'s partition 0, decoded by kafka-python."""
    values = []
    for segment in sorted((data / f"{topic}-0").glob("*.log")):
        records = MemoryRecords(segment.read_bytes())
        while (batch := records.next_batch()) is not None:
            values += [record.value for record in batch]
    return values


def test_requests_come_over_the_ring_and_every_path_works(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    lines = [b"line %d %s\n" % (i, b"x" * (i * 13 % 90)) for i in range(3000)]
    bulk = [b"bulk %d\n" % i for i in range(200_000)]
    (tmp_path / "bulk").write_bytes(b"".join(bulk))
    with uring_switch(True) as on, Daemon(data, mnt, "io_uring") as daemon:
        if not on:  # a kernel without FUSE over io_uring: the mount says so and goes on
            assert daemon.said(OFF_MESSAGE), daemon.output()
        else:
            assert daemon.said(ON_MESSAGE), daemon.output()
        before = ring_completions(daemon.pid)
        (mnt / "t").mkdir()
        (mnt / "t" / "config").write_text("segment.bytes=65536\n")
        write_each(mnt / "t" / "0" / "append", lines)
        sh(f"for i in 1 2 3; do echo echoed $i >> {mnt}/t/0/append; done")
        sh(f"cat {tmp_path}/bulk > {mnt}/t/0/append")  # many lines per write()
        assert wait_live(data) == str(mnt)
        with Producer(data) as producer:  # whole batches through append.batches
            for i in range(20_000):
                producer.send("b", b"batched %d" % i)
            receipts = producer.flush()
        assert sum(r[3] - r[2] + 1 for r in receipts) == 20_000
        expected = [line[:-1] for line in lines] + [b"echoed 1", b"echoed 2", b"echoed 3"]
        expected += [line[:-1] for line in bulk]
        stream = (mnt / "t" / "0" / "stream").read_bytes()
        assert stream.splitlines() == expected
        assert (mnt / "t" / "0" / "offset" / "2999").read_bytes() == lines[2999][:-1]
        state = json.loads((mnt / "t" / "0" / "state").read_text())
        assert state["next_offset"] == len(expected) and state["segments"] > 10
        assert len(os.listdir(mnt / "t" / "0" / "segments")) == 3 * state["segments"]
        after = ring_completions(daemon.pid)
        if on:  # the kernel handed at least every line's request over the ring
            assert after - before >= len(lines), (before, after)
        else:
            assert after is None
        assert daemon.terminate() == 0
    assert "failed to unmount" not in daemon.output()
    assert log_values(data, "t") == expected
    assert log_values(data, "b") == [b"batched %d" % i for i in range(20_000)]
    done = subprocess.run(
        [sys.executable, "-m", "logfs.cli", "check", str(data)], capture_output=True, text=True
    )
    assert done.returncode == 0 and "no problems found" in done.stdout, done.stdout


def test_an_external_unmount_ends_a_ring_mount_cleanly(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with uring_switch(True), Daemon(data, mnt, "io_uring") as daemon:
        (mnt / "t").mkdir()
        (mnt / "t" / "0" / "append").write_bytes(b"kept\n")
        sh(f"umount {mnt}")
        assert daemon.proc.wait(timeout=30) == 0
    assert "failed to unmount" not in daemon.output(), daemon.output()
    assert log_values(data, "t") == [b"kept"]


def test_kill_9_keeps_every_line_a_ring_mount_answered(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with uring_switch(True), Daemon(data, mnt, "io_uring") as daemon:
        (mnt / "t").mkdir()
        write_each(mnt / "t" / "0" / "append", [b"answered %d\n" % i for i in range(5000)])
        daemon.kill()  # every write() returned: each line is in the segment file
        force_unmount(mnt)
    with Store(data) as store:  # recovery after the crash
        values = [r[3] for r in store.log("t", 0).scan()]
    assert values == [b"answered %d" % i for i in range(5000)]


def sleeps(pid: int) -> int:
    """The times the daemon's serving thread (its main thread) went to sleep by itself."""
    for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches for {pid}")


def test_a_watched_ring_takes_a_writers_next_line_without_sleeping(tmp_path):
    """``-o io_uring_spin_us``: between one line's answer and the next line the daemon
    watches the ring instead of sleeping, so the writer's lines in a row cost it no
    sleep; with 0 it sleeps for each. Every line is kept either way.

    A writer the host delays past the watch (another busy process on two cores)
    costs sleeps that say nothing of the daemon: each mount writes the lines up to
    three times, until a run holds its bound, and its best run is judged."""
    lines = [b"watched %d\n" % i for i in range(2000)]
    slept: dict[int, list[int]] = {}
    with uring_switch(True) as on:
        assert on, "this kernel has no FUSE over io_uring switch"
        for spin_us, holds in (
            (0, lambda n: n >= len(lines) // 2),
            (1000, lambda n: n <= len(lines) // 8),
        ):
            data, mnt = tmp_path / f"data{spin_us}", tmp_path / f"mnt{spin_us}"
            mnt.mkdir()
            slept[spin_us] = []
            with Daemon(data, mnt, f"io_uring,io_uring_spin_us={spin_us}") as daemon:
                assert daemon.said(f"{ON_MESSAGE} (the next line watched for {spin_us} µs)")
                (mnt / "t").mkdir()
                write_each(mnt / "t" / "0" / "append", lines[:64])  # warm: the first row
                while len(slept[spin_us]) < 3 and not any(map(holds, slept[spin_us])):
                    before = sleeps(daemon.pid)
                    alone_write_each(mnt / "t" / "0" / "append", lines[64:])
                    slept[spin_us].append(sleeps(daemon.pid) - before)
                assert daemon.terminate() == 0
            runs = len(slept[spin_us])
            assert log_values(data, "t") == [line[:-1] for line in lines[:64] + lines[64:] * runs]
    assert max(slept[0]) >= len(lines) // 2, slept
    assert min(slept[1000]) <= len(lines) // 8, slept


def test_without_the_kernel_switch_the_mount_says_so_and_uses_dev_fuse(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with uring_switch(False), Daemon(data, mnt, "io_uring") as daemon:
        assert daemon.said(OFF_MESSAGE), daemon.output()
        (mnt / "t").mkdir()
        write_each(mnt / "t" / "0" / "append", [b"over dev fuse %d\n" % i for i in range(100)])
        assert ring_completions(daemon.pid) is None
        assert daemon.terminate() == 0
    assert log_values(data, "t") == [b"over dev fuse %d" % i for i in range(100)]
