"""The buffered mode (``-o acks=0``): append files written through the kernel's page cache.

With the FUSE writeback cache the kernel takes a ``write()`` into its page
cache as for a plain file and sends the daemon what it holds later, in large
requests: when a page is written back (the kernel's dirty-page expiry, memory
pressure), and always before ``fsync()`` and ``close()`` return. It addresses
those requests by its own idea of the file's offsets and sends a partly
written page again, from the page's start, once more bytes are added to it.

So the daemon reads each append file as one byte stream, per path, addressed
by the kernel's offsets: `BufferedAppend` keeps how many bytes of it it has
(``received``), drops what a request repeats, holds a request that arrives
ahead of a gap until the gap is filled, and frames the new bytes as the direct
mode frames one open file's writes (`AppendFile`). Writes of whole lines (what
loggers and nginx do) from concurrent writers stay whole: with ``O_APPEND`` the
kernel places each ``write()`` at the end as one piece.

A write request cannot report an error to the writer (its ``write()`` returned
long ago): a line too long, a line without its key separator or a failed
append is logged and raised from the next ``fsync()`` or ``close()`` on the
file (`take_error`); the bad line is dropped, the lines around it are appended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys

import pyfuse3
import trio

from ...core.errors import FramingError, LogfsError
from .appendfile import AppendFile
from .framing import BatchFramer, LengthFramer, LineFramer
from .openfile import OpenFile, Shared

logger = logging.getLogger(__name__)

# Bytes kept from the end of the stream: the kernel reads back the partly
# written page at the end before it appends to it (when the page left its cache).
KEEP_BYTES = 1 << 16
# The kernel may keep an append file's attributes this long: it owns the size in
# this mode, and an O_APPEND write would otherwise ask for them every time.
ATTR_TIMEOUT = 3600.0
# Every this many seconds the daemon has the kernel write back what it holds of
# each append file open for writing: lines reach the log (and `tail -f`) within
# about this, not after the kernel's dirty-page expiry (30 s by default).
WRITE_BACK_INTERVAL = 1.0


class BufferedAppend:
    """One append file's byte stream as the kernel writes it back (see module doc)."""

    def __init__(self, path: tuple, file: AppendFile) -> None:
        self.path = path
        self.file = file  # framing and routing, as for a direct open
        self.topic = file.topic
        self.received = 0  # the stream's bytes handed to the framer
        self.kept = bytearray()  # the stream's last bytes, ending at `received`
        self.ahead: dict[int, bytes] = {}  # offset -> bytes sent past a gap
        self.error: Exception | None = None  # raised at the next fsync/close
        self.opens = 0

    def opened(self, file: AppendFile, *, truncate: bool) -> None:
        """One more open of the path: ``file`` (the topic's settings as they are
        now) frames what follows, the unframed tail carried over to it; with
        ``truncate`` the stream starts again."""
        if file is not self.file:
            file.framer.pending = self.file.framer.pending
            self.file = file
        if truncate:
            self.truncate()
        self.opens += 1

    def released(self) -> None:
        """One open fewer."""
        self.opens -= 1

    def write(self, offset: int, data: bytes) -> None:
        """The kernel sends ``data`` for stream ``offset``: frame what is new."""
        end = offset + len(data)
        if end <= self.received:
            return  # all of it sent before
        if offset > self.received:
            self.ahead[offset] = bytes(data)  # a gap before it: wait for its bytes
            return
        self._take(memoryview(data)[self.received - offset :])
        self._drain()

    def _drain(self) -> None:
        while self.ahead:
            first = min(self.ahead)
            if first > self.received:
                return
            item = self.ahead.pop(first)
            if first + len(item) > self.received:
                self._take(memoryview(item)[self.received - first :])

    def _take(self, new: memoryview) -> None:
        self.received += len(new)
        self.kept += new
        if len(self.kept) > 2 * KEEP_BYTES:
            del self.kept[:-KEEP_BYTES]
        data = bytes(new)
        try:
            self._frame(data)
        except (FramingError, LogfsError, OSError) as e:
            self._line_by_line(data, e)

    def _frame(self, data: bytes) -> None:
        """Append the records ``data`` completes (as `AppendFile.write`, but
        neither the one-line fast path nor the waits: the caller does those)."""
        framed, tail = self.file.framer.feed(data)
        self.file.append(framed)
        self.file.framer.pending = tail

    def _line_by_line(self, data: bytes, error: Exception) -> None:
        """A chunk failed as a whole: append its lines one at a time, dropping
        the ones that fail (logged once per chunk). Frames and batches cannot
        be cut apart: a failed chunk of those is dropped whole."""
        framer = self.file.framer
        if not isinstance(framer, LineFramer):
            self._report(error, f"{len(data)} bytes of frames or batches")
            return
        dropped, first = 0, error
        pieces = data.split(b"\n")
        for i, piece in enumerate(pieces):
            piece += b"\n" if i < len(pieces) - 1 else b""
            if not piece:
                continue
            try:
                self._frame(piece)
            except (FramingError, LogfsError, OSError) as e:
                dropped, first = dropped + 1, e if not dropped else first
                if piece.endswith(b"\n"):  # the line is over: what follows is framed anew
                    framer.restart()
        if dropped:
            self._report(first, f"{dropped} line(s)")

    def _report(self, error: Exception, what: str) -> None:
        logger.error("%s: %s dropped: %s", "/".join(self.path), what, error)
        if self.error is None:
            self.error = error

    def catch_up(self) -> None:
        """fsync/close: everything the kernel held has been sent; a gap that
        is still open will not be filled (logged), what follows it is taken."""
        if self.ahead:
            logger.error(
                "%s: %d bytes never arrived before offset %d",
                "/".join(self.path),
                min(self.ahead) - self.received,
                min(self.ahead),
            )
            self.received = min(self.ahead)
            self._drain()

    def close(self) -> None:
        """close() (`flush`): the kernel has sent everything. The trailing
        partial line becomes a record only at the close of the file's last
        open: before that it may be the start of another writer's line whose
        rest is still being written."""
        self.catch_up()
        if self.opens <= 1:
            self.finish()

    def finish(self) -> None:
        """The trailing partial line becomes a record (last close, unmount)."""
        if self.file.framer.pending:
            try:
                self.file.finish()
            except (FramingError, LogfsError, OSError) as e:
                self._report(e, "the last line")

    def take_error(self) -> Exception | None:
        error, self.error = self.error, None
        return error

    def truncate(self) -> None:
        """``> append`` (``O_TRUNC``): the kernel's stream starts again at 0."""
        self.received = 0
        self.kept.clear()
        self.ahead.clear()

    def read(self, offset: int, size: int) -> bytes:
        """The kernel reading back a page it is about to append to."""
        size = max(0, min(size, self.received - offset))
        start = self.received - len(self.kept)
        out = bytearray(size)
        lo, hi = max(offset, start), min(offset + size, self.received)
        if lo < hi:
            out[lo - offset : hi - offset] = self.kept[lo - start : hi - start]
        return bytes(out)


