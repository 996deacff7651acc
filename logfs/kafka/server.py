"""The listener: a trio TCP server, one task per connection, requests of a
connection answered one at a time and in order (as Kafka's broker does).

Bounds per connection (PRODUCT §11): a request frame is at most
``max_request_bytes`` (Kafka's ``socket.request.max.bytes``); a frame once
begun must arrive within ``request_timeout`` seconds (a slow client cannot
hold a request open forever); at most ``max_connections`` connections are
served at once, further ones are closed at once. A frame that does not parse
closes its connection only; nothing a client sends stops the listener.

With an ``ssl_context`` the listener speaks only TLS (Kafka's SSL and
SASL_SSL listeners): a connection's TLS handshake must end within
``request_timeout`` seconds, else that connection is closed (tls.py).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import socket
import ssl
import time

import numpy
import trio

from ..core.errors import LogfsError
from . import peers, protocol, sasl, tls
from .access import Client, identity_of
from .broker import Broker
from .protocol import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, BadRequest, Region, Reply

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 100 * 1024 * 1024
REQUEST_TIMEOUT = 30.0
MAX_CONNECTIONS = 1000
LOG_PER_SECOND = 10  # closed connections logged per second at most


def parse_listen(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` -> (host, port); without HOST, loopback only.

    Raises:
        ValueError: not a port number 0-65535.
    """
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r}: expected [HOST:]PORT with a port number 0-65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback one."""
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in found)


def check_exposure(host: str, users: dict | None, allow_anonymous: bool) -> None:
    """A listener other programs' machines can reach needs SASL credentials,
    unless anonymous access is asked for explicitly.

    Raises:
        LogfsError: a non-loopback ``host`` without either.
    """
    if users is None and not allow_anonymous and not is_loopback(host):
        raise LogfsError(
            f"{host} is not a loopback address: give SASL credentials "
            "(-o kafka.sasl.users=FILE) or allow anonymous clients (-o kafka.allow.anonymous=true)"
        )


class Listener:
    """Kafka's protocol for ``broker`` on ``host:port``."""

    def __init__(
        self,
        broker: Broker,
        host: str,
        port: int,
        *,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        request_timeout: float = REQUEST_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.broker = broker
        self.ssl_context = ssl_context
        # SCRAM's salted keys are derived once, before the first client.
        users = broker.users
        self.credentials = sasl.Credentials(users) if users is not None else None
        self.host, self.port = host, port
        self.max_request_bytes = max_request_bytes
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.connections = 0
        self.closed_bad = 0  # connections closed for a bad frame
        self._log_second, self._logged, self._suppressed = -1, 0, 0
        self.socket: socket.socket | None = None
        self.address: tuple[str, int] | None = None  # once bound

    def bind(self) -> tuple[str, int]:
        """Bind and listen now (so a taken port fails the caller at once); the address."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self.socket = socket.create_server((self.host, self.port), family=family, backlog=128)
        self.address = self.socket.getsockname()[:2]
        return self.address

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve on the bound socket (`bind` first if not yet) until cancelled."""
        if self.socket is None:
            self.bind()
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(self.socket))
        logger.info("serving Kafka's protocol on %s:%d", *self.address)
        task_status.started(self.address)
        await trio.serve_listeners(self._connection, [listener])

    def _refused(self, reason: str) -> None:
        if self.broker.metrics is not None:
            self.broker.metrics.refused("kafka", reason)

    def _log_rejected(self, why: str) -> None:
        """Log a closed connection, at most `LOG_PER_SECOND` a second: a hostile
        client must not fill the log."""
        now = int(trio.current_time())
        if now != self._log_second:
            if self._suppressed:
                logger.info("%d more Kafka connections closed for bad requests", self._suppressed)
            self._log_second, self._logged, self._suppressed = now, 0, 0
        if self._logged < LOG_PER_SECOND:
            self._logged += 1
            logger.info("closing a Kafka connection: %s", why)
        else:
            self._suppressed += 1

    async def _connection(self, stream: trio.SocketStream) -> None:
        if self.connections >= self.max_connections:
            self._refused("connections")
            await stream.aclose()
            return
        self.connections += 1
        secure = None
        try:
            if self.ssl_context is not None:
                secure = await self._handshake(stream)
            await Connection(self, stream, secure).serve()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass  # the client went away
        except BadRequest as e:
            self.closed_bad += 1
            self._refused("bad_request")
            self._log_rejected(str(e))
        except Exception:  # noqa: BLE001 - a fault answering one client never stops the listener
            self.closed_bad += 1
            self._refused("internal_error")
            logger.exception("closing a Kafka connection after an internal error")
        finally:
            self.connections -= 1
            if secure is not None:
                await trio.aclose_forcefully(secure)
            await trio.aclose_forcefully(stream)

    async def _handshake(self, stream: trio.SocketStream) -> trio.SSLStream:
        """The connection's TLS stream once its handshake is done.

        Raises:
            BadRequest: the handshake failed (a client that does not speak TLS,
                no common version or cipher) or did not end in time.
        """
        secure = trio.SSLStream(stream, self.ssl_context, server_side=True)
        with trio.move_on_after(self.request_timeout) as scope:
            try:
                await secure.do_handshake()
            except trio.BrokenResourceError as e:
                why = getattr(e.__cause__, "reason", None) or e.__cause__ or "the client went away"
                raise BadRequest(f"TLS handshake failed: {why}") from None
        if scope.cancelled_caught:
            raise BadRequest(f"the TLS handshake did not end within {self.request_timeout:g} s")
        return secure


