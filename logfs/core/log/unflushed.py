"""What a partition has not made durable yet, and the flushes that do.

A flush is three steps, so that its fsyncs can run in another thread while
appends go on (the partition itself is touched only by its owner's thread):

1. `Unflushed.ticket`, on the owner's thread: pending index entries are
   written and the paths of the files to fsync put in a `FlushTicket`,
   with the offset and the count of records that become durable;
2. `FlushTicket.sync`, on any thread: each file opened in turn and
   fdatasync'd (the directory fsync'd), stopping at the first failure,
   which the ticket keeps. One descriptor at a time, whatever the number of
   segments written since the last flush (``segment.bytes=14`` rolls a
   segment per record): the segments' own descriptors are under the budget
   of core/storage/descriptors.py and may be closed already. Linux reports
   a writeback error not yet seen to a descriptor opened after it (since
   4.16), so a failed write-back is not missed by opening the file again.
   A file removed meanwhile (retention, a cleaning's swap) has nothing
   left to make durable and is skipped; one that cannot be opened (EMFILE,
   ENFILE, EACCES...) stops the sync without an fsync failure: nothing is
   known lost, so the partition stays online;
3. `LogFlushing.complete_flush`, on the owner's thread: the recovery point advances,
   or, if the fsync failed, the partition goes offline (failure.py); if a
   file could not be opened (or, in step 1, an index written cleanly), what
   the ticket held is unflushed again and `Unflushed.failure` says why
   (the partition's ``state``, the root's health, the log), until a flush
   succeeds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from ..errors import describe
from ..storage import LogSegment, sync_fd

logger = logging.getLogger(__name__)


class FlushTicket:
    """What one flush must fsync (paths, or descriptors the ticket owns: safe
    to use in a thread), what becomes durable once it has, and how the fsync
    went."""

    def __init__(self, fds: list[int | str], next_offset: int, messages: int) -> None:
        self.fds = fds
        self.next_offset = next_offset  # everything below it is durable after the sync
        self.messages = messages  # the unflushed records it covers
        self.error: OSError | None = None  # the fsync's failure, once synced
        self.open_error: OSError | None = None  # a file could not be opened: not synced
        self.segments: dict[int, LogSegment] = {}  # what `Unflushed.restore` puts back
        self.directory = False

    def sync(self, fsync: Callable[[int], None] = sync_fd) -> None:
        """fsync every descriptor in order, then close them all. The first
        failure stops the fsyncs and is kept in `error`, not raised: the
        partition decides what it means (`Log.complete_flush`). Retrying is
        no use: the kernel may have dropped the pages it could not write."""
        try:
            for fd in self.fds:
                if isinstance(fd, str):
                    if not self._sync_path(fd, fsync):
                        break
                else:
                    fsync(fd)
        except OSError as e:
            self.error = e
        finally:
            for fd in self.fds:
                if not isinstance(fd, str):
                    os.close(fd)
            self.fds = []

    def _sync_path(self, path: str, fsync: Callable[[int], None]) -> bool:
        """fsync the file at ``path``; False if it could not be opened."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        except OSError as e:
            self.open_error = e
            return False
        try:
            fsync(fd)
        finally:
            os.close(fd)
        return True


class Unflushed:
    """A partition's appends since its last flush: the segments written to,
    whether its directory changed (a segment created or removed), how many
    records, and when the last flush completed."""

    def __init__(self, now_ms: int) -> None:
        self.segments: dict[int, LogSegment] = {}  # by base offset
        self.directory = False
        self.messages = 0
        self.last_flush_ms = now_ms
        self.failure: str | None = None  # why the last flush could not run

    def appended(self, segment: LogSegment, messages: int = 0) -> None:
        """``segment`` was written to (``messages`` more records)."""
        self.segments[segment.base_offset] = segment
        self.messages += messages

    def directory_changed(self) -> None:
        """A segment's files were created or removed: the directory is synced too."""
        self.directory = True

    def forget(self, segment: LogSegment) -> None:
        """``segment`` left the log: there is nothing of it to flush."""
        self.segments.pop(segment.base_offset, None)

    def ticket(self, directory: str | os.PathLike, next_offset: int) -> FlushTicket:
        """Step 1: write pending index entries, list the files to fsync (the
        directory too, if it changed) and start over.

        Raises:
            OSError: writing an index failed; nothing changed.
        """
        fds: list[int | str] = []
        for segment in self.segments.values():
            fds += segment.sync_paths()
        if self.directory:
            fds.append(os.fspath(directory))
        ticket = FlushTicket(fds, next_offset, self.messages)
        ticket.segments, ticket.directory = dict(self.segments), self.directory
        self.segments.clear()
        self.directory = False
        return ticket

    def failed(self, name: str, error: OSError, ticket: FlushTicket | None = None) -> None:
        """A flush of ``name`` could not run (``error``: clean, nothing lost);
        what ``ticket`` held is to flush again. Logged when it starts."""
        if ticket is not None:
            for base, segment in ticket.segments.items():
                self.segments.setdefault(base, segment)
            self.directory |= ticket.directory
        if self.failure is None:
            logger.error("flushing %s cannot run: %s; retried", name, describe(error))
        self.failure = describe(error)

    def completed(self, ticket: FlushTicket, now_ms: int) -> None:
        """Step 3, for a ticket whose sync succeeded."""
        self.messages = max(0, self.messages - ticket.messages)
        self.last_flush_ms = now_ms
        if self.failure is not None:
            logger.info("flushing works again (after %s)", self.failure)
            self.failure = None
