"""What every open file of the mount is, and what it reaches of the mount.

`OpenFile` is one open() of a node: the FUSE handlers find it by file handle
and hand it every read, write, flush and fsync; a subclass per kind
(generated.py, appendfile.py, buffered.py, and the tree's ``groups/`` files)
says what that kind does, and this base answers the errno of "not this kind"
for the rest, so the handlers never ask which kind a file is.

`Shared` is what an open file reaches of the mount it was opened in: the
tree's `View` is one. Written as a protocol, so that the open files need
nothing of the tree room above them.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Protocol

import pyfuse3

from ...core.log import FromStream, Log, Store
from ..errnos import fail
from .memory import Pool


class Shared(Protocol):
    """The mount's state an open file uses (`View` in the tree room)."""

    store: Store
    read_ahead: Pool  # shared by the stream readers
    partial_lines: Pool  # the partial lines all open append files hold

    def records_appended(self, topic: str, count: int) -> None:
        """``count`` records were appended to ``topic`` (the daemon's metrics)."""

    def refresh_keys(self, topic: str) -> None:
        """Appended to a compacted ``topic``: the kernel forgets its changed keys' attributes."""

    def key_appended(self, path: tuple[str, ...]) -> None:
        """``keys/<name>`` at ``path`` was appended to (or failed to be): no longer pending."""

    async def count_streams(self, log: Log, stream: FromStream | None = None) -> None:
        """Count the stream bytes of ``log``'s segments loaded from disk."""

    async def sync(self, log: Log) -> None:
        """Make ``log`` durable."""

    async def sync_due(self, logs: Iterable[Log]) -> None:
        """Make durable those of ``logs`` that flush.messages says must be."""


class OpenFile:
    """One open() of a node: what it holds until release().

    The class attributes are the `pyfuse3.FileInfo` flags it is opened with
    (an instance may set its own): ``direct_io`` sends every read and write to
    the daemon as-is, ``keep_cache`` lets the page cache keep the file across
    opens, ``nonseekable`` refuses lseek.
    """

    direct_io = True
    keep_cache = True
    nonseekable = False

    def info(self, fh: int) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(
            fh=fh,
            direct_io=self.direct_io,
            keep_cache=self.keep_cache,
            nonseekable=self.nonseekable,
        )

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        raise fail(errno.EBADF)

    async def write(self, offset: int, data: bytes) -> None:
        raise fail(errno.EBADF)

    async def flush(self) -> None:
        """close(): what the file still holds takes effect; errors reach close()."""

    async def fsync(self) -> None:
        """fsync(): returns once what was written through this file is durable."""

    def truncate(self, size: int) -> None:
        raise fail(errno.EBADF)

    async def release(self) -> None:
        """The last close of the file: as a close, unless a kind holds more."""
        await self.flush()

    def forget(self) -> None:
        """Dropped by the mount (after `release`, or without it once its topic
        is gone): what it took of the mount's shared budgets goes back."""

    def unmount(self) -> None:
        """At unmount: what must not be lost of what this file holds."""