class Connection:
    """One client's connection: read a frame, answer it, repeat.

    Args:
        listener: the listener it came to.
        stream: the TCP connection.
        secure: its TLS stream, when the listener speaks TLS (then every byte
            goes through it).
    """

    def __init__(
        self, listener: Listener, stream: trio.SocketStream, secure: trio.SSLStream | None = None
    ) -> None:
        self.listener = listener
        self.socket = stream.socket
        self.secure = secure
        self.stream = secure or stream
        host, port = stream.socket.getsockname()[:2]
        self.advertised = (host, port)  # what Metadata tells this client
        try:
            self.peer = "/" + str(stream.socket.getpeername()[0])  # Kafka's client host
        except OSError:  # already gone
            self.peer = ""
        self.credentials = listener.credentials  # None: no authentication
        self.user: str | None = None
        self.uid: int | None = None  # a loopback client's, found at the start (peers.py)
        self.who = identity_of(self.credentials is not None, None, None)  # nobody, so far
        self.exchange: sasl.Plain | sasl.scram.ScramServer | None = None  # after SaslHandshake
        self.raw_token_expected = False  # after SaslHandshake v0

    async def serve(self) -> None:
        broker = self.listener.broker
        if self.credentials is None:  # who the client is: the owner of its socket
            with contextlib.suppress(OSError):
                sock = self.socket
                self.uid = await peers.peer_uid(sock.getpeername(), sock.getsockname())
            self.who = identity_of(False, None, self.uid)
        while True:
            head = await self._receive(4, first=True)
            if head is None:
                return
            size = protocol.frame_size(head)
            if not 0 < size <= self.listener.max_request_bytes:
                raise BadRequest(
                    f"a request of {size} bytes (at most {self.listener.max_request_bytes})"
                )
            with trio.move_on_after(self.listener.request_timeout) as scope:
                frame = await self._receive(size)
            if scope.cancelled_caught or frame is None:
                raise BadRequest(
                    f"a request of {size} bytes did not arrive within "
                    f"{self.listener.request_timeout:g} s"
                )
            if self.raw_token_expected:  # SaslHandshake v0: bare tokens, bare answers
                try:
                    answer = sasl.step(self.exchange, bytes(frame))
                except sasl.Failed as e:
                    raise BadRequest(f"SASL authentication failed: {e}") from None
                await self.stream.send_all(len(answer).to_bytes(4, "big") + answer)
                if self.exchange.done:
                    self._authenticated()
                continue
            started = time.perf_counter()
            request = protocol.read_request(frame)
            refused = None
            if request.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and request.body is not None:
                reply, refused = self._sasl(request)
            elif (
                self.credentials is not None
                and self.user is None
                and request.api_key != API_VERSIONS
            ):
                raise BadRequest(f"request {request.api_key} before SASL authentication")
            else:
                client = Client(*self.advertised, self.user, self.peer, self.uid, self.who)
                reply = await broker.handle(request, client)
            if reply is not None:  # else acks=0: Kafka's broker does not answer
                try:
                    await self._send(protocol.encode_response(request, reply))
                finally:
                    reply.close()
            if broker.metrics is not None:  # Kafka's TotalTimeMs: read to answer sent
                # kio's class names are Kafka's; a body-less request here is an
                # ApiVersions of a version not served (answered with its error).
                kind = type(request.body).__name__.removesuffix("Request")
                name = "ApiVersions" if request.body is None else kind
                broker.metrics.request(name, (time.perf_counter() - started) * 1000)
            if refused:
                raise BadRequest(refused)

    def _sasl(self, request) -> tuple[Reply, str | None]:
        """SaslHandshake or SaslAuthenticate: the reply, and why to close the
        connection after it (a failed authentication), if so."""
        if request.api_key == SASL_HANDSHAKE:
            if self.exchange is not None:
                raise BadRequest("a second SaslHandshake")
            body, served = sasl.handshake(request)
            if served and self.credentials is not None:
                self.exchange = sasl.start(request.body.mechanism, self.credentials)
                self.raw_token_expected = request.version == 0
            return Reply(body), None
        if self.exchange is None or self.exchange.done:
            raise BadRequest("SaslAuthenticate without a SaslHandshake, or after authentication")
        body, failed = sasl.authenticate(request, self.exchange)
        if failed:
            return Reply(body), f"SASL authentication failed: {failed}"
        if self.exchange.done:
            self._authenticated()
        return Reply(body), None

    def _authenticated(self) -> None:
        self.user, self.raw_token_expected = self.exchange.user, False
        self.who = identity_of(True, self.user, None)
        logger.info("Kafka client authenticated as %s", self.user)

    async def _receive(self, n: int, first: bool = False) -> memoryview | None:
        """``n`` bytes, received straight into their buffer; None at a clean end
        of the stream before the first."""
        data = numpy.empty(n, numpy.uint8)  # not zero-filled: every byte is received into it
        view, got = memoryview(data), 0
        while got < n:
            if self.secure is not None:
                # Bounded: the TLS layer allocates what is asked for, per read.
                chunk = await self.secure.receive_some(min(n - got, tls.CHUNK))
                count = len(chunk)
                view[got : got + count] = chunk
            else:
                count = await self.socket.recv_into(view[got:])
            if not count:
                if first and not got:
                    return None
                raise BadRequest("the connection closed inside a request")
            got += count
        return view.toreadonly()

    async def _send(self, parts: list[bytes | Region]) -> None:
        for part in parts:
            if isinstance(part, Region) and self.secure is not None:
                await tls.send_region(self.secure, part)  # no sendfile through TLS
            elif isinstance(part, Region):
                await self._sendfile(part)
            elif part:
                await self.stream.send_all(part)

    async def _sendfile(self, region: Region) -> None:
        """The region's bytes from the page cache to the socket, never through Python."""
        sock = self.socket
        position, left = region.position, region.size
        while left:
            try:
                sent = os.sendfile(sock.fileno(), region.fd, position, left)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.ECONNRESET):
                    raise trio.BrokenResourceError from e
                raise
            if sent == 0:  # the file shrank under us (retention): the frame cannot be finished
                raise trio.BrokenResourceError("the segment file ended early")
            position += sent
            left -= sent
            await trio.lowlevel.checkpoint()
