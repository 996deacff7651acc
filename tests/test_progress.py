"""Progress of long work (logfs/progress.py): a tqdm bar on a terminal, plain lines
otherwise, nothing with --quiet; the results alone on stdout. And the recovery at a
mount's start: logged as it goes and shown in the root's ``user.logfs.recovery``."""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import pty
import struct
import subprocess
import sys
import termios
import time

import pytest
from mount_helpers import Daemon

from logfs import Store
from logfs import progress as progress_module
from logfs.daemon import recovery
from logfs.progress import Progress

LOGFS = [sys.executable, "-m", "logfs.cli"]


def test_plain_lines_say_how_far_and_the_last_one_done(monkeypatch):
    monkeypatch.setattr(progress_module, "PLAIN_EVERY", 0.0)
    out = io.StringIO()
    with Progress("check DATA", None, stream=out) as progress:
        for done in range(1, 5):
            progress.report(done, 4, f"t-{done - 1}")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("check DATA: 1 partition of 4 partitions (25%) in ")
    assert lines[3].startswith("check DATA: 4 partitions of 4 partitions (100%) in ")
    assert lines[3].endswith(", last t-3") and len(lines) == 5  # and one at the end


def test_plain_lines_come_at_most_every_few_seconds():
    out = io.StringIO()
    with Progress("compact DATA", 1000, stream=out) as progress:
        for _ in range(1000):
            progress.advance(1, "t-0")
    assert out.getvalue().splitlines() == [out.getvalue().splitlines()[-1]]  # the end's only
    assert "1000 partitions of 1000 partitions (100%)" in out.getvalue()


def test_quiet_shows_nothing_and_a_bar_is_tqdms():
    out = io.StringIO()
    with Progress("dump", 10, "B", quiet=True, stream=out, bar=True) as progress:
        progress.report(10, 10)
    assert out.getvalue() == ""
    with Progress("dump", None, "B", stream=out, bar=True) as progress:
        progress.report(5_000_000, 10_000_000)
        progress.report(10_000_000, 10_000_000)
    assert "100%|" in out.getvalue() and "10.0M/10.0M" in out.getvalue()


def make_data(path, partitions: int = 3) -> None:
    with Store(path) as store:
        store.create_topic("orders", partitions)
        for p in range(partitions):
            store.log("orders", p).append([b"record %d" % i for i in range(100)])


def test_check_compact_and_dump_show_progress_on_stderr_only(tmp_path):
    make_data(tmp_path)
    check = subprocess.run([*LOGFS, "check", tmp_path], capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout == "no problems found\n"
    assert f"check {tmp_path}: 3 partitions of 3 partitions (100%)" in check.stderr
    assert "last orders-2: 1 segment(s)" in check.stderr
    quiet = subprocess.run([*LOGFS, "check", "-q", tmp_path], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == ""
    repair = subprocess.run([*LOGFS, "check", "--repair", tmp_path], capture_output=True, text=True)
    assert repair.returncode == 0, repair.stderr
    assert f"repair {tmp_path}: 3 partitions of 3 partitions (100%)" in repair.stderr
    segment = tmp_path / "orders-0" / "00000000000000000000.log"
    dump = subprocess.run([*LOGFS, "dump", segment], capture_output=True, text=True)
    assert dump.stdout.startswith(f"Dumping {segment}") and "MB of " not in dump.stdout
    size = segment.stat().st_size
    assert f"dump: {size / 1e6:.1f} MB of {size / 1e6:.1f} MB (100%)" in dump.stderr
    with Store(tmp_path) as store:
        store.set_topic_config("orders", {"cleanup.policy": "compact"})
    compact = subprocess.run([*LOGFS, "compact", tmp_path], capture_output=True, text=True)
    assert compact.returncode == 0, compact.stderr
    assert compact.stdout.endswith("partition(s)\n")
    assert "3 partitions of 3 partitions (100%)" in compact.stderr


def test_on_a_terminal_check_draws_a_bar(tmp_path):
    make_data(tmp_path, 4)
    leader, follower = pty.openpty()
    # A terminal 100 columns wide (a new pseudo-terminal has no size: tqdm draws nothing).
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [*LOGFS, "check", tmp_path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=follower, text=True,
    )  # fmt: skip
    os.close(follower)
    out, _ = proc.communicate(timeout=120)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.returncode == 0 and out == "no problems found\n"
    assert b"100%|" in shown and b"4/4" in shown, shown


def test_the_recovery_is_logged_as_it_goes(monkeypatch, caplog):
    monkeypatch.setattr(recovery, "LOG_EVERY", 0.0)
    progress = recovery.RecoveryProgress("/data")
    with caplog.at_level(logging.INFO, logger="logfs"):
        for done in range(1, 4):
            progress(done, 4, f"t-{done}")
    assert "recovering /data: 3 of 4 partitions (75%)" in caplog.text
    assert progress.state()["done"] is False and progress.state()["recovered"] == 3
    progress(4, 4, "t-4")
    progress.end()
    assert progress.state() | {"seconds": 0} == {
        "done": True, "partitions": 4, "recovered": 4, "seconds": 0,
    }  # fmt: skip


@pytest.mark.mount
def test_the_mounts_root_tells_how_far_the_recovery_went(tmp_path):
    make_data(tmp_path / "data", 5)
    (tmp_path / "mnt").mkdir()
    with Daemon(tmp_path / "data", tmp_path / "mnt"):
        deadline = time.monotonic() + 60
        while not (state := json.loads(os.getxattr(tmp_path / "mnt", "user.logfs.recovery")))[
            "done"
        ]:
            assert state["recovered"] <= state["partitions"] in (0, 5)  # 0: not counted yet
            assert time.monotonic() < deadline, state
            time.sleep(0.05)
        assert state["partitions"] == state["recovered"] == 5


@pytest.mark.mount
def test_logfs_mount_shows_the_recovery_while_it_waits(tmp_path):
    make_data(tmp_path / "data", 6)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for quiet in ([], ["-q"]):
        done = subprocess.run(
            [*LOGFS, "mount", *quiet, tmp_path / "data", mnt], capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        try:
            assert done.returncode == 0, done.stderr
            if quiet:
                assert done.stderr == ""
            else:
                assert f"recovering {tmp_path / 'data'}: 6 partitions of 6 partitions (100%)" in (
                    done.stderr
                )
            assert done.stdout == ""
        finally:
            umount = subprocess.run([*LOGFS, "umount", mnt], capture_output=True, text=True)
            assert umount.returncode == 0, umount.stderr
