"""SASL authentication of a connection: SaslHandshake v1 then SaslAuthenticate,
as Kafka's clients do since KIP-152, or SaslHandshake v0 then the bare tokens
in frames of their own (each answered by a bare frame).

Mechanisms: PLAIN (RFC 4616), and SCRAM-SHA-256 and SCRAM-SHA-512 (scram.py).
With a credentials file every connection must authenticate before any request
other than ApiVersions and the two SASL ones; an unauthenticated request or a
failed authentication closes the connection (as Kafka's broker does). The
file has one ``user:password`` per line (``#`` starts a comment); keep it
readable by the daemon's user only. SCRAM's salted keys are derived from it
when it is read, with a random salt per user and mechanism and 4096
iterations.
"""

from __future__ import annotations

import datetime
import hmac
import os
from pathlib import Path

from ..core.errors import LogfsError
from . import scram
from .protocol import SASL_AUTHENTICATE, SASL_HANDSHAKE, ErrorCode, make, schema
from .scram import Failed

MECHANISMS = ("PLAIN", *scram.HASHES)
MAX_TOKEN = 8192  # bytes of one SASL message at most (a user, a password, a nonce)


def read_credentials(path: str | Path) -> dict[str, str]:
    """``user -> password`` from a credentials file.

    Raises:
        LogfsError: unreadable, or a line without ``:``.
    """
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise LogfsError(f"{path}: {e.strerror}") from None
    users = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user:
            raise LogfsError(f"{path}, line {number}: expected user:password")
        users[user] = password
    if not users:
        raise LogfsError(f"{path}: no user:password line")
    return users


class Credentials:
    """The passwords, and SCRAM's keys derived from them once."""

    def __init__(self, passwords: dict[str, str]) -> None:
        self.passwords = passwords
        self.scram = {
            mechanism: {
                user: scram.derive(password, mechanism) for user, password in passwords.items()
            }
            for mechanism in scram.HASHES
        }
        self._secret = os.urandom(32)  # the salts of users that do not exist

    def keys(self, mechanism: str, user: str) -> scram.Keys:
        """A user's SCRAM keys; for an unknown user a salt that stays the same
        and keys that no proof matches, so the answer does not tell."""
        found = self.scram[mechanism].get(user)
        if found is not None:
            return found
        salt = hmac.digest(self._secret, f"{mechanism}\0{user}".encode(), "sha256")
        return scram.Keys(salt[: scram.SALT_BYTES], scram.ITERATIONS, os.urandom(64), b"")


class Plain:
    """A PLAIN exchange: one message, no answer."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.user: str | None = None
        self.done = False

    def step(self, token: bytes) -> bytes:
        self.user = check_plain(token, self.credentials.passwords)
        if self.user is None:
            raise Failed("invalid username or password")
        self.done = True
        return b""


def start(mechanism: str, credentials: Credentials) -> Plain | scram.ScramServer:
    """The exchange for a mechanism of `MECHANISMS`."""
    if mechanism == "PLAIN":
        return Plain(credentials)
    return scram.ScramServer(mechanism, lambda user: credentials.keys(mechanism, user))


def step(exchange: Plain | scram.ScramServer, token: bytes) -> bytes:
    """The exchange's answer to ``token``, bounded in size.

    Raises:
        Failed: authentication failed.
    """
    if len(token) > MAX_TOKEN:
        raise Failed(f"a SASL message over {MAX_TOKEN} bytes")
    return exchange.step(token)


def handshake(request):
    """The answer to SaslHandshake; whether the mechanism is served."""
    m = schema(SASL_HANDSHAKE, request.version)
    served = request.body.mechanism in MECHANISMS
    code = ErrorCode.none if served else ErrorCode.unsupported_sasl_mechanism
    return make(m.SaslHandshakeResponse, error_code=code, mechanisms=MECHANISMS), served


def authenticate(request, exchange: Plain | scram.ScramServer):
    """The answer to SaslAuthenticate, and why authentication failed (or None)."""
    m = schema(SASL_AUTHENTICATE, request.version)
    try:
        answer, failed = step(exchange, bytes(request.body.auth_bytes)), None
    except Failed as e:
        answer, failed = b"", str(e)
    body = make(
        m.SaslAuthenticateResponse,
        error_code=ErrorCode.sasl_authentication_failed if failed else ErrorCode.none,
        error_message=f"authentication failed: {failed}" if failed else None,
        auth_bytes=answer,
        session_lifetime=datetime.timedelta(0),
    )
    return body, failed


def check_plain(token: bytes, users: dict[str, str]) -> str | None:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``; authzid empty or the user."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        return None
    expected = users.get(user)
    # Compared even for an unknown user, so the time taken does not tell which users exist.
    good = hmac.compare_digest(password.encode(), (expected or "\0").encode())
    if expected is None or not good or authzid not in ("", user):
        return None
    return user
