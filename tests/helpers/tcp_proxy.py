"""A TCP proxy on 127.0.0.1 that a test controls: it forwards each connection to an
upstream address (changeable, for a server restarted on another port), and on demand
drops every open connection (`cut`) or holds their bytes without closing them
(`stall`), as a broken network does."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection


class Proxy:
    """Listens on an ephemeral port of 127.0.0.1; ``address`` is where clients connect."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()
        self.flowing = threading.Event()
        self.flowing.set()
        self.lock = threading.Lock()
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.connections = 0  # accepted so far
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def bootstrap(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.pairs.append((client, server))
                self.connections += 1
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self.flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every open connection at once (both sides see a reset or an end)."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)  # RST, not FIN
                    s.close()

    def stall(self) -> None:
        """Hold every byte in flight from now on, connections left open."""
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.closed = True
        self.resume()
        self.listener.close()
        self.cut()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
