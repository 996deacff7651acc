"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server's
side, as Kafka's broker speaks it: no channel binding, the messages carried by
SaslAuthenticate (or bare frames after SaslHandshake v0)::

    client-first   n,[a=authzid],n=user,r=client-nonce[,extensions]
    server-first   r=client-nonce+server-nonce,s=base64(salt),i=iterations
    client-final   c=base64(gs2-header),r=nonce[,extensions],p=base64(proof)
    server-final   v=base64(server-signature)

The server keeps per user and mechanism only the salt, the iteration count,
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from typing import NamedTuple

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096  # Kafka's minimum for SCRAM credentials
SALT_BYTES = 16

_SASLNAME = re.compile(r"(?:[^=,]|=2C|=3D)+")  # RFC 5802: "," and "=" escaped
_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII but ","


class Failed(Exception):
    """The exchange failed; the message says why (never which users exist)."""


class Keys(NamedTuple):
    """What the server keeps of a password for one mechanism."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def derive(
    password: str, mechanism: str, salt: bytes | None = None, iterations: int = ITERATIONS
) -> Keys:
    """The keys of ``password`` for ``mechanism`` (a random salt unless given)."""
    name = HASHES[mechanism]
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    return Keys(salt, iterations, stored_key, hmac.digest(salted, b"Server Key", name))


class ScramServer:
    """One connection's SCRAM exchange: `step` takes the client's message and
    returns the server's, twice; then `user` is the authenticated user.

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        lookup: a user's keys. For a user that does not exist it must return
            keys that no proof matches (with a salt that stays the same), so the
            exchange does not tell which users exist.
        nonce: the server's nonce (random unless given).
    """

    def __init__(
        self, mechanism: str, lookup: Callable[[str], Keys], nonce: str | None = None
    ) -> None:
        self.hash = HASHES[mechanism]
        self.lookup = lookup
        self.server_nonce = nonce or secrets.token_urlsafe(24)
        self.user: str | None = None  # once the client's proof is checked
        self.done = False
        self._state = "first"
        self._keys: Keys | None = None
        self._name = ""
        self._gs2 = self._client_first_bare = self._server_first = ""
        self._client_nonce = self._nonce = ""

    def step(self, message: bytes) -> bytes:
        """The answer to the client's next message.

        Raises:
            Failed: a malformed message, a nonce or channel binding that does
                not match, a wrong proof, or a message after the last.
        """
        try:
            text = message.decode()
        except UnicodeDecodeError:
            raise Failed("a SCRAM message that is not UTF-8") from None
        state, self._state = self._state, "ended"  # a failed step ends the exchange
        if state == "first":
            answer = self._first(text)
            self._state = "final"
            return answer.encode()
        if state == "final":
            return self._final(text).encode()
        raise Failed("a SCRAM message after the exchange ended")

    def _first(self, text: str) -> str:
        flag, authzid, bare = (text.split(",", 2) + ["", ""])[:3]
        if flag not in ("n", "y"):  # "p=": channel binding, which is not offered
            raise Failed("channel binding is not supported (expected gs2 flag n)")
        attributes = bare.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("n="):
            raise Failed("a client-first message without n=user (or with m=)")
        name, nonce = attributes[0][2:], attributes[1]
        if not nonce.startswith("r=") or not _NONCE.fullmatch(nonce[2:]):
            raise Failed("a client-first message without a printable nonce r=")
        if not _SASLNAME.fullmatch(name):
            raise Failed("a malformed user name")
        user = name.replace("=2C", ",").replace("=3D", "=")
        if authzid and (not authzid.startswith("a=") or authzid[2:] != name):
            raise Failed("an authorization identity other than the user")
        if "tokenauth=true" in attributes[2:]:
            raise Failed("delegation tokens are not supported")
        self._name, self._keys = user, self.lookup(user)
        self._gs2 = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._client_nonce = nonce[2:]
        self._nonce = self._client_nonce + self.server_nonce
        salt = base64.b64encode(self._keys.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._keys.iterations}"
        return self._server_first

    def _final(self, text: str) -> str:
        without_proof, sep, proof = text.rpartition(",p=")
        attributes = without_proof.split(",")
        if not sep or len(attributes) < 2:
            raise Failed("a client-final message without c=, r= and p=")
        binding = base64.b64encode(self._gs2.encode()).decode()
        if attributes[0] != f"c={binding}":
            raise Failed("the channel binding differs from the client-first message")
        # librdkafka 2.0 (kcat 1.7) repeats the client's nonce before the whole nonce;
        # Kafka's broker accepts it (it checks only the end): so does logfs.
        if attributes[1] not in (f"r={self._nonce}", f"r={self._client_nonce}{self._nonce}"):
            raise Failed("the nonce differs from the server's")
        try:
            proof_bytes = base64.b64decode(proof, validate=True)
        except ValueError:
            raise Failed("a proof that is not base64") from None
        keys = self._keys
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(keys.stored_key, auth_message, self.hash)
        if len(proof_bytes) != len(signature):
            raise Failed("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof_bytes, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), keys.stored_key):
            raise Failed("invalid credentials")
        self.user, self.done = self._name, True
        verifier = hmac.digest(keys.server_key, auth_message, self.hash)
        return "v=" + base64.b64encode(verifier).decode()
