"""The writer lock of a data directory, flock'd exclusively by the one process that
writes DATA (a mount's daemon, or a program holding a writable `Store`):

- on DATA's directory itself, through a descriptor of it: the lock that counts, since no
  one can remove it from under the holder (a new directory of the same name is another
  data directory, with none of the old one's files);
- on ``DATA/.lock`` too, for tools that look for that file (and for older writers that
  take only it).

Both are taken before anything is read, the directory's first. The kernel drops them
when that process dies, however it dies. Removing ``.lock`` while a writer runs lets a
second process create and lock a new ``.lock``, never the directory: it is refused.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..errors import DataDirBusyError

LOCK_FILE = ".lock"


def lock_data_dir(path: Path, timeout: float) -> tuple[int, int]:
    """Take DATA's locks, waiting up to ``timeout`` seconds; their descriptors, the
    directory's and ``.lock``'s (close both to release them).

    Raises:
        DataDirBusyError: another process held one of them all that time.
    """
    fds = [os.open(path, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        fds.append(os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644))
        deadline = time.monotonic() + timeout
        for fd in fds:
            _flock(fd, path, deadline)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds[0], fds[1]


def _flock(fd: int, path: Path, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise DataDirBusyError(
                    f"{path} is in use by another logfs process (a mount or a writer)"
                ) from None
            time.sleep(0.05)
