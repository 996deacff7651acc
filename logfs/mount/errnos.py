"""Errors as the mount's clients see them: each error's errno from the one
table (core/errors.py), and `fuse_errors`, which every request handler wears.

Only a `pyfuse3.FUSEError` may leave a handler: anything else would reach
libfuse as a crash. Clients never see ``EINTR`` or an errno at or above 512
(those make callers retry forever or hang).

The floor under the mount's rooms: the request layer, the tree and the open
files all answer through it (`fail`), and it imports none of them.
"""

from __future__ import annotations

import errno
import functools
import logging
import time
from typing import Protocol

import pyfuse3

from ..core.client import names
from ..core.errors import CorruptIndexError, CorruptRecordError, InvalidBatchError, LogfsError

logger = logging.getLogger(__name__)


class Metrics(Protocol):
    """What the mount tells the daemon's metrics (logfs/metrics's `Metrics`), which
    the daemon hands it: the mount never imports them."""

    def fuse_request(self, operation: str, kind: str, seconds: float, code: int = 0) -> None:
        """A request answered in ``seconds``, about a ``kind`` of file, with errno ``code``."""

    def written(self, topic: str, size: int, general: bool = True) -> None:
        """A ``write()`` of ``size`` bytes to one of ``topic``'s append files."""

    def line_written(self, topic: str, size: int, seconds: float) -> None:
        """A one-line ``write()`` taken before pyfuse3's dispatch (its one record), in
        ``seconds``."""

    def appended(self, topic: str, records: int) -> None:
        """``records`` records appended to ``topic``."""

    def forget_topic(self, topic: str) -> None:
        """``topic`` was deleted."""


def fail(code: int) -> pyfuse3.FUSEError:
    """The error a handler raises to answer ``code``."""
    return pyfuse3.FUSEError(code)


class RateLimit:
    """At most ``burst`` messages at once and ``per_second`` on average
    (a token bucket); `allow` says whether to log one now, and how many were
    suppressed since the last one logged (said in that one)."""

    def __init__(self, per_second: float = 1.0, burst: int = 10) -> None:
        self.per_second, self.burst = per_second, burst
        self.tokens = float(burst)
        self.last = time.monotonic()
        self.suppressed = 0

    def allow(self) -> tuple[bool, int]:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.per_second)
        self.last = now
        if self.tokens < 1:
            self.suppressed += 1
            return False, 0
        self.tokens -= 1
        suppressed, self.suppressed = self.suppressed, 0
        return True, suppressed


# Rejected requests are logged at most 10 at once and 1 a second on average:
# a client sending bad requests in a loop cannot fill DATA's disk with the log.
# Errors the mount found itself (corruption, a failed request) have a limit of
# their own, so that a flood of bad requests never hides them.
REJECTED = RateLimit()
FAILED = RateLimit()


def log_rejected(
    level: int, message: str, *args, exc_info: bool = False, limit: RateLimit = REJECTED
) -> None:
    """Log a rejected request, within ``limit``."""
    allowed, suppressed = limit.allow()
    if not allowed:
        return
    if suppressed:
        message += " (%d similar messages suppressed)"
        args = (*args, suppressed)
    logger.log(level, message, *args, exc_info=exc_info)


def errno_for(exc: BaseException) -> int:
    """The errno a client sees for ``exc``: a `LogfsError`'s from the table,
    an OSError's own; never EINTR, never >= 512."""
    if isinstance(exc, LogfsError):
        return exc.errno
    if isinstance(exc, OSError) and exc.errno and 0 < exc.errno < 512 and exc.errno != errno.EINTR:
        return exc.errno
    log_rejected(logging.ERROR, "unexpected error in a FUSE handler", exc_info=True, limit=FAILED)
    return errno.EIO


# What the mount answers while its partitions are being recovered: the root's
# attributes (monitoring reads user.logfs.health) and its ``.state`` file, looked
# up, opened, read and closed; everything else waits.
WHILE_RECOVERING = {"getattr", "getxattr", "listxattr", "statfs"}
STATE_REQUESTS = {"lookup", "getattr", "open", "read", "flush", "_release"}
STATE_NAME = names.MOUNT_STATE.encode()


def answered_early(ops, name: str, args: tuple) -> bool:
    """Whether request ``name`` of the mount's handlers ``ops`` is answered while
    its partitions are recovered (`WHILE_RECOVERING`)."""
    if name == "statfs":
        return True
    if not args:
        return False
    if name in WHILE_RECOVERING and args[0] == pyfuse3.ROOT_INODE:
        return True
    if name not in STATE_REQUESTS:
        return False
    if name == "lookup":
        return args[0] == pyfuse3.ROOT_INODE and args[1] == STATE_NAME
    if name in ("read", "flush", "_release"):
        return args[0] in ops.files  # only .state can have been opened before now
    node = ops.inodes.get(args[0])
    return node is not None and node.shows == "mount"


def fuse_errors(handler):
    """Turn every exception a handler raises into a FUSEError. Requests wait
    until the store is recovered (`Operations.ready`), but for the root's
    attributes and ``.state`` (`answered_early`). With the daemon's metrics
    (`Operations.metrics`), each request's time and errno are told to them."""
    name = handler.__name__
    operation = name.lstrip("_")

    @functools.wraps(handler)
    async def wrapper(self, *args):
        if not self.ready.is_set() and not answered_early(self, name, args):
            await self.ready.wait()
        metrics = self.metrics
        if metrics is None:
            try:
                return await handler(self, *args)
            except pyfuse3.FUSEError:
                raise
            except Exception as e:
                raise pyfuse3.FUSEError(failed(name, args, e)) from None
        # The daemon's metrics: the request's time (after the recovery), its kind of
        # file and its errno, asked of the handler's owner (`Operations.kind_of`).
        started, code = time.perf_counter(), 0
        try:
            return await handler(self, *args)
        except pyfuse3.FUSEError as e:
            code = e.errno
            raise
        except Exception as e:
            code = failed(name, args, e)
            raise pyfuse3.FUSEError(code) from None
        finally:
            kind = self.kind_of(name, args)
            metrics.fuse_request(operation, kind, time.perf_counter() - started, code)

    return wrapper


def failed(name: str, args: tuple, e: Exception) -> int:
    """The errno that answers request ``name`` failing with ``e``, logged as it deserves."""
    if isinstance(e, pyfuse3.FUSEError):
        return e.errno
    if isinstance(e, (CorruptRecordError, CorruptIndexError)):
        # bit rot below the recovery point is only found when read: say where
        log_rejected(logging.ERROR, "%s%r: %s (answering EIO)", name, args, e, limit=FAILED)
    elif isinstance(e, InvalidBatchError):
        # the writer only sees EINVAL: the daemon's log says what was wrong
        log_rejected(logging.WARNING, "%s refused a batch: %s", name, e)
    elif not isinstance(e, LogfsError):
        logger.debug("%s%r failed: %r", name, args, e)
    return errno_for(e)
