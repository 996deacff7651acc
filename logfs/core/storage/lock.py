"""The writer lock of a data directory: ``DATA/.lock``, flock'd exclusively by the one
process that writes DATA (a mount's daemon, or a program holding a writable `Store`).
The kernel drops it when that process dies, however it dies."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..errors import DataDirBusyError

LOCK_FILE = ".lock"


def lock_data_dir(path: Path, timeout: float) -> int:
    """Take DATA's lock, waiting up to ``timeout`` seconds; its descriptor (close it to
    release the lock).

    Raises:
        DataDirBusyError: another process held it all that time.
    """
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise DataDirBusyError(
                    f"{path} is in use by another logfs process (a mount or a writer)"
                ) from None
            time.sleep(0.05)