class BufferedAppends:
    """Every append file's `BufferedAppend`, by path (the kernel's offsets
    continue across opens; a forgotten inode is looked up again at the size
    it had)."""

    def __init__(self, mountpoint: str | None = None) -> None:
        self.streams: dict[tuple, BufferedAppend] = {}
        self.pushed: dict[tuple, int] = {}  # (inode, path) of a stream -> the size told
        self.mountpoint = mountpoint  # where `run` finds the files (resolved)
        self.helper = WriteBack()

    def open(
        self,
        view: Shared,
        path: tuple,
        topic: str,
        partition: int | None,
        framer: LineFramer | LengthFramer | BatchFramer,
        flags: int,
    ) -> BufferedAppendFile:
        """An ``O_WRONLY`` open of the append file at ``path``; ``framer``
        with the topic's settings as they are now."""
        stream = self.streams.get(path)
        file = AppendFile(view, topic, partition, framer, os.O_WRONLY)
        if stream is None or stream.topic != topic:
            stream = self.streams[path] = BufferedAppend(path, file)
        # O_TRUNC: the kernel's size went back to 0, unasked
        stream.opened(file, truncate=bool(flags & os.O_TRUNC))
        return BufferedAppendFile(stream)

    def truncate(self, path: tuple) -> None:
        """``truncate -s 0``: the kernel's offsets start again at 0."""
        stream = self.streams.get(path)
        if stream is not None:
            stream.truncate()

    def size(self, path: tuple) -> int:
        stream = self.streams.get(path)
        return stream.received if stream is not None else 0

    def push_size(self, inode: int, path: tuple, size: int) -> None:
        """Tell the kernel a stream grew to ``size`` bytes. With the writeback
        cache it trusts its own size of every regular file and ignores the
        one getattr answers; storing the stream's last byte (a newline) at the
        new end moves it (``tail -f`` polls the size). Streams are read with
        direct_io, so the page this fills is never read."""
        if size > self.pushed.get((inode, path), 0):
            with contextlib.suppress(OSError):  # the kernel no longer holds the inode
                pyfuse3.notify_store(inode, size - 1, b"\n")
            self.pushed[inode, path] = size

    async def run(self) -> None:
        """Every `WRITE_BACK_INTERVAL`, have the kernel send what it holds of
        each append file open for writing: a helper process (`WriteBack`) opens
        the file through the mount (this loop serves that open) and asks for
        the write back with sync_file_range(2), which sends no fsync: what
        reaches the log is made durable by the flush policy, as any append."""
        await trio.sleep(WRITE_BACK_INTERVAL)
        try:
            while True:
                await self.write_back_open_files()
                await trio.sleep(WRITE_BACK_INTERVAL)
        finally:
            await self.helper.stop()

    async def write_back_open_files(self) -> None:
        for path in [p for p, s in self.streams.items() if s.opens > 0]:
            await self.helper.write_back(os.path.join(self.mountpoint, *path))

    def forget_topic(self, topic: str) -> None:
        for path in [p for p in self.streams if p[0] == topic]:
            del self.streams[path]


