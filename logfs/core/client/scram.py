"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the client's
side, as Kafka's clients speak it: no channel binding (gs2 header ``n,,``), no
SASLprep (Kafka's clients send names and passwords as UTF-8 as they are)::

    client-first   n,,n=user,r=client-nonce
    server-first   r=client-nonce+server-nonce,s=base64(salt),i=iterations
    client-final   c=biws,r=nonce,p=base64(ClientKey XOR HMAC(StoredKey, AuthMessage))
    server-final   v=base64(HMAC(ServerKey, AuthMessage))

The server's signature in server-final is checked: a server that does not hold
the user's keys cannot fake the end of the exchange.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's client refuses fewer iterations than 4096; its broker stores at most 16384,
# and a bound keeps a hostile server from making the client hash for minutes.
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


class ScramError(Exception):
    """The server's messages do not follow SCRAM, or its signature does not match."""


def _attributes(text: str, what: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise ScramError(f"a malformed {what} message")
        out.setdefault(name, value)
    return out


class ScramClient:
    """One SCRAM exchange: `first`, then `final` with the server's first message,
    then `verify` with its final message.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        username, password: the credentials.
        nonce: the client's nonce (random unless given).
    """

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.hash = HASHES[mechanism]
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message, with the proof, for the server-first message.

        Raises:
            ScramError: an error from the server, a nonce that does not extend the
                client's, a bad salt, iterations out of [4096, 16384], or an
                extension the client must understand (``m=``).
        """
        text = server_first.decode(errors="replace")
        if text.startswith("e="):
            raise ScramError(f"the server refused: {text[2:]}")
        attributes = _attributes(text, "server-first")
        if "m" in attributes:
            raise ScramError("the server asks for an extension this client does not know")
        nonce, salt, iterations = (attributes.get(k, "") for k in "rsi")
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise ScramError("the server's nonce does not extend the client's")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except binascii.Error:
            raise ScramError("the server's salt is not base64") from None
        if not iterations.isdigit() or not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise ScramError(
                f"the server asks for {iterations or 'no'} iterations "
                f"(this client accepts {MIN_ITERATIONS} to {MAX_ITERATIONS})"
            )
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), salt_bytes, int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self.hash)
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self.hash)
        self._server_signature = hmac.digest(server_key, auth_message, self.hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature.

        Raises:
            ScramError: an error from the server, or a signature that does not match.
        """
        text = server_final.decode(errors="replace")
        attributes = _attributes(text, "server-final")
        if "e" in attributes:
            raise ScramError(f"the server refused: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except binascii.Error:
            signature = b""
        if not self._server_signature or not hmac.compare_digest(signature, self._server_signature):
            raise ScramError(
                "the server's signature does not match: it does not hold this user's keys"
            )
