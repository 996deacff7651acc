"""The flushing part of a partition log: the three steps of a flush (unflushed.py)
as the partition's, and what the flusher asks of it."""

from __future__ import annotations

import logging

from ..config import flush_due, flush_messages_reached
from ..storage.logfile import mark_end
from .failure import CLEAN_WRITE_ERRORS
from .state import PartitionState
from .unflushed import FlushTicket

logger = logging.getLogger(__name__)


class LogFlushing:
    """The flushing part of `Log` (partition.py), over its `PartitionState`: the
    three steps above as the partition's, and what the flusher asks of it."""

    def __init__(self, state: PartitionState) -> None:
        self.state = state

    @property
    def unflushed_messages(self) -> int:
        """Records appended and not yet fsynced."""
        return self.state.unflushed.messages

    @property
    def flush_failure(self) -> str | None:
        """Why the last flush could not run (the partition stays online)."""
        return self.state.unflushed.failure

    @property
    def last_flush_ms(self) -> int:
        """When the last flush completed (the log's clock)."""
        return self.state.unflushed.last_flush_ms

    def flush_messages_reached(self, more: int = 0) -> bool:
        """Whether flush.messages records would be unflushed once ``more`` are
        appended: a write() that reaches it returns only once they are durable,
        so the mount's one-line paths leave such a write to the general path."""
        state = self.state
        return flush_messages_reached(state.config, unflushed=state.unflushed.messages + more)

    def flush_due(self, now: int | None = None) -> bool:
        state = self.state
        return state.failure.reason is None and flush_due(
            state.config,
            unflushed=state.unflushed.messages,
            last_flush_ms=state.unflushed.last_flush_ms,
            now_ms=state.clock() if now is None else now,
        )

    def prepare_flush(self) -> FlushTicket:
        """Step 1 of a flush: write pending index entries and name the files to
        fsync, so that `FlushTicket.sync` can run in a thread while appends go on.

        Raises:
            LogFailedError: the partition is offline, or goes offline now: its
                active segment's file was removed or replaced from outside.
            OSError: writing the index entries failed (the partition goes
                offline unless the error is a clean ENOSPC).
        """
        state = self.state
        state.failure.require_online()
        self.check_files()  # an fsync of a lost file would make nothing durable
        state.failure.require_online()
        try:
            return state.unflushed.ticket(state.dir, state.next_offset)
        except OSError as e:
            if e.errno not in CLEAN_WRITE_ERRORS:
                state.fail("writing an index before an fsync", e)
            else:
                state.unflushed.failed(state.name, e)
            raise

    def check_files(self) -> bool:
        """Whether the active segment's ``.log`` is still the file at its path.
        If it was removed, renamed away or replaced from outside, the partition
        goes offline now with that reason, and an empty ``.log`` at the next
        offset (`mark_end`) keeps the next open from handing out again the
        offsets appended to the lost file. False once offline.
        """
        state = self.state
        if state.failure.reason is not None:
            return False
        lost = state.segments[-1].file_lost() if state.segments else None
        if lost is None:
            return True
        state.fail("checking the active segment's file", lost)
        try:
            mark_end(state.dir, state.next_offset)
        except OSError as e:  # the directory itself may be gone: loading.py's floor is left
            logger.warning("%s: no mark left at offset %d: %s", state.name, state.next_offset, e)
        return False

    def complete_flush(self, ticket: FlushTicket) -> None:
        """Step 3: advance the recovery point to what the synced ticket made
        durable. If its fsync failed the partition goes offline instead.

        Raises:
            OSError: the ticket's fsync failed.
            LogFailedError: the partition went offline meanwhile; the recovery
                point stays where it was.
        """
        state = self.state
        if ticket.error is not None:
            state.fail("fsync", ticket.error)
            raise ticket.error
        if ticket.open_error is not None:  # nothing lost: flushed again later
            state.unflushed.failed(state.name, ticket.open_error, ticket)
            raise ticket.open_error
        state.failure.require_online()
        state.recovery_point = max(state.recovery_point, ticket.next_offset)
        state.unflushed.completed(ticket, state.clock())

    def flush(self) -> None:
        """fsync everything appended so far (in this thread) and advance the
        recovery point: the three steps above."""
        ticket = self.prepare_flush()
        ticket.sync()
        self.complete_flush(ticket)
