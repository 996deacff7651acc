"""`Wire` never trusts the size a server announces: a frame over ``max_answer`` (or
not positive) drops the connection with one error, before any of it is read or
allocated."""

from __future__ import annotations

import socket
import struct
import threading
import tracemalloc

import pytest
from kio.index import load_request_schema, load_response_schema

from logfs.core.client import wire


def hostile_server(announced: int) -> tuple[socket.socket, threading.Thread]:
    """A server that reads one request and answers with a frame of ``announced`` bytes
    (only the size is sent; the connection then stays open)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
            conn.recv(size, socket.MSG_WAITALL)
            conn.sendall(struct.pack(">i", announced))
            conn.recv(1)  # until the client closes

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("announced", [2**31 - 1, 64 << 20, 0, -5])
def test_an_announced_size_past_the_limit_is_refused_before_it_is_read(announced):
    listener, thread = hostile_server(announced)
    with listener:
        host, port = listener.getsockname()
        client = wire.Wire(f"kafka://{host}:{port}", timeout=10, max_answer=1 << 20)
        for api_key, version in ((wire.METADATA, 12), (wire.DESCRIBE_CONFIGS, 4)):
            load_request_schema(api_key, version), load_response_schema(api_key, version)
        tracemalloc.start()  # kio's classes loaded first: what is measured is the call
        try:
            with pytest.raises(wire.WireError, match=f"an answer of {announced} bytes"):
                client.topic("t")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20  # nothing of the announced size was allocated
        client.close()
        thread.join(10)
        assert not thread.is_alive()  # the client dropped the connection


def test_the_default_limit_is_kafkas_socket_request_max_bytes():
    assert wire.MAX_ANSWER == 100 << 20
    assert wire.Wire("kafka://127.0.0.1:1").max_answer == wire.MAX_ANSWER
