"""An open ``append``, ``append.bin`` or ``append.batches``: framing state and
receipts.

Each open file frames what is written to it on its own (framing.py), so
concurrent writers never interleave inside a record. A receipt is one line
``<partition> <first offset> <last offset>\\n`` per append made through the
open file; they are kept only when it was opened for reading too
(``O_RDWR``), and reading returns and consumes them.
"""

from __future__ import annotations

import errno
import os

from ...core.log import Log
from ..errnos import fail
from .framing import (
    LENGTH_BYTES,
    Batches,
    BatchFramer,
    Framed,
    Frames,
    LengthFramer,
    LineFramer,
    Lines,
)
from .openfile import OpenFile, Shared

# At most this many bytes of unread receipts are kept per open append file:
# a reader of receipts reads them as it goes, others never open for reading.
MAX_RECEIPT_BYTES = 1 << 20


class AppendFile(OpenFile):
    """Appends to ``partition`` of ``topic`` (None: the topic's append file,
    records spread over its partitions), framed by ``framer``.

    Held per open file: the framer's unterminated tail (its bytes taken from
    the mount's budget of partial lines, `Shared.partial_lines`: a write()
    that would hold more than is left fails with ENOBUFS, nothing appended) and
    the unread receipts.
    """

    def __init__(
        self,
        view: Shared,
        topic: str,
        partition: int | None,
        framer: LineFramer | LengthFramer | BatchFramer,
        flags: int,
    ) -> None:
        self.view = view
        self.topic = topic
        self.partition = partition
        self.framer = framer
        reading = flags & os.O_ACCMODE != os.O_WRONLY
        self.receipts = bytearray() if reading else None
        # Receipts are a stream, not a file: without lseek, bash's `read` (on
        # `exec 3<>append`) takes one byte at a time instead of reading ahead and
        # seeking back. O_APPEND opens (Python "a+") stay seekable: Python's
        # buffered "+" modes refuse a file that cannot seek.
        self.nonseekable = reading and not flags & os.O_APPEND
        self.held = 0  # bytes of the framer's tail taken from view.partial_lines

    async def read(self, offset: int, size: int) -> bytes:
        """The receipts not read yet, at most ``size`` bytes of them."""
        if not self.receipts:
            return b""
        out = bytes(self.receipts[:size])
        del self.receipts[:size]
        return out

    async def write(self, offset: int, data: bytes) -> None:
        """Append the records ``data`` completes. The framer's new pending tail
        is committed only once they are in the log: a rejected write() leaves
        the file as it was."""
        if self.write_now(data):
            return
        self._append_fed(data)
        await self.appended()

    def take(self, data: memoryview, end: int | None = None) -> bool:
        """`write` of a request's bytes where the daemon received them, before
        pyfuse3 dispatches it (mount/fuse/_lines.pyx): ``data`` is valid only
        while this runs. ``end``: where the text after its last newline starts
        (line framing). False, nothing done, for a write() that flush.messages
        makes wait for an fsync, which `write` takes."""
        if any(log.flush_messages_reached(len(data)) for log in self.logs()):
            return False
        self._append_fed(data, end)
        self.view.refresh_keys(self.topic)
        return True

    def _append_fed(self, data: bytes | memoryview, end: int | None = None) -> None:
        """The records ``data`` completes appended, then the framer's new tail kept."""
        framer = self.framer
        framed, tail = framer.feed(data) if end is None else framer.feed(data, end)
        before = self.hold(len(tail))
        try:
            self.append(framed)
        except BaseException:
            self.hold(before)
            raise
        framer.pending = tail

    def hold(self, size: int) -> int:
        """Hold ``size`` bytes of tail from the mount's budget of partial lines
        (ENOBUFS, nothing changed, if it has not that many left); what was
        held before."""
        before, budget = self.held, self.view.partial_lines
        if size > before:
            granted = budget.take(size - before)
            if granted < size - before:
                budget.give(granted)
                raise fail(errno.ENOBUFS)
        else:
            budget.give(before - size)
        self.held = size
        return before

    def forget(self) -> None:
        self.hold(0)

    def write_now(self, data: bytes) -> bool:
        """One line per write(), what loggers write: exactly one unkeyed line to
        a partition takes the fast path (`Log.append_line`). Not taken (nothing
        done) for anything else, nor when the partition's ``flush.messages``
        would have this write() wait for an fsync."""
        if self.partition is None or not isinstance(self.framer, LineFramer):
            return False
        value = self.framer.single_line(data)
        if value is None:
            return False
        log = self.view.store.log(self.topic, self.partition)
        if log.flush_messages_reached(1):
            return False
        first = log.append_line(value)
        if first is None:
            return False
        self._appended(self.partition, first, 1)
        self.view.refresh_keys(self.topic)
        return True

    async def flush(self) -> None:
        """close(): a trailing partial line becomes a record."""
        if self.framer.pending:
            self.finish()
            await self.appended()

    async def fsync(self) -> None:
        """Returns once this file's partition(s) are durable."""
        for log in self.logs():
            await self.view.sync(log)

    def unmount(self) -> None:
        """At unmount: the partial line becomes a record."""
        if self.framer.pending:
            self.finish()

    async def appended(self) -> None:
        """After an append through this file: the mount's keys refreshed, and
        the fsync that flush.messages may call for."""
        self.view.refresh_keys(self.topic)
        await self.view.sync_due(self.logs())

    def finish(self) -> None:
        """The pending partial line becomes a record. The tail is dropped even
        when that fails (the error reaches close())."""
        try:
            self.append(self.framer.finish())
        finally:
            self.framer.pending = b""
            self.hold(0)

    def append(self, framed: Framed | Lines | Frames | Batches) -> None:
        """Append ``framed`` to this file's partition, or spread it over the
        topic's partitions as Kafka's default partitioner does; one receipt
        per partition appended to."""
        store = self.view.store
        if isinstance(framed, Lines):
            self._append_lines(framed)
            return
        if isinstance(framed, Batches):
            if framed.batches:  # whole batches: checked and given offsets by the log
                log = store.log(self.topic, self.partition)
                first = log.append_batches(framed.batches, framed.data)
                self._appended(self.partition, first, log.next_offset - first)
            return
        if isinstance(framed, Frames):
            if not len(framed.lengths):
                return
            if self.partition is not None:  # encoded where they lie, as lines are
                log = store.log(self.topic, self.partition)
                first = log.append_packed(framed.packed, framed.lengths, gap=LENGTH_BYTES)
                self._appended(self.partition, first, len(framed.lengths))
                return
            framed = Framed([None] * len(framed.lengths), framed.values)
        if not framed.values:
            return
        if self.partition is not None:
            log = store.log(self.topic, self.partition)
            keys = framed.keys if any(k is not None for k in framed.keys) else None
            first = log.append(framed.values, keys=keys)
            self._appended(self.partition, first, len(framed.values))
            return
        for partition, first, count in store.append_to_topic(
            self.topic, framed.values, framed.keys
        ):
            self._appended(partition, first, count)

    def _append_lines(self, lines: Lines) -> None:
        """Unkeyed lines: one partition (the topic's append: the sticky one)."""
        store = self.view.store
        if self.partition is None:
            receipt = store.append_lines_to_topic(
                self.topic, lines.data, lines.head, limit=lines.max_bytes
            )
        else:
            log = store.log(self.topic, self.partition)
            first = log.append_lines(lines.data, lines.head, limit=lines.max_bytes)
            receipt = self.partition, first, log.next_offset - first
        if receipt[2]:
            self._appended(*receipt)

    def logs(self) -> list[Log]:
        """The logs this file appends to: its partition's, or all of its topic's."""
        store = self.view.store
        if self.partition is not None:
            return [store.log(self.topic, self.partition)]
        return [store.log(self.topic, p) for p in range(store.topics().get(self.topic, 0))]

    def _appended(self, partition: int, first: int, count: int) -> None:
        """An append by the general path: its records counted, its receipt kept."""
        self.view.records_appended(self.topic, count)
        self.add_receipt(partition, first, count)

    def add_receipt(self, partition: int, first: int, count: int) -> None:
        if self.receipts is not None and len(self.receipts) < MAX_RECEIPT_BYTES:
            self.receipts += f"{partition} {first} {first + count - 1}\n".encode()
