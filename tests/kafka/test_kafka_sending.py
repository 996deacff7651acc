"""The listener's own socket calls (sending.py) on a real socket pair: a
response's bytes and file regions arrive whole and in order however small the
socket's buffer, a region past its file's end breaks the connection instead
of sending a short frame, and a request's bytes are read as they come, a
timeout still ending the wait."""

from __future__ import annotations

import os
import socket

import pytest
import trio

from logfs.kafka import sending
from logfs.kafka.protocol import Region


def pair(buffer: int = 4096) -> tuple[trio.socket.SocketType, socket.socket]:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    return trio.socket.from_stdlib_socket(ours), theirs


def drain(sock: socket.socket) -> bytes:
    out = bytearray()
    while chunk := sock.recv(1 << 16):
        out += chunk
    return bytes(out)


def test_bytes_and_regions_arrive_in_order(tmp_path):
    path = tmp_path / "segment"
    data = os.urandom(3 << 20)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    parts = [b"head", Region(fd, 1000, 2 << 20), b"", b"middle" * 5000, Region(fd, 7, 10), b"end"]
    expected = b"head" + data[1000 : 1000 + (2 << 20)] + b"middle" * 5000 + data[7:17] + b"end"

    async def main():
        ours, theirs = pair()
        async with trio.open_nursery() as nursery:
            got = []

            async def read():
                got.append(await trio.to_thread.run_sync(drain, theirs))

            nursery.start_soon(read)
            await sending.send_parts(ours, parts)
            ours.close()
        theirs.close()
        return got[0]

    try:
        assert trio.run(main) == expected
    finally:
        os.close(fd)


def test_a_region_past_the_file_end_breaks_the_connection(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)

    async def main():
        ours, theirs = pair(1 << 20)
        with ours, theirs, pytest.raises(trio.BrokenResourceError, match="ended early"):
            await sending.send_parts(ours, [b"h", Region(fd, 50, 100)])

    try:
        trio.run(main)
    finally:
        os.close(fd)


def test_receive_into_waits_for_bytes_and_sees_the_end():
    async def main():
        ours, theirs = pair()
        with ours:
            view = memoryview(bytearray(10))
            with trio.move_on_after(0.05) as scope:
                await sending.receive_into(ours, view)
            assert scope.cancelled_caught  # nothing came: the wait ended by the timeout
            theirs.sendall(b"abc")
            assert await sending.receive_into(ours, view) == 3 and bytes(view[:3]) == b"abc"
            theirs.close()
            assert await sending.receive_into(ours, view) == 0

    trio.run(main)
