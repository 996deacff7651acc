"""How a connection to a Kafka listener is secured, with kafka-python's option
names: ``security_protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
``sasl_mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with
``sasl_plain_username``/``sasl_plain_password`` (for SCRAM too), ``ssl_cafile``
and ``ssl_check_hostname``.

TLS is Python's ``ssl`` with a default client context: the server's
certificate must chain to ``ssl_cafile`` (else to the system's CAs) and, unless
``ssl_check_hostname`` is false, name the host connected to (Kafka's
``ssl.endpoint.identification.algorithm=https``). SASL runs after TLS:
SaslHandshake v1, then the mechanism's messages in SaslAuthenticate requests.
Every failure is a one-line `WireError` (`AuthenticationError` for refused
credentials) naming the server.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
from collections.abc import Callable

from ..errors import InvalidConfigError, LogfsError
from .scram import HASHES, ScramClient, ScramError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *HASHES)
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class WireError(LogfsError):
    """The broker could not be reached, or answered with an unexpected error."""


class AuthenticationError(WireError):
    """The broker refused the SASL credentials, does not offer the mechanism, or
    (SCRAM) could not prove that it holds the user's keys."""


@dataclasses.dataclass(frozen=True)
class Security:
    """A connection's security settings (`of` checks them)."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    cafile: str | None = None
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def of(
        cls,
        security_protocol: str | None = None,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        ssl_cafile: str | None = None,
        ssl_check_hostname: bool = True,
    ) -> Security:
        """The settings of kafka-python's keywords; without ``security_protocol``,
        SASL_PLAINTEXT if credentials are given, else PLAINTEXT.

        Raises:
            InvalidConfigError: an unknown protocol or mechanism, credentials
                without SASL or SASL without them, ``ssl_cafile`` without TLS.
        """
        credentials = (sasl_plain_username, sasl_plain_password)
        if security_protocol is None:
            security_protocol = "PLAINTEXT" if credentials == (None, None) else "SASL_PLAINTEXT"
        protocol = security_protocol.strip().upper()
        mechanism = (sasl_mechanism or "PLAIN").strip().upper()
        if protocol not in PROTOCOLS:
            raise InvalidConfigError(
                f"security_protocol {security_protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        settings = cls(protocol, mechanism, *credentials, ssl_cafile, bool(ssl_check_hostname))
        if settings.sasl:
            if mechanism not in MECHANISMS:
                raise InvalidConfigError(
                    f"sasl_mechanism {sasl_mechanism!r} is not one of {', '.join(MECHANISMS)}"
                )
            if None in credentials:
                raise InvalidConfigError(
                    f"security_protocol {protocol} needs sasl_plain_username and "
                    "sasl_plain_password"
                )
        elif credentials != (None, None) or sasl_mechanism is not None:
            raise InvalidConfigError(
                f"SASL settings need security_protocol SASL_PLAINTEXT or SASL_SSL, not {protocol}"
            )
        if ssl_cafile is not None and not settings.tls:
            raise InvalidConfigError(
                f"ssl_cafile needs security_protocol SSL or SASL_SSL, not {protocol}"
            )
        return settings

    def context(self) -> ssl.SSLContext | None:
        """The TLS client context (None without TLS): the CA file is read here.

        Raises:
            InvalidConfigError: ``ssl_cafile`` unreadable or holding no PEM certificate.
        """
        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.cafile)
        except ssl.SSLError as e:
            raise InvalidConfigError(
                f"ssl_cafile {self.cafile}: not a PEM file of CA certificates ({e.reason or e})"
            ) from None
        except OSError as e:
            raise InvalidConfigError(f"ssl_cafile {self.cafile}: {e.strerror}") from None
        context.check_hostname = self.check_hostname
        return context


def wrap(sock: socket.socket, context: ssl.SSLContext, host: str, name: str) -> ssl.SSLSocket:
    """``sock`` after a TLS handshake with the server at ``host``.

    Raises:
        WireError: the handshake failed (the certificate's chain or name, a server
            that does not speak TLS, a timeout), in one line.
    """
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as e:
        hint = "" if "mismatch" not in str(e.verify_message) else " (ssl_check_hostname)"
        why = f"certificate verify failed: {e.verify_message}{hint}"
    except (ssl.SSLEOFError, ConnectionError):
        why = "the server closed the connection (does it serve TLS?)"
    except ssl.SSLError as e:
        why = f"{e.reason or e} (does the server serve TLS?)"
    except TimeoutError:
        why = "no answer in time"
    except OSError as e:
        why = e.strerror or str(e)
    sock.close()
    raise WireError(f"{name}: TLS handshake failed: {why}")


def authenticate(exchange: Callable, settings: Security, name: str) -> None:
    """SaslHandshake v1, then the mechanism's messages in SaslAuthenticate requests.

    Args:
        exchange: sends one request (api key and fields) and returns its answer.
        settings: with SASL.
        name: the server, for messages.

    Raises:
        AuthenticationError: the mechanism is not offered, the credentials are
            refused, or a SCRAM server's messages or signature are wrong.
    """
    mechanism, user = settings.mechanism, settings.username
    answer = exchange(SASL_HANDSHAKE, mechanism=mechanism)
    if answer.error_code != 0:
        offered = ", ".join(answer.mechanisms) or "none"
        raise AuthenticationError(
            f"{name} does not offer SASL mechanism {mechanism} (it offers {offered})"
        )
    failed = f"{name}: SASL/{mechanism} authentication as {user!r} failed"

    def step(token: bytes) -> bytes:
        answer = exchange(SASL_AUTHENTICATE, auth_bytes=token)
        if answer.error_code != 0:
            why = answer.error_message or getattr(answer.error_code, "name", answer.error_code)
            raise AuthenticationError(f"{failed}: {why}")
        return bytes(answer.auth_bytes or b"")

    if mechanism == "PLAIN":
        step(b"\0" + user.encode() + b"\0" + settings.password.encode())
        return
    client = ScramClient(mechanism, user, settings.password)
    try:
        client.verify(step(client.final(step(client.first()))))
    except ScramError as e:
        raise AuthenticationError(f"{failed}: {e}") from None
