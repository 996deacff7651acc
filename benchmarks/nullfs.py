"""A do-nothing pyfuse3 file system: the FUSE transport limit.

One directory with a file ``sink`` that accepts every ``write()`` and drops it
(like ``/dev/null``), a file ``copy`` that writes every ``write()`` it gets to
a plain file (``--copy-to``: the least a file system that stores what it
receives must do, one copy in and one ``write()`` out), a file ``source`` that
serves ``--source-bytes`` of 100-byte lines and a directory ``records/`` whose
every numeric name is a 100-byte file (like ``offset/<n>``, with the same
one-minute cache timeouts). Sink, copy and source are opened with direct_io
and report ``st_blksize`` = 1 MiB, exactly as logfs's ``append`` and
``stream`` are, so a ``cat`` through it pays every cost of FUSE and pyfuse3 on
trio and none of logfs's. The benchmark compares logfs's mount against this one.

With ``--writeback`` the kernel's writeback cache is on and ``sink`` goes
through the page cache (as ``append`` in logfs's buffered mode, ``acks=0``),
and the file system has no extended attributes at all, so the kernel stops
asking for ``security.capability`` before every write(): what the buffered
mode would reach without that round trip (docs/benchmarks.md).

    python benchmarks/nullfs.py MOUNTPOINT [--source-bytes N] [--copy-to FILE] [--writeback]
    (foreground; SIGTERM unmounts)
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import stat

import pyfuse3
import trio

SINK_INODE = pyfuse3.ROOT_INODE + 1
SOURCE_INODE = pyfuse3.ROOT_INODE + 2
RECORDS_INODE = pyfuse3.ROOT_INODE + 3
COPY_INODE = pyfuse3.ROOT_INODE + 4
NAMES = {
    b"sink": SINK_INODE,
    b"source": SOURCE_INODE,
    b"records": RECORDS_INODE,
    b"copy": COPY_INODE,
}
FIRST_RECORD = 1000  # records/<n> is inode FIRST_RECORD + n
RECORD_BYTES = 100
BLOCK = 1 << 20


class NullOperations(pyfuse3.Operations):
    def __init__(self, source_bytes: int, copy_to: str, writeback: bool = False) -> None:
        super().__init__()
        self.enable_writeback_cache = writeback
        self.source_bytes = source_bytes
        self.copy_fd = os.open(copy_to, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        line = b"x" * 99 + b"\n"
        self.block = line * (BLOCK // len(line) + 1)

    def _attrs(self, inode: int) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = inode
        attrs.st_blksize = BLOCK
        attrs.st_uid, attrs.st_gid = os.getuid(), os.getgid()
        if inode in (pyfuse3.ROOT_INODE, RECORDS_INODE):
            attrs.st_mode, attrs.st_nlink = stat.S_IFDIR | 0o755, 2
        else:
            attrs.st_mode, attrs.st_nlink = stat.S_IFREG | 0o644, 1
            attrs.st_size = self.source_bytes if inode == SOURCE_INODE else 0
        attrs.entry_timeout = attrs.attr_timeout = 0
        if self.enable_writeback_cache and inode == SINK_INODE:
            attrs.entry_timeout = attrs.attr_timeout = 3600  # the kernel owns the size
        if inode >= FIRST_RECORD:
            attrs.st_mode, attrs.st_size = stat.S_IFREG | 0o444, RECORD_BYTES
            attrs.entry_timeout = attrs.attr_timeout = 60
        return attrs

    async def getattr(self, inode, ctx=None):
        return self._attrs(inode)

    async def lookup(self, parent_inode, name, ctx=None):
        if parent_inode == RECORDS_INODE and name.isdigit():
            return self._attrs(FIRST_RECORD + int(name))
        if parent_inode != pyfuse3.ROOT_INODE or name not in NAMES:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attrs(NAMES[name])

    async def setattr(self, inode, attr, fields, fh, ctx=None):
        return self._attrs(inode)

    async def open(self, inode, flags, ctx=None):
        if inode == SINK_INODE and self.enable_writeback_cache:
            return pyfuse3.FileInfo(fh=inode, keep_cache=True)
        if inode >= FIRST_RECORD:
            return pyfuse3.FileInfo(fh=inode, keep_cache=True)
        return pyfuse3.FileInfo(fh=inode, direct_io=True)

    async def read(self, fh, off, size):
        if fh == SINK_INODE:
            return bytes(size)  # the kernel reading back a page it appends to
        if fh >= FIRST_RECORD:
            return self.block[off:RECORD_BYTES]
        if fh != SOURCE_INODE or off >= self.source_bytes:
            return b""
        size = min(size, self.source_bytes - off, BLOCK)
        start = off % 100
        return self.block[start : start + size]

    async def write(self, fh, off, buf):
        if fh == COPY_INODE:
            return os.write(self.copy_fd, buf)
        return len(buf)

    async def flush(self, fh):
        pass

    async def release(self, fh):
        pass


async def _run() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


async def _stop_on_signal() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            pyfuse3.terminate()
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--source-bytes", type=int, default=100 << 20)
    parser.add_argument("--copy-to", default=os.devnull, help="where copy's writes go")
    parser.add_argument("--writeback", action="store_true", help="sink through the page cache")
    args = parser.parse_args()
    options = {"fsname=nullfs", "subtype=nullfs"}
    ops = NullOperations(args.source_bytes, args.copy_to, args.writeback)
    pyfuse3.init(ops, args.mountpoint, options)
    try:
        trio.run(_run)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
