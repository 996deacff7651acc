"""What a partition has not made durable yet, and the flushes that do.

A flush is three steps, so that its fsyncs can run in another thread while
appends go on (the partition itself is touched only by its owner's thread):

1. `Unflushed.ticket`, on the owner's thread: pending index entries are
   written and the descriptors to fsync duplicated into a `FlushTicket`,
   with the offset and the count of records that become durable;
2. `FlushTicket.sync`, on any thread: fdatasync of each file (fsync of the
   directory) in order, stopping at the first failure, which the ticket
   keeps; every descriptor is closed;
3. `Log.complete_flush`, on the owner's thread: the recovery point advances,
   or, if the fsync failed, the partition goes offline (failure.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..storage import LogSegment, sync_fd


class FlushTicket:
    """What one flush must fsync (duplicated descriptors: safe to use in a
    thread), what becomes durable once it has, and how the fsync went."""

    def __init__(self, fds: list[int], next_offset: int, messages: int) -> None:
        self.fds = fds
        self.next_offset = next_offset  # everything below it is durable after the sync
        self.messages = messages  # the unflushed records it covers
        self.error: OSError | None = None  # the fsync's failure, once synced

    def sync(self, fsync: Callable[[int], None] = sync_fd) -> None:
        """fsync every descriptor in order, then close them all. The first
        failure stops the fsyncs and is kept in `error`, not raised: the
        partition decides what it means (`Log.complete_flush`). Retrying is
        no use: the kernel may have dropped the pages it could not write."""
        try:
            for fd in self.fds:
                fsync(fd)
        except OSError as e:
            self.error = e
        finally:
            for fd in self.fds:
                os.close(fd)
            self.fds = []


class Unflushed:
    """A partition's appends since its last flush: the segments written to,
    whether its directory changed (a segment created or removed), how many
    records, and when the last flush completed."""

    def __init__(self, now_ms: int) -> None:
        self.segments: dict[int, LogSegment] = {}  # by base offset
        self.directory = False
        self.messages = 0
        self.last_flush_ms = now_ms

    def appended(self, segment: LogSegment, messages: int = 0) -> None:
        """``segment`` was written to (``messages`` more records)."""
        self.segments[segment.base_offset] = segment
        self.messages += messages

    def forget(self, segment: LogSegment) -> None:
        """``segment`` left the log: there is nothing of it to flush."""
        self.segments.pop(segment.base_offset, None)

    def ticket(self, directory: str | os.PathLike, next_offset: int) -> FlushTicket:
        """Step 1: write pending index entries, duplicate the descriptors to
        fsync (the directory's too, if it changed) and start over.

        Raises:
            OSError: writing an index or opening a descriptor failed; nothing
                changed (the descriptors opened so far are closed).
        """
        fds: list[int] = []
        try:
            for segment in self.segments.values():
                fds += [os.dup(fd) for fd in segment.sync_fds()]
            if self.directory:
                fds.append(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        self.segments.clear()
        self.directory = False
        return FlushTicket(fds, next_offset, self.messages)

    def completed(self, ticket: FlushTicket, now_ms: int) -> None:
        """Step 3, for a ticket whose sync succeeded."""
        self.messages = max(0, self.messages - ticket.messages)
        self.last_flush_ms = now_ms
