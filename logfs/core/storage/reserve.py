"""Blocks of DATA held back for the writes that must succeed on a full disk.

``DATA/logfs-reserve`` is `RESERVE_BYTES` of allocated blocks (posix_fallocate,
else zeros written: never a sparse file), made when a writer opens DATA. A
write that must work even once appends have filled the disk (a topic's
settings file: the way to shorten its retention) that fails with ENOSPC or
EDQUOT gives the reserve back (unlinks it) and is tried once more. The reserve
is made again when there is room: `make` runs at every checkpoint while it is
missing, and gives up at once, leaving nothing, on a disk still full.

Crash protocol: the file is made under its own name and never fsynced, so a
crash may leave it short or gone; `make` finds a file shorter than
`RESERVE_BYTES`, or none, and makes it again. Nothing else is written to it or
read from it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)

RESERVE_FILE = "logfs-reserve"
RESERVE_BYTES = 256 * 1024  # a settings file and its directory's growth, many times over
FULL = frozenset({errno.ENOSPC, errno.EDQUOT})

T = TypeVar("T")


def allocate(fd: int) -> None:
    """Blocks for `RESERVE_BYTES` at ``fd``: allocated by the file system when it
    can (zeros written might be compressed away), else written."""
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.write(fd, bytes(RESERVE_BYTES))


class Reserve:
    """The reserve file of one data directory, for its one writer."""

    def __init__(self, data: str | os.PathLike) -> None:
        self.path = os.path.join(data, RESERVE_FILE)
        self.held = False  # the whole file is on disk
        self.given_back = 0  # how many times it saved a write

    def make(self) -> bool:
        """Make the reserve whole if it is not; False on a full disk, leaving no
        partial file."""
        if self.held:
            return True
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_size >= RESERVE_BYTES:
                self.held = True
                return True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                allocate(fd)  # no fsync: a crash's short file is made again (below)
            finally:
                os.close(fd)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            if e.errno not in FULL:
                logger.warning("%s: not made: %s", self.path, e)
            return False
        self.held = True
        return True

    def spend(self, write: Callable[[], T]) -> T:
        """``write()``, tried once more with the reserve given back if the disk
        is full (ENOSPC, EDQUOT) and the reserve was there to give."""
        try:
            return write()
        except OSError as e:
            if e.errno not in FULL or not self.give_back():
                raise
        logger.warning("the disk of %s is full: its reserve given back for a write", self.path)
        return write()

    def give_back(self) -> bool:
        """Unlink the reserve; whether there was one to free."""
        self.held = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        self.given_back += 1
        return True
