"""``preallocate=true``: a new segment's disk space reserved whole, as Kafka's
``preallocate`` does, so that a segment's blocks lie together and a full disk
shows when the segment starts, not in the middle of it.

Kafka grows the ``.log`` file to ``segment.bytes`` and trims it when the
segment rolls; logfs reserves the blocks without changing the file's size
(``fallocate(FALLOC_FL_KEEP_SIZE)``), so that the file stays exactly its
batches (readers, recovery and Kafka's tools see nothing else) and a crash
leaves no zeros to cut. When the segment rolls the reservation past its end
is given back (``ftruncate`` to its size). A file system that cannot reserve
(EOPNOTSUPP) makes this a no-op, said once in the log.

Without it, a segment written in bulk (writes of 64 KiB or more) has the
blocks of its next few writes reserved the same way, at most 8 MiB past its
end (`SegmentTail.reserve_ahead`, books.pyx). Every roll gives back whatever
lies past the segment's end with that ``ftruncate``, a reservation left by a
crash included.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os

logger = logging.getLogger(__name__)

FALLOC_FL_KEEP_SIZE = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_unsupported_said = False


def reserve(fd: int, size: int) -> bool:
    """Reserve ``size`` bytes of disk for the file without changing its size;
    whether it was done.

    Raises:
        OSError: ENOSPC (no room for the segment) or another I/O error.
    """
    global _unsupported_said
    if _libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EOPNOTSUPP, errno.ENOSYS):
        if not _unsupported_said:
            logger.info("preallocate: this file system cannot reserve space; ignored")
            _unsupported_said = True
        return False
    raise OSError(error, os.strerror(error))


def release(fd: int, size: int) -> None:
    """Give back what was reserved past ``size``, the file's length."""
    os.ftruncate(fd, size)
