"""The mount record, DATA/logfs-mount.json: written while a writable mount is
live, removed at a clean unmount, recognised as stale when its daemon died,
was replaced, or hangs (core/client/mountinfo.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from mount_helpers import LOGFS, Daemon, force_unmount, mount_type, wait_live, wait_unmounted

from logfs.core.client import mountinfo
from logfs.core.client.mountinfo import live_mount, live_record, read_record, stale_reason

pytestmark = pytest.mark.timeout(120)


mounts = pytest.mark.mount


def forge(data, **changes) -> None:
    """Rewrite the record in ``data`` with some fields changed."""
    path = mountinfo.record_path(data)
    with open(path) as f:
        fields = json.load(f)
    fields.update(changes)
    with open(path, "w") as f:
        json.dump(fields, f)


# ---------------------------------------------------------------- without a mount


def test_record_round_trip_and_every_stale_reason(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    data.mkdir()
    mnt.mkdir()
    assert read_record(data) is None and live_mount(data) is None
    written = mountinfo.write_record(data, str(mnt), partitions=3, defaults={"flush.ms": "500"})
    record = read_record(data)
    assert record == written
    assert record.pid == os.getpid() and record.data == str(data) and record.partitions == 3
    assert record.pid_start_ticks == mountinfo.process_start_ticks(os.getpid()) > 0
    assert abs(record.started_ms - time.time() * 1000) < 60_000
    assert dict(record.defaults) == {"flush.ms": "500"}
    assert os.listdir(data) == [mountinfo.RECORD_FILE]  # no temporary file left behind

    # Everything about the process holds; nothing is mounted there.
    assert "is not a logfs mount" in stale_reason(data, record)
    assert live_mount(data) is None

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    forge(data, pid=int(done.stdout))  # that process has exited
    assert "is not running" in stale_reason(data, read_record(data))
    forge(data, pid=os.getpid(), pid_start_ticks=record.pid_start_ticks - 1)  # pid reused
    assert "is another process now" in stale_reason(data, read_record(data))
    forge(data, pid_start_ticks=record.pid_start_ticks, boot_id="not this boot")
    assert "before the last boot" in stale_reason(data, read_record(data))
    forge(data, boot_id=record.boot_id)

    copy = tmp_path / "copy"
    shutil.copytree(data, copy)  # a copied data dir carries a copied record
    assert "another data directory" in stale_reason(copy, read_record(copy))

    forge(data, version=99)
    assert read_record(data) is None
    (data / mountinfo.RECORD_FILE).write_text("{garbled")
    assert read_record(data) is None and live_record(data) is None

    mountinfo.write_record(data, str(mnt))
    assert not mountinfo.remove_record(data, pid=os.getpid() + 1)  # not ours: kept
    assert mountinfo.remove_record(data)
    assert not (data / mountinfo.RECORD_FILE).exists()
    assert not mountinfo.remove_record(data)


@mounts
def test_mountinfo_reads_escaped_mount_points(tmp_path):
    """A mount point with a space is found by its real name (mountinfo writes \\040)."""
    data, mnt = tmp_path / "data", tmp_path / "mount point"
    mnt.mkdir()
    with Daemon(data, mnt):
        entry = mountinfo.mount_entry(str(mnt))
        assert entry == mountinfo.MountEntry(str(mnt), "fuse.logfs", str(data))
        assert wait_live(data) == str(mnt)


# ---------------------------------------------------------------- with real mounts


@mounts
def test_record_while_mounted_and_gone_after_umount(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    before = int(time.time() * 1000)
    run = lambda *args: subprocess.run([*LOGFS, *args], capture_output=True, text=True, timeout=60)  # noqa: E731
    try:
        done = run("mount", str(data), str(mnt), "-o", "partitions=2,flush.ms=500")
        assert done.returncode == 0, done.stderr
        record = read_record(data)  # there as soon as `logfs mount` returns
        assert record is not None
        assert record.mountpoint == str(mnt) and record.data == str(data)
        assert record.pid == int(os.getxattr(mnt, "user.logfs.pid"))
        assert before <= record.started_ms <= time.time() * 1000
        assert record.partitions == 2 and dict(record.defaults) == {"flush.ms": "500"}
        assert stale_reason(data, record) is None
        assert live_mount(data) == str(mnt)
        assert live_mount(os.path.relpath(data)) == str(mnt)  # any name of DATA
        done = run("umount", str(mnt))
        assert done.returncode == 0, done.stderr
    finally:
        force_unmount(mnt)
    assert not (data / mountinfo.RECORD_FILE).exists()
    assert live_mount(data) is None


@mounts
def test_external_unmount_removes_the_record(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt) as daemon:
        assert wait_live(data) == str(mnt)
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True, timeout=30)
        assert daemon.proc.wait(timeout=30) == 0
    assert read_record(data) is None


@mounts
@pytest.mark.parametrize("auto_unmount", [True, False])
def test_record_of_a_killed_daemon_is_stale(tmp_path, auto_unmount):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    daemon = Daemon(data, mnt, *(["auto_unmount"] if auto_unmount else [])).start()
    try:
        assert wait_live(data) == str(mnt)
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.proc.wait(timeout=30)
        if auto_unmount:
            # fusermount3's auto_unmount helper does it; on a loaded machine it may take seconds
            assert wait_unmounted(mnt, timeout=60)
        else:
            assert mount_type(mnt) == "fuse.logfs"  # dead, still in the mount table
        record = read_record(data)
        assert record is not None and record.pid == daemon.pid  # left behind
        started = time.monotonic()
        assert "is not running" in stale_reason(data, record)
        assert live_mount(data) is None
        assert time.monotonic() - started < 1  # decided without asking the dead mount
    finally:
        daemon.stop()
    assert mount_type(mnt) is None
    with Daemon(data, mnt) as daemon:  # the next mount replaces the stale record
        assert wait_live(data) == str(mnt)
        assert read_record(data).pid == daemon.pid


@mounts
def test_record_naming_another_live_process_is_stale(tmp_path):
    """pid alive and the mount live, but the mount is not that pid's."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        wait_live(data)
        forge(data, pid=os.getpid(), pid_start_ticks=mountinfo.process_start_ticks(os.getpid()))
        assert "is served by pid" in stale_reason(data, read_record(data))
        assert live_mount(data) is None


@mounts
def test_hung_daemon_is_not_waited_for(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt) as daemon:
        wait_live(data)
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            assert "does not answer" in stale_reason(data, read_record(data), timeout=0.5)
            assert time.monotonic() - started < 5
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        assert live_mount(data) == str(mnt)


@mounts
def test_read_only_mount_writes_no_record(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    data.mkdir()
    mnt.mkdir()
    with Daemon(data, mnt, "ro"):
        (mnt / "t").exists()  # the daemon answers: it is past writing any record
        assert read_record(data) is None and live_mount(data) is None


@mounts
def test_mount_point_through_a_symlink(tmp_path):
    """The record (and mountinfo) name the real directory; mount and umount take the link."""
    data, real, link = tmp_path / "data", tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    run = lambda *args: subprocess.run([*LOGFS, *args], capture_output=True, text=True, timeout=60)  # noqa: E731
    try:
        done = run("mount", str(data), str(link))
        assert done.returncode == 0, done.stderr
        assert mount_type(real) == "fuse.logfs"
        assert live_mount(data) == str(real)
        done = run("umount", str(link))
        assert done.returncode == 0, done.stderr
    finally:
        force_unmount(real)
    assert read_record(data) is None
