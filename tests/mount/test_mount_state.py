"""The mount's own ``.state`` file: what the root's extended attributes tell
(pid, DATA, health, failures, the recovery at the start), as a JSON line that
``cat`` and scripts read; hidden from ``ls``, read-only for everyone."""

from __future__ import annotations

import errno
import json
import os
import subprocess

import pytest
from mount_helpers import Daemon

pytestmark = pytest.mark.mount


def test_the_mounts_state_file_tells_what_its_root_tells(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt) as daemon:
        os.mkdir(mnt / "t")
        state = json.loads((mnt / ".state").read_bytes())
        assert state == {
            "pid": daemon.proc.pid,
            "data": str(data.resolve()),
            "health": "ok",
            "failures": {},
            "recovery": state["recovery"] | {"done": True},
        }
        assert json.loads(os.getxattr(mnt, "user.logfs.recovery")) | {"seconds": 0} == (
            state["recovery"] | {"seconds": 0}
        )
        assert os.stat(mnt / ".state").st_size == len((mnt / ".state").read_bytes())
        ls = subprocess.run(["ls", mnt], capture_output=True, text=True, check=True)
        assert ls.stdout.split() == ["t"]
        ls_all = subprocess.run(["ls", "-A", mnt], capture_output=True, text=True, check=True)
        assert ls_all.stdout.split() == [".state", "t"]


def test_the_mounts_state_file_is_read_only_and_no_topic(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        assert oct(os.stat(mnt / ".state").st_mode & 0o777) == "0o444"
        for change, expected in (
            (lambda: os.chmod(mnt / ".state", 0o666), errno.EPERM),
            (lambda: os.chown(mnt / ".state", 1, 1), errno.EPERM),
            (lambda: os.mkdir(mnt / ".state"), errno.EEXIST),
            (lambda: os.rmdir(mnt / ".state"), errno.ENOTDIR),
            (lambda: os.unlink(mnt / ".state"), errno.EPERM),
        ):
            with pytest.raises(OSError) as refused:
                change()
            assert refused.value.errno == expected, change
        with pytest.raises(OSError) as refused:
            os.open(mnt / ".state", os.O_WRONLY)
        assert refused.value.errno in (errno.EACCES, errno.EPERM, errno.EBADF)
        assert json.loads((mnt / ".state").read_bytes())["health"] == "ok"
        assert not (data / ".state").exists()
