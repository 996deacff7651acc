"""The daemon's Prometheus endpoint (``-o metrics=[HOST:]PORT``): HTTP/1.0 on the
daemon's event loop, ``GET /metrics`` answered with the text format
`prometheus_client` renders, anything else with 404 or 405.

On the loop, not in a thread of its own, so that a scrape reads the daemon's
books and open partitions while nothing changes them (families.py; the text
is then made in a worker thread, service.py). Bounded as
every face is: at most `MAX_CONNECTIONS` at once (more are closed at once), a
request head of at most `MAX_HEAD` bytes, whole within `TIMEOUT` seconds, one
request per connection. Without authentication: it listens on 127.0.0.1
unless told otherwise (docs/operations.md says who can read it).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable

import trio

from ..core.errors import LogfsError

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 16
MAX_HEAD = 8192
TIMEOUT = 10.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_address(value: str) -> tuple[str, int]:
    """``[HOST:]PORT`` as ``(host, port)``; the host is 127.0.0.1 when not given.

    Raises:
        LogfsError: not a port number 0-65535.
    """
    host, _, port = value.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise LogfsError(f"metrics={value}: expected [HOST:]PORT with a port number 0-65535")
    return host.strip("[]") or "127.0.0.1", int(port)


class Endpoint:
    """``GET /metrics`` on ``host:port``, answered with ``render()``.

    Args:
        host: the address to listen on.
        port: the port (0: any free one).
        render: the exposition's bytes at each scrape (its numbers read on the loop).
        refused: called with a reason for each refused request (the metrics' books).
        timeout: seconds a connection has to send its request head.
        max_connections: connections served at once; more are closed at once.
    """

    def __init__(
        self,
        host: str,
        port: int,
        render: Callable[[], Awaitable[bytes]],
        refused: Callable[[str, str], None] | None = None,
        *,
        timeout: float = TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.render = render
        self.timeout, self.max_connections = timeout, max_connections
        self.refused = refused or (lambda face, reason: None)
        self.connections = 0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Bound now, so a taken port fails the daemon before anything is mounted.
        self.socket = socket.create_server((host, port), family=family, backlog=16)
        self.address: tuple[str, int] = self.socket.getsockname()[:2]

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled."""
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(self.socket))
        logger.info("serving metrics on http://%s:%d/metrics", *self.address)
        task_status.started(self.address)
        await trio.serve_listeners(self._connection, [listener])

    async def _connection(self, stream: trio.SocketStream) -> None:
        if self.connections >= self.max_connections:
            self.refused("metrics", "connections")
            await trio.aclose_forcefully(stream)
            return
        self.connections += 1
        try:
            with trio.move_on_after(self.timeout) as scope:
                await self._answer(stream)
            if scope.cancelled_caught:
                self.refused("metrics", "timeout")
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass  # the client went away
        finally:
            self.connections -= 1
            await trio.aclose_forcefully(stream)

    async def _answer(self, stream: trio.SocketStream) -> None:
        head = bytearray()
        while b"\r\n\r\n" not in head and b"\n\n" not in head:
            if len(head) > MAX_HEAD:
                self.refused("metrics", "too_large")
                await stream.send_all(_response(431, b"request head too large\n"))
                return
            chunk = await stream.receive_some(MAX_HEAD)
            if not chunk:
                return
            head += chunk
        method, _, rest = bytes(head).partition(b" ")
        target = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            self.refused("metrics", "method")
            await stream.send_all(_response(405, b"only GET\n", allow=True))
        elif target != b"/metrics":
            await stream.send_all(_response(404, b"the metrics are at /metrics\n"))
        else:
            body = await self.render()
            await stream.send_all(_response(200, b"" if method == b"HEAD" else body, len(body)))


def _response(status: int, body: bytes, length: int | None = None, allow: bool = False) -> bytes:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}.get(
        status, "Request Header Fields Too Large"
    )
    head = [
        f"HTTP/1.0 {status} {reason}",
        f"Content-Type: {CONTENT_TYPE if status == 200 else 'text/plain'}",
        f"Content-Length: {len(body) if length is None else length}",
        "Connection: close",
    ]
    if allow:
        head.append("Allow: GET, HEAD")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
