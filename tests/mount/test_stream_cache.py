"""``stream`` through the kernel's page cache, on a real mount: a re-read is
served without the daemon, and a reader after an append or retention reads the
lines as they are then, never what the kernel kept (a cleaning: test_nodes.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from mount_helpers import Daemon

pytestmark = [pytest.mark.mount, pytest.mark.timeout(120)]


def daemon_read(pid: int) -> int:
    """Bytes the daemon has read with read(2) and pread(2) so far: its segments,
    and the requests the kernel sends it."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"no rchar in /proc/{pid}/io")


def cat(path: Path) -> bytes:
    return subprocess.run(["cat", str(path)], capture_output=True, check=True).stdout


def state(partition: Path) -> dict:
    return json.loads((partition / "state").read_text())


def test_a_re_read_of_the_stream_is_served_by_the_kernel_and_changes_are_read(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "log.retention.check.interval.ms=100") as daemon:
        (mnt / "t").mkdir()
        with open(mnt / "t" / "config", "a") as config:
            config.write("segment.bytes=65536\n")
        p0, values = mnt / "t" / "0", [b"%06d " % i + b"x" * 93 for i in range(20_000)]
        lines = b"".join(v + b"\n" for v in values)
        (tmp_path / "lines").write_bytes(lines)
        subprocess.run(f"cat {tmp_path / 'lines'} > {p0 / 'append'}", shell=True, check=True)
        device = os.stat(mnt).st_dev  # the kernel reads ahead in whole 1 MiB requests
        bdi = Path(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb")
        deadline = time.monotonic() + 10  # set once the daemon's recovery ended
        while bdi.read_text() != "1024\n":
            assert time.monotonic() < deadline, bdi.read_text()
            time.sleep(0.05)

        before = daemon_read(daemon.pid)
        assert cat(p0 / "stream") == lines
        first = daemon_read(daemon.pid) - before
        assert first > len(lines)  # the segments were read
        before = daemon_read(daemon.pid)
        assert cat(p0 / "stream") == lines
        again = daemon_read(daemon.pid) - before
        assert again < len(lines) // 100, (first, again)  # the kernel had it all

        # an append: the size the kernel is told changes, and it reads anew
        subprocess.run(f"echo appended >> {p0 / 'append'}", shell=True, check=True)
        lines += b"appended\n"
        assert cat(p0 / "stream") == lines

        # retention deletes the oldest segments: every position moves
        with open(mnt / "t" / "config", "a") as config:
            config.write("retention.bytes=300000\n")
        deadline = time.monotonic() + 20
        while (start := state(p0)["log_start_offset"]) == 0:
            assert time.monotonic() < deadline, daemon.output()
            time.sleep(0.05)
        expected = b"".join(v + b"\n" for v in values[start:]) + b"appended\n"
        assert cat(p0 / "stream") == expected
        assert cat(p0 / "stream") == expected
        assert cat(p0 / "from" / str(start + 1)) == expected[len(values[start]) + 1 :]
