"""A mirror's settings, from ``-o`` options of ``logfs mount`` and ``logfs serve`` or
from ``logfs mirror``'s, checked before anything starts.

=============================  ==================================================
``mirror.to``                  ``kafka://HOST:PORT[,HOST:PORT...]``; in ``-o``, where commas
                               part options, several servers are joined by ``+``
``mirror.topics``              a regular expression the whole topic name matches
                               (default every topic; internal topics never)
``mirror.id``                  the transactional id and the group of the positions on
                               the cluster: one per mirrored data directory (default
                               ``logfs-mirror-<host name>``)
``mirror.security.protocol``   PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
``mirror.sasl.mechanism``      PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
``mirror.sasl.username``       the SASL user
``mirror.sasl.password.file``  a file whose first line is the password (a password
                               in ``-o`` would show in ``ps``)
``mirror.ssl.cafile``          the PEM file of the CAs the cluster's certificate is
                               checked against (default: the system's)
``mirror.ssl.check.hostname``  true (default) or false
``mirror.timeout.ms``          to connect and for each answer (default 30000)
``mirror.retention.wait``      true (default): a daemon's retention keeps the segments its
                               mirror has not forwarded; false: it deletes them as ever,
                               and the mirror counts the records lost
=============================  ==================================================
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from typing import NamedTuple

from ..core.client import wire
from ..core.errors import InvalidConfigError

OPTIONS = (
    "mirror.to",
    "mirror.topics",
    "mirror.id",
    "mirror.security.protocol",
    "mirror.sasl.mechanism",
    "mirror.sasl.username",
    "mirror.sasl.password.file",
    "mirror.ssl.cafile",
    "mirror.ssl.check.hostname",
    "mirror.timeout.ms",
    "mirror.retention.wait",
)
MAX_ID = 249  # a transactional id and a group id are names on the cluster: keep them short


class MirrorSettings(NamedTuple):
    to: str  # kafka://HOST:PORT[,HOST:PORT...]
    topics: str  # the regex
    id: str
    security: wire.Security
    timeout: float  # seconds
    retention_wait: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> MirrorSettings:
        """The settings of ``mirror.*`` options (others are ignored).

        Raises:
            InvalidConfigError: an unknown ``mirror.`` option or a bad value.
        """
        unknown = sorted(k for k in options if k.startswith("mirror.") and k not in OPTIONS)
        if unknown:
            raise InvalidConfigError(
                f"unknown option {unknown[0]}: expected one of {', '.join(OPTIONS)}"
            )
        to = options.get("mirror.to", "").replace("+", ",")
        if not wire.is_address(to):
            raise InvalidConfigError(f"mirror.to={to}: expected kafka://HOST:PORT")
        wire.parse_servers(to)  # InvalidConfigError
        topics = options.get("mirror.topics") or ".*"
        try:
            re.compile(topics)
        except re.error as e:
            raise InvalidConfigError(f"mirror.topics={topics}: {e}") from None
        name = options.get("mirror.id") or f"logfs-mirror-{socket.gethostname()}"
        if len(name) > MAX_ID or not name.isprintable():
            raise InvalidConfigError(f"mirror.id: at most {MAX_ID} printable characters")
        password = None
        if path := options.get("mirror.sasl.password.file"):
            try:
                with open(path, encoding="utf-8") as f:
                    password = f.readline().rstrip("\r\n")
            except (OSError, UnicodeDecodeError) as e:
                raise InvalidConfigError(f"mirror.sasl.password.file={path}: {e}") from None
        check, wait = (
            _flag(options, k) for k in ("mirror.ssl.check.hostname", "mirror.retention.wait")
        )
        timeout = options.get("mirror.timeout.ms", "30000")
        if not timeout.isdigit() or not 0 < int(timeout) <= 3_600_000:
            raise InvalidConfigError(f"mirror.timeout.ms={timeout}: expected 1 to 3600000")
        security = wire.Security.of(
            options.get("mirror.security.protocol") or None,
            options.get("mirror.sasl.mechanism") or None,
            options.get("mirror.sasl.username") or None,
            password,
            options.get("mirror.ssl.cafile") or None,
            check,
        )  # fmt: skip
        return cls(to, topics, name, security, int(timeout) / 1000, wait)


def _flag(options: Mapping[str, str], key: str) -> bool:
    value = options.get(key, "true")
    if value not in ("true", "false"):
        raise InvalidConfigError(f"{key}={value}: expected true or false")
    return value == "true"
