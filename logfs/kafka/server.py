"""The listener: a trio TCP server, one task per connection, requests of a
connection answered one at a time and in order (as Kafka's broker does).

Bounds per connection (PRODUCT §11): a request frame is at most
``max_request_bytes`` (Kafka's ``socket.request.max.bytes``); a frame must
arrive whole within ``request_timeout`` seconds of its size field's first
byte (a slow client cannot hold a request open forever; waiting for the
request budget is not counted); a connection that sends nothing for
``idle_timeout`` seconds between requests is closed (Kafka's
``connections.max.idle.ms``). Bounds over all connections (budgets.py): the
bytes of frames held at once (``queued.max.request.bytes``: a connection
waits for them, the daemon does not grow); at most ``max_connections``
connections, and at most so many per local user or per address, further ones
closed at once; failed authentications answered one delay apart per client.
A frame that does not parse closes its connection only; nothing a client
sends stops the listener.

With an ``ssl_context`` the listener speaks only TLS (Kafka's SSL and
SASL_SSL listeners): a connection's TLS handshake must end within
``request_timeout`` seconds, else that connection is closed (tls.py).
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import time

import numpy
import trio

from . import budgets, peers, protocol, sasl, sending, tls
from .access import Client, identity_of
from .broker import Broker
from .protocol import (
    API_VERSIONS,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    BadRequest,
    Region,
    Reply,
)

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 100 * 1024 * 1024
REQUEST_TIMEOUT = 30.0
MAX_CONNECTIONS = 1000
LOG_PER_SECOND = 10  # closed connections logged per second at most


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
        queued_max_request_bytes: int = budgets.QUEUED_MAX_REQUEST_BYTES,
        idle_timeout: float = budgets.CONNECTIONS_MAX_IDLE_MS / 1000,
        max_connections_per_ip: int = budgets.MAX_CONNECTIONS_PER_IP,
        max_connections_per_user: int = budgets.MAX_CONNECTIONS_PER_USER,
        failed_authentication_delay: float = budgets.FAILED_AUTHENTICATION_DELAY_MS / 1000,
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
        self.idle_timeout = idle_timeout
        self.memory = budgets.RequestMemory(queued_max_request_bytes)
        self.slots = budgets.ConnectionSlots(max_connections_per_ip, max_connections_per_user)
        self.failures = budgets.FailedAuthentications(failed_authentication_delay)
        self.connections = 0
        self.opened = 0  # connections accepted so far: each one's number
        self.closed_idle = 0  # connections closed for sending nothing
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
        secure, key = None, None
        try:
            key = await self._client_key(stream.socket)
            refused = self.slots.take(key)
            if refused is not None:
                key = None
                raise BadRequest(refused)
            if self.ssl_context is not None:
                secure = await tls.handshake(stream, self.ssl_context, self.request_timeout)
            self.opened += 1
            connection = Connection(self, stream, secure, key, self.opened)
            try:
                await connection.serve()
            finally:
                self.broker.disconnected(connection.number)
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
            if key is not None:
                self.slots.give(key)
            if secure is not None:
                await trio.aclose_forcefully(secure)
            await trio.aclose_forcefully(stream)

    @staticmethod
    async def _client_key(sock) -> tuple:
        """Who ``sock``'s connection counts against (budgets.client_key)."""
        try:
            peer, local = sock.getpeername(), sock.getsockname()
        except OSError:
            raise trio.BrokenResourceError from None  # already gone
        return budgets.client_key(await peers.peer_uid(peer, local), str(peer[0]))


