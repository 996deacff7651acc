"""DATA is written by one process whatever is removed from it: the lock is held
on DATA's directory as well as on ``DATA/.lock``, so deleting ``.lock`` lets no
second store or daemon in; the mount record is removed only by the daemon that
wrote it."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess

import pytest
from mount_helpers import LOGFS, Daemon, mount_type

from logfs import Store
from logfs.core.client import mountinfo
from logfs.core.errors import DataDirBusyError


def test_removing_the_lock_file_lets_no_second_writer_in(tmp_path):
    data = tmp_path / "data"
    first = Store(data)
    first.create_topic("t")
    first.log("t", 0).append([b"a"])
    os.unlink(data / ".lock")
    with pytest.raises(DataDirBusyError):
        Store(data, lock_timeout=0.2)
    assert (data / ".lock").exists()  # the refused store made one, and holds nothing
    first.log("t", 0).append([b"b"])
    first.close()
    with Store(data, lock_timeout=0.2) as second:  # released: the next one gets in
        assert [r.value for r in second.log("t", 0).scan()] == [b"a", b"b"]
        assert second.log("t", 0).next_offset == 2


def test_a_writer_holding_only_the_lock_file_still_keeps_others_out(tmp_path):
    data = tmp_path / "data"
    Store(data).close()
    fd = os.open(data / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as an older writer locks
        with pytest.raises(DataDirBusyError):
            Store(data, lock_timeout=0.2)
    finally:
        os.close(fd)
    Store(data, lock_timeout=0.2).close()


def test_the_mount_record_is_removed_only_by_its_daemon(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    record = mountinfo.write_record(data, "")
    fields = json.loads((data / mountinfo.RECORD_FILE).read_text())
    # the same pid, started at another time: another process of that pid wrote it
    fields["pid_start_ticks"] = record.pid_start_ticks - 1
    (data / mountinfo.RECORD_FILE).write_text(json.dumps(fields))
    assert not mountinfo.remove_record(data)
    assert (data / mountinfo.RECORD_FILE).exists()
    mountinfo.write_record(data, "")
    assert mountinfo.remove_record(data)


@pytest.mark.mount
def test_a_second_daemon_is_refused_after_the_lock_file_is_deleted(tmp_path):
    data, mnt, other = tmp_path / "data", tmp_path / "mnt", tmp_path / "other"
    mnt.mkdir()
    other.mkdir()
    with Daemon(data, mnt) as daemon:
        (mnt / "t").mkdir()
        for i in range(3):
            with open(mnt / "t" / "0" / "append", "a") as f:
                f.write(f"first {i}\n")
        os.unlink(data / ".lock")
        done = subprocess.run(
            [*LOGFS, "mount", str(data), str(other)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode != 0
        assert mount_type(other) is None
        message = done.stderr.strip()
        assert "Traceback" not in message and len(message.splitlines()) == 1, message
        assert "in use" in message
        record = mountinfo.read_record(data)
        assert record is not None and record.pid == daemon.pid
        with open(mnt / "t" / "0" / "append", "a") as f:
            f.write("first 3\n")
        assert (mnt / "t" / "0" / "stream").read_text().splitlines() == [
            f"first {i}" for i in range(4)
        ]
    with Store(data) as store:
        assert store.log("t", 0).next_offset == 4
