"""A full DATA can be emptied through the mount: ``rmdir`` of a topic (the one
that filled it, too) works on a full disk, a config edit is written there
with DATA's reserve given back (made again once there is room) and leaves no
temporary file, and DATA mounts again."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
from mount_helpers import Daemon

from logfs import Store
from logfs.core.storage.reserve import RESERVE_BYTES, RESERVE_FILE
from logfs.core.tools.offline import check

pytestmark = [pytest.mark.mount, pytest.mark.timeout(180)]


@pytest.fixture
def tiny(tmp_path):
    point = tmp_path / "tiny"
    point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(point)], check=True
    )
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], capture_output=True)
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def fill(path) -> None:
    """Append to ``path`` until the disk is full (ENOSPC)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        while True:
            try:
                os.write(fd, b"x" * 2000 + b"\n")
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                return
    finally:
        os.close(fd)


def leftovers(data) -> list[str]:
    return [
        os.path.join(root, name)
        for root, _, files in os.walk(data)
        for name in files
        if name.endswith(".tmp")
    ]


def test_a_full_disk_is_emptied_by_deleting_a_topic(tmp_path, tiny):
    data, mnt = tiny / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "segment.bytes=200000", log=tmp_path / "daemon.log"):
        os.mkdir(mnt / "kept")
        (mnt / "kept" / "config").write_text("retention.ms=86400000\n")
        os.mkdir(mnt / "filler")
        fill(mnt / "filler" / "0" / "append")
        assert (data / RESERVE_FILE).stat().st_size == RESERVE_BYTES
        # a config edit needs a block for its new file: DATA's reserve is given back for it
        (mnt / "kept" / "config").write_text("retention.ms=3600000\n")
        assert "retention.ms=3600000\n" in (mnt / "kept" / "config").read_text()
        assert not (data / RESERVE_FILE).exists()
        assert leftovers(data) == []
        os.rmdir(mnt / "filler")  # the way to make room works on a full disk
        assert "filler" not in os.listdir(mnt)
        assert leftovers(data) == [] and not [n for n in os.listdir(data) if "delet" in n]
        (mnt / "kept" / "config").write_text("retention.ms=7200000\n")  # room again
        with open(mnt / "kept" / "0" / "append", "a") as f:
            f.write("after\n")
    assert check(data) == []
    assert (data / RESERVE_FILE).stat().st_size == RESERVE_BYTES  # made again once there was room
    with Store(data) as store:
        assert store.topics() == {"kept": 1}
        assert store.topic_overrides("kept") == {"retention.ms": "7200000"}
        assert [r.value for r in store.log("kept", 0).scan()] == [b"after"]