class Connection:
    """One client's connection: read a frame, answer it, repeat.

    Args:
        listener: the listener it came to.
        stream: the TCP connection.
        secure: its TLS stream, when the listener speaks TLS (then every byte
            goes through it).
        key: who it counts against (budgets.client_key).
        number: the listener's number for it.
    """

    def __init__(
        self,
        listener: Listener,
        stream: trio.SocketStream,
        secure: trio.SSLStream | None = None,
        key: tuple | None = None,
        number: int = 0,
    ) -> None:
        self.listener = listener
        self.key, self.number = key, number
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
        self.held = 0  # bytes of the request budget the frame being answered holds
        self.frame: memoryview | None = None  # the frame received, until parsed

    async def serve(self) -> None:
        memory = self.listener.memory
        if self.credentials is None:  # who the client is: the owner of its socket (peers.py)
            known = self.key is not None and self.key[0] == "uid"
            self.uid = self.key[1] if known else None
            self.who = identity_of(False, None, self.uid)
        while True:
            head = await self._head()
            if head is None:
                return
            size, started = head
            if not 0 < size <= self.listener.max_request_bytes:
                raise BadRequest(
                    f"a request of {size} bytes (at most {self.listener.max_request_bytes})"
                )
            waiting = trio.current_time()
            self.held = await memory.hold(size, self.key)
            try:
                # The frame's time starts at its first byte, less the wait for the budget.
                deadline = started + self.listener.request_timeout
                view, got = self._ready(size)
                self.frame = await self._rest(view, got, deadline + trio.current_time() - waiting)
                if self.frame is None:
                    raise BadRequest(
                        f"a request of {size} bytes did not arrive within "
                        f"{self.listener.request_timeout:g} s"
                    )
                await self._answer()
            finally:
                self.frame = None
                self._let_go()

    def _let_go(self) -> None:
        """Give the frame's bytes back to the request budget."""
        self.listener.memory.release(self.held, self.key)
        self.held = 0

    async def _head(self) -> tuple[int, float] | None:
        """The next frame's size and when its first byte came; None when the
        client closed the connection, or sent nothing for the idle timeout.

        Raises:
            BadRequest: the size field was begun and not finished in time.
        """
        view, got = self._ready(4)
        if not got:
            with trio.move_on_after(self.listener.idle_timeout) as idle:
                got = await self._receive(1, first=True, into=view[:1]) is not None
            if idle.cancelled_caught:
                self.listener.closed_idle += 1
                return None
            if not got:
                return None
        started = trio.current_time()
        head = await self._rest(view, got, started + self.listener.request_timeout)
        if head is None:
            raise BadRequest(
                f"a request's size field did not arrive within {self.listener.request_timeout:g} s"
            )
        return protocol.frame_size(bytes(head)), started

    async def _answer(self) -> None:
        """Answer the request in ``self.frame``. Its bytes go back to the budget
        once parsed, but a Produce's (its records are views of the frame) only
        once answered."""
        frame, self.frame = self.frame, None  # the one reference: dropped once parsed
        if self.raw_token_expected:  # SaslHandshake v0: bare tokens, bare answers
            try:
                answer = sasl.step(self.exchange, bytes(frame))
            except sasl.Failed as e:
                await self.listener.failures.wait(self.key)
                raise BadRequest(f"SASL authentication failed: {e}") from None
            await self.stream.send_all(len(answer).to_bytes(4, "big") + answer)
            if self.exchange.done:
                self._authenticated()
            return
        started = time.perf_counter()
        request = protocol.read_request(frame)
        del frame
        if request.api_key != PRODUCE:
            self._let_go()
        broker, refused = self.listener.broker, None
        if request.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and request.body is not None:
            reply, refused = self._sasl(request)
        elif self.credentials is not None and self.user is None and request.api_key != API_VERSIONS:
            raise BadRequest(f"request {request.api_key} before SASL authentication")
        else:
            who = (self.user, self.peer, self.uid, self.who, self.number)
            reply = await broker.handle(request, Client(*self.advertised, *who))
        if reply is not None:  # else acks=0: Kafka's broker does not answer
            if refused:  # Kafka's connection.failed.authentication.delay.ms, per client
                await self.listener.failures.wait(self.key)
            try:
                await self._send(protocol.encode_response(request, reply))
            finally:
                reply.close()
        else:  # a request read without waiting yields here, as an answer's sending does
            await trio.lowlevel.checkpoint()
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

    def _ready(self, n: int) -> tuple[memoryview, int]:
        """A buffer for ``n`` bytes, and how many the socket held (0 too at the
        stream's end: `_receive` tells), with no wait nor timeout scope: most
        requests are there whole once their size field is."""
        view = memoryview(numpy.empty(n, numpy.uint8))  # not zero-filled: received into
        if self.secure is not None:
            return view, 0
        try:
            return view, os.readv(self.socket.fileno(), [view])
        except BlockingIOError:
            return view, 0

    async def _rest(self, view: memoryview, got: int, deadline: float) -> memoryview | None:
        """``view`` once its bytes from ``got`` on are received (a timeout scope
        only if some are missing); None if they did not arrive by ``deadline``."""
        if got == len(view):
            return view.toreadonly()
        with trio.move_on_at(deadline):
            return await self._receive(len(view), into=view, got=got)
        return None

    async def _receive(
        self, n: int, first: bool = False, into: memoryview | None = None, got: int = 0
    ) -> memoryview | None:
        """``n`` bytes received straight into their buffer (``into``: its first
        ``got`` are); None at a clean end of the stream before the first."""
        view = memoryview(numpy.empty(n, numpy.uint8)) if into is None else into
        while got < n:
            if self.secure is not None:
                # Bounded: the TLS layer allocates what is asked for, per read.
                chunk = await self.secure.receive_some(min(n - got, tls.CHUNK))
                count = len(chunk)
                view[got : got + count] = chunk
            else:
                count = await sending.receive_into(self.socket, view[got:])
            if not count:
                if first and not got:
                    return None
                raise BadRequest("the connection closed inside a request")
            got += count
        return view.toreadonly()

    async def _send(self, parts: list[bytes | Region]) -> None:
        if self.secure is None:
            await sending.send_parts(self.socket, parts)  # regions by sendfile
            return
        for part in parts:
            if isinstance(part, Region):
                await tls.send_region(self.secure, part)  # no sendfile through TLS
            elif part:
                await self.stream.send_all(part)