# The helper: paths in, each ended by a NUL; a byte out once that file's dirty pages are
# written back (the same when it cannot be opened: deleted meanwhile, or the mount going).
WRITE_BACK = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
pending = b""
while chunk := os.read(0, 65536):
    pending += chunk
    while b"\0" in pending:
        path, _, pending = pending.partition(b"\0")
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            fd = -1
        if fd >= 0:
            libc.sync_file_range(fd, 0, 0, 2 | 4)  # SYNC_FILE_RANGE_WRITE | _WAIT_AFTER
            try:
                os.close(fd)
            except OSError:
                pass
        os.write(1, b"\0")
"""


class WriteBack:
    """A process of its own that has the kernel write back an append file's
    dirty pages, by opening it through the mount.

    Not a thread of the daemon: a thread waiting on the daemon's own mount
    when the daemon is killed (``kill -9``) never returns, since no one is left
    to answer, and keeps the dying daemon's ``/dev/fuse`` open; the kernel
    then never ends the connection and every writer to the mount waits in
    ``D`` state for good. A helper holds no ``/dev/fuse``: the daemon's death
    ends the connection, which fails the helper's wait, and it exits at the
    end of its input."""

    def __init__(self) -> None:
        self.process: trio.Process | None = None
        self.lock = trio.Lock()  # one path at a time through the pipes

    async def write_back(self, path: str) -> None:
        """Returns once ``path``'s dirty pages are written back (or the helper
        failed: a new one is started next time)."""
        async with self.lock:
            await self._write_back(path)

    async def _write_back(self, path: str) -> None:
        if self.process is None or self.process.returncode is not None:
            self.process = await trio.lowlevel.open_process(
                [sys.executable, "-I", "-c", WRITE_BACK],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        process = self.process
        try:
            await process.stdin.send_all(os.fsencode(path) + b"\0")
            if await process.stdout.receive_some(1):
                return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        logger.warning("the write-back helper stopped (exit status %s)", process.poll())
        await self.stop()

    async def stop(self) -> None:
        """Kill the helper and reap it: at most a second, even when cancelled
        (a helper waiting on a mount that is going exits once it is gone)."""
        process, self.process = self.process, None
        if process is None:
            return
        process.kill()
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await process.stdin.aclose()
            await process.stdout.aclose()
            await process.wait()


class BufferedAppendFile(OpenFile):
    """One ``O_WRONLY`` open of an append file in the buffered mode: through
    the page cache, its requests on the path's shared `BufferedAppend`."""

    direct_io = False

    def __init__(self, stream: BufferedAppend) -> None:
        self.stream = stream

    async def read(self, offset: int, size: int) -> bytes:
        return self.stream.read(offset, size)

    async def write(self, offset: int, data: bytes) -> None:
        self.stream.write(offset, data)
        await self.stream.file.appended()  # the append file's own waits

    async def flush(self) -> None:
        """close(): the kernel has written everything back first."""
        self.stream.close()
        await self.stream.file.appended()
        self._raise_error()

    async def fsync(self) -> None:
        """The kernel has written everything back first; then as `AppendFile`."""
        self.stream.catch_up()
        self._raise_error()
        await self.stream.file.fsync()

    async def release(self) -> None:
        """The last close of this open: as a close, then one open fewer of the stream."""
        try:
            await self.flush()
        finally:
            self.stream.released()

    def unmount(self) -> None:
        self.stream.finish()

    def _raise_error(self) -> None:
        error = self.stream.take_error()
        if error is not None:
            raise error
