"""SASL/PLAIN authentication of a connection: SaslHandshake v1 then
SaslAuthenticate, as Kafka's clients do since KIP-152, or SaslHandshake v0
then the bare token in a frame of its own (answered by an empty frame).

With a credentials file every connection must authenticate before any request
other than ApiVersions and the two SASL ones; an unauthenticated request or a
failed authentication closes the connection (as Kafka's broker does). The
file has one ``user:password`` per line (``#`` starts a comment); keep it
readable by the daemon's user only.
"""

from __future__ import annotations

import datetime
import hmac
from pathlib import Path

from ..core.errors import LogfsError
from .protocol import SASL_AUTHENTICATE, SASL_HANDSHAKE, ErrorCode, make, schema

MECHANISMS = ("PLAIN",)


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


def handshake(request):
    """The answer to SaslHandshake; whether the mechanism is served."""
    m = schema(SASL_HANDSHAKE, request.version)
    served = request.body.mechanism in MECHANISMS
    code = ErrorCode.none if served else ErrorCode.unsupported_sasl_mechanism
    return make(m.SaslHandshakeResponse, error_code=code, mechanisms=MECHANISMS), served


def authenticate(request, users: dict[str, str]):
    """The answer to SaslAuthenticate, and the authenticated user or None."""
    m = schema(SASL_AUTHENTICATE, request.version)
    user = check_plain(bytes(request.body.auth_bytes), users)
    code = ErrorCode.none if user else ErrorCode.sasl_authentication_failed
    body = make(
        m.SaslAuthenticateResponse,
        error_code=code,
        error_message=None if user else "authentication failed: invalid username or password",
        auth_bytes=b"",
        session_lifetime=datetime.timedelta(0),
    )
    return body, user


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
