"""TLS on the listener (Kafka's SSL and SASL_SSL listeners): the server's
context from PEM files, a connection's handshake, and a Fetch answer's record
bytes through the TLS stream.

Under TLS the record bytes must be encrypted in user space, so they cannot go
by ``sendfile`` (Kafka loses zero copy under TLS too): they are read from the
segment file with ``os.pread`` in chunks of `CHUNK` bytes and written to the
stream, so an answer never sits in memory whole.
"""

from __future__ import annotations

import os
import ssl

import trio

from ..core.errors import LogfsError
from .protocol import BadRequest, Region

CHUNK = 256 * 1024  # record bytes read and encrypted at a time


def server_context(certfile: str, keyfile: str | None = None) -> ssl.SSLContext:
    """A server-side TLS 1.2+ context with the certificate chain in ``certfile``
    and its private key in ``keyfile`` (or in ``certfile`` too), both PEM.

    Raises:
        LogfsError: a file missing or unreadable, not PEM, a key that does not
            match the certificate, or a key protected by a passphrase.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2

    def no_passphrase() -> bytes:
        # Without this, OpenSSL would ask for the passphrase on the terminal.
        raise LogfsError(f"{keyfile or certfile}: the private key is protected by a passphrase")

    try:
        context.load_cert_chain(certfile, keyfile, password=no_passphrase)
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            raise LogfsError(
                f"{keyfile or certfile}: the key does not match the certificate"
            ) from None
        raise LogfsError(
            f"{certfile}{', ' + keyfile if keyfile else ''}: not a PEM certificate chain "
            f"and its private key ({e.reason or e})"
        ) from None
    except OSError as e:
        raise LogfsError(f"{e.filename or certfile}: {e.strerror}") from None
    return context


async def handshake(
    stream: trio.SocketStream, context: ssl.SSLContext, timeout: float
) -> trio.SSLStream:
    """The connection's TLS stream once its handshake is done.

    Raises:
        BadRequest: the handshake failed (a client that does not speak TLS,
            no common version or cipher) or did not end within ``timeout`` seconds.
    """
    secure = trio.SSLStream(stream, context, server_side=True)
    with trio.move_on_after(timeout) as scope:
        try:
            await secure.do_handshake()
        except trio.BrokenResourceError as e:
            why = getattr(e.__cause__, "reason", None) or e.__cause__ or "the client went away"
            raise BadRequest(f"TLS handshake failed: {why}") from None
    if scope.cancelled_caught:
        raise BadRequest(f"the TLS handshake did not end within {timeout:g} s")
    return secure


async def send_region(stream: trio.abc.SendStream, region: Region) -> None:
    """The region's bytes to ``stream``, `CHUNK` bytes at a time.

    Raises:
        trio.BrokenResourceError: the file ended before the region did
            (retention removed the segment's bytes): the frame cannot be finished.
    """
    position, left = region.position, region.size
    while left:
        chunk = os.pread(region.fd, min(CHUNK, left), position)
        if not chunk:
            raise trio.BrokenResourceError("the segment file ended early")
        await stream.send_all(chunk)
        position += len(chunk)
        left -= len(chunk)
