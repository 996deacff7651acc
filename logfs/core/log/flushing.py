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
3. `Log.complete_flush`, on the owner's thread: the recovery point advances,
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

from ..config import flush_due
from ..errors import describe
from ..storage import LogSegment, sync_fd
from .failure import CLEAN_WRITE_ERRORS

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


class LogFlushing:
    """The flushing half of `Log` (partition.py holds the fields it uses): the three
    steps above as the partition's methods, and what the flusher asks of it."""

    @property
    def unflushed_messages(self) -> int:
        """Records appended and not yet fsynced."""
        return self._unflushed.messages

    @property
    def flush_failure(self) -> str | None:
        """Why the last flush could not run (the partition stays online)."""
        return self._unflushed.failure

    @property
    def last_flush_ms(self) -> int:
        """When the last flush completed (the log's clock)."""
        return self._unflushed.last_flush_ms

    def flush_due(self, now: int | None = None) -> bool:
        return self.failure is None and flush_due(
            self.config,
            unflushed=self._unflushed.messages,
            last_flush_ms=self._unflushed.last_flush_ms,
            now_ms=self.clock() if now is None else now,
        )

    def prepare_flush(self) -> FlushTicket:
        """Step 1 of a flush: write pending index entries and name the files to
        fsync, so that `FlushTicket.sync` can run in a thread while appends go on.

        Raises:
            LogFailedError: the partition is offline.
            OSError: writing the index entries failed (the partition goes
                offline unless the error is a clean ENOSPC).
        """
        self._failure.require_online()
        try:
            return self._unflushed.ticket(self.dir, self.next_offset)
        except OSError as e:
            if e.errno not in CLEAN_WRITE_ERRORS:
                self.fail("writing an index before an fsync", e)
            else:
                self._unflushed.failed(f"{self.topic}-{self.partition}", e)
            raise

    def complete_flush(self, ticket: FlushTicket) -> None:
        """Step 3: advance the recovery point to what the synced ticket made
        durable. If its fsync failed the partition goes offline instead.

        Raises:
            OSError: the ticket's fsync failed.
            LogFailedError: the partition went offline meanwhile; the recovery
                point stays where it was.
        """
        if ticket.error is not None:
            self.fail("fsync", ticket.error)
            raise ticket.error
        if ticket.open_error is not None:  # nothing lost: flushed again later
            self._unflushed.failed(f"{self.topic}-{self.partition}", ticket.open_error, ticket)
            raise ticket.open_error
        self._failure.require_online()
        self.recovery_point = max(self.recovery_point, ticket.next_offset)
        self._unflushed.completed(ticket, self.clock())

    def flush(self) -> None:
        """fsync everything appended so far (in this thread) and advance the
        recovery point: the three steps above."""
        ticket = self.prepare_flush()
        ticket.sync()
        self.complete_flush(ticket)
