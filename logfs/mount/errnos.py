"""Errors as the mount's clients see them: the one table from store errors to
errnos (core/client/names.py, with the framing errors added), and
`fuse_errors`, which every request handler wears.

Only a `pyfuse3.FUSEError` may leave a handler: anything else would reach
libfuse as a crash. Clients never see ``EINTR`` or an errno at or above 512
(those make callers retry forever or hang).
"""

from __future__ import annotations

import errno
import functools
import logging

import pyfuse3

from ..core.client import names
from ..core.errors import CorruptIndexError, CorruptRecordError, InvalidBatchError, LogfsError
from .framing import FileTooLargeError, FramingError, TooLargeError

logger = logging.getLogger(__name__)

# The one table from errors to errnos (names.py, shared with the writers that
# read errnos back), and the framing errors the mount's append files add.
ERRNOS: dict[type[BaseException], int] = {
    **names.ERRNOS,
    TooLargeError: errno.EMSGSIZE,
    FileTooLargeError: errno.EFBIG,
    FramingError: errno.EINVAL,
}


def fail(code: int) -> pyfuse3.FUSEError:
    """The error a handler raises to answer ``code``."""
    return pyfuse3.FUSEError(code)


def errno_for(exc: BaseException) -> int:
    """The errno a client sees for ``exc``; never EINTR, never >= 512."""
    for cls in type(exc).__mro__:
        if cls in ERRNOS:
            return ERRNOS[cls]
    if isinstance(exc, OSError) and exc.errno and 0 < exc.errno < 512 and exc.errno != errno.EINTR:
        return exc.errno
    logger.exception("unexpected error in a FUSE handler")
    return errno.EIO


# What the mount answers while its partitions are being recovered: the root's
# attributes (monitoring reads user.logfs.health); everything else waits.
WHILE_RECOVERING = {"getattr", "getxattr", "listxattr", "statfs"}


def fuse_errors(handler):
    """Turn every exception a handler raises into a FUSEError. Requests wait
    until the store is recovered (`Operations.ready`), but for the root's
    attributes."""
    early = handler.__name__ in WHILE_RECOVERING

    @functools.wraps(handler)
    async def wrapper(self, *args):
        if not self.ready.is_set():
            root = handler.__name__ == "statfs" or (args and args[0] == pyfuse3.ROOT_INODE)
            if not (early and root):
                await self.ready.wait()
        try:
            return await handler(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as e:
            if isinstance(e, (CorruptRecordError, CorruptIndexError)):
                # bit rot below the recovery point is only found when read: say where
                logger.error("%s%r: %s (answering EIO)", handler.__name__, args, e)
            elif isinstance(e, InvalidBatchError):
                # the writer only sees EINVAL: the daemon's log says what was wrong
                logger.warning("%s refused a batch: %s", handler.__name__, e)
            elif not isinstance(e, LogfsError):
                logger.debug("%s%r failed: %r", handler.__name__, args, e)
            raise pyfuse3.FUSEError(errno_for(e)) from None

    return wrapper
