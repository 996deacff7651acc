"""A response on a plain TCP connection: its bytes written with ``write`` and
its file regions sent with ``sendfile``, straight on the socket.

trio's stream passes through its scheduler on every send; a Fetch response is
a few small byte strings around each partition's region, so here each string
is one ``write`` and each region ``sendfile`` calls for as long as the socket
takes them. The task waits only when the socket's buffer is full (trio sets
``TCP_NOTSENT_LOWAT``: it is reported writable again once less than 16 KiB is
unsent), and yields to the scheduler once per response besides, so one
connection streaming large responses still lets the others run.

A request's bytes are read the same way (`receive_into`): when they are
waiting, one ``readv`` with no pass through the scheduler (trio's own
``recv_into`` makes one after every read); the task waits, and so yields, only
when the socket is empty, and a timeout around it still ends it (a cancelled
scope is checked before each read).

The record bytes never enter Python. A segment file that ends before its
region does (retention removed it while the frame was being sent) breaks the
connection: the frame cannot be finished.
"""

from __future__ import annotations

import errno
import os

import trio

from .protocol import Region


async def send_parts(sock: trio.socket.SocketType, parts: list[bytes | Region]) -> None:
    """Write ``parts`` (bytes, and file regions) to ``sock`` in order.

    Raises:
        trio.BrokenResourceError: the client went away, or a region's file
            ended early.
    """
    fd = sock.fileno()
    for part in parts:
        if isinstance(part, Region):
            position, left = part.position, part.size
            while left:
                sent = await _call(sock, os.sendfile, fd, part.fd, position, left)
                if sent == 0:  # the file shrank under us (retention)
                    raise trio.BrokenResourceError("the segment file ended early")
                position += sent
                left -= sent
        elif part:
            view = memoryview(part)
            while view:
                view = view[await _call(sock, os.write, fd, view) :]
    await trio.lowlevel.checkpoint()


async def _call(sock: trio.socket.SocketType, call, *args) -> int:
    """``call(*args)`` once the socket takes bytes; what it sent."""
    while True:
        try:
            return call(*args)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
        except OSError as e:
            if e.errno in (errno.EPIPE, errno.ECONNRESET):
                raise trio.BrokenResourceError(str(e)) from e
            raise


async def receive_into(sock: trio.socket.SocketType, view: memoryview) -> int:
    """Receive into ``view`` what the socket holds, waiting for a byte if it
    holds none; the count (0: the peer closed the connection).

    Raises:
        ConnectionError: the peer reset the connection.
    """
    while True:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            return os.readv(sock.fileno(), [view])
        except BlockingIOError:
            await trio.lowlevel.wait_readable(sock)
