"""Resource exhaustion: the data directory on a tiny tmpfs fills up.

The test mounts a size-limited tmpfs (always unmounted again), puts DATA and
some ballast on it and appends through the mount until write() fails. Then:
the error is ENOSPC, no record of the failed write() is in the log (nothing
partial), later writes keep failing cleanly, and once the ballast is deleted
appends work again. Several fill/free rounds; at the end a clean unmount
and `check` finds nothing wrong.
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
from mount_helpers import Daemon
from stress import report, scale

from logfs import Store
from logfs.core.tools.offline import check

pytestmark = [pytest.mark.mount, pytest.mark.timeout(scale(180, 1800))]


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


def test_full_disk_fails_cleanly_and_recovers(tmp_path, tiny):
    data, mnt = tiny / "data", tmp_path / "mnt"
    mnt.mkdir()
    options = ["segment.bytes=300000", "index.interval.bytes=512", "flush.ms=50"]
    rounds = scale(3, 20)
    acked: list[bytes] = []
    failures = attempts_after_full = 0
    seq = 0
    with Daemon(data, mnt, *options, log=tmp_path / "daemon.log"):
        os.mkdir(mnt / "t")
        for round_ in range(rounds):
            # unbuffered: a buffered file would flush (and fail) again at close
            with open(tiny / "ballast", "wb", buffering=0) as ballast:
                for _ in range(16):  # up to 1 MiB, as much as fits
                    try:
                        ballast.write(b"\xff" * (1 << 16))
                    except OSError as e:
                        assert e.errno == errno.ENOSPC, e
                        break
            fd = os.open(mnt / "t/0/append", os.O_WRONLY | os.O_APPEND)
            try:
                while True:
                    lines = [
                        b"r%d-%d-" % (round_, seq + i) + b"y" * (i * 37 % 900) for i in range(40)
                    ]
                    try:
                        os.write(fd, b"".join(line + b"\n" for line in lines))
                    except OSError as e:
                        assert e.errno == errno.ENOSPC, e
                        failures += 1
                        break
                    acked += lines
                    seq += len(lines)
                # nearly full: a further write fits whole or fails the same way, adding nothing
                for size in (20000, 5000, 100, 1, 20000):
                    try:
                        os.write(fd, b"z" * size + b"\n")
                        acked.append(b"z" * size)
                    except OSError as e:
                        assert e.errno == errno.ENOSPC, e
                        attempts_after_full += 1
                stream = (mnt / "t/0/stream").read_bytes()
                assert stream == b"".join(line + b"\n" for line in acked), "partial write kept"
                (tiny / "ballast").unlink()  # free space: appends work again
                os.write(fd, b"after-%d\n" % round_)
                acked.append(b"after-%d" % round_)
                os.fsync(fd)
            finally:
                os.close(fd)
        state = (mnt / "t/0/state").read_text()
        assert f'"next_offset": {len(acked)}' in state
    assert check(data) == []
    with Store(data, read_only=True) as store:
        log = store.log("t", 0)
        assert log.next_offset == len(acked)
        got = [r.value for r in log.scan()]
    assert got == acked
    report(
        "enospc",
        fill_rounds=rounds,
        enospc_errors=failures + attempts_after_full,
        records_checked=len(acked),
        partial_records=0,
    )
