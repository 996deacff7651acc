"""A mirror's settings, from ``-o`` options of ``logfs mount`` and ``logfs serve`` or
from ``logfs mirror``'s, checked before anything starts: a mirror out's
(`MirrorSettings`, ``mirror.to``) or a follower's (`FollowerSettings`, ``mirror.from``).

=============================  ==================================================
``mirror.to``                  ``kafka://HOST:PORT[,HOST:PORT...]``; in ``-o``, where commas
                               part options, several servers are joined by ``+``
``mirror.from``                the cluster a follower copies, written as ``mirror.to``
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
``mirror.fetch.max.bytes``     a follower's Fetch: the most record bytes asked for
                               (default 16 MiB: with `source.SLACK`, what it holds at once)
``mirror.max.partition.fetch.bytes``  the most a partition's share (default 1 MiB)
=============================  ==================================================

For a follower ``mirror.id`` is its client id and names its status file (default
``logfs-follower-<host name>``); ``mirror.retention.wait`` does not apply.
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
    "mirror.from",
    "mirror.fetch.max.bytes",
    "mirror.max.partition.fetch.bytes",
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
FETCH_MAX_BYTES, PARTITION_FETCH_BYTES = 16 << 20, 1 << 20
MAX_FETCH = 1 << 30


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
        if "mirror.from" in options:  # `logfs mirror` forwards only; a daemon checks first
            raise InvalidConfigError("mirror.from: a follower runs in `logfs mount` or `serve`")
        to, topics, security, timeout = _common(options, "mirror.to")
        name = _id(options, "logfs-mirror")
        wait = _flag(options, "mirror.retention.wait")
        return cls(to, topics, name, security, timeout, wait)


class FollowerSettings(NamedTuple):
    source: str  # kafka://HOST:PORT[,HOST:PORT...]
    topics: str  # the regex
    id: str  # the client id; the status file's name
    security: wire.Security
    timeout: float  # seconds
    fetch_max_bytes: int = FETCH_MAX_BYTES
    partition_max_bytes: int = PARTITION_FETCH_BYTES

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> FollowerSettings:
        """The settings of ``mirror.from`` and the other ``mirror.*`` options.

        Raises:
            InvalidConfigError: an unknown ``mirror.`` option or a bad value.
        """
        source, topics, security, timeout = _common(options, "mirror.from")
        sizes = [
            _size(options, key, default)
            for key, default in (
                ("mirror.fetch.max.bytes", FETCH_MAX_BYTES),
                ("mirror.max.partition.fetch.bytes", PARTITION_FETCH_BYTES),
            )
        ]
        return cls(source, topics, _id(options, "logfs-follower"), security, timeout, *sizes)


def _common(options: Mapping[str, str], key: str) -> tuple[str, str, wire.Security, float]:
    """The cluster at ``key``, the topics' regex, the security and the timeout."""
    unknown = sorted(k for k in options if k.startswith("mirror.") and k not in OPTIONS)
    if unknown:
        raise InvalidConfigError(
            f"unknown option {unknown[0]}: expected one of {', '.join(OPTIONS)}"
        )
    address = options.get(key, "").replace("+", ",")
    if not wire.is_address(address):
        raise InvalidConfigError(f"{key}={address}: expected kafka://HOST:PORT")
    wire.parse_servers(address)  # InvalidConfigError
    topics = options.get("mirror.topics") or ".*"
    try:
        re.compile(topics)
    except re.error as e:
        raise InvalidConfigError(f"mirror.topics={topics}: {e}") from None
    password = None
    if path := options.get("mirror.sasl.password.file"):
        try:
            with open(path, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as e:
            raise InvalidConfigError(f"mirror.sasl.password.file={path}: {e}") from None
    timeout = options.get("mirror.timeout.ms", "30000")
    if not timeout.isdigit() or not 0 < int(timeout) <= 3_600_000:
        raise InvalidConfigError(f"mirror.timeout.ms={timeout}: expected 1 to 3600000")
    security = wire.Security.of(
        options.get("mirror.security.protocol") or None,
        options.get("mirror.sasl.mechanism") or None,
        options.get("mirror.sasl.username") or None,
        password,
        options.get("mirror.ssl.cafile") or None,
        _flag(options, "mirror.ssl.check.hostname"),
    )  # fmt: skip
    return address, topics, security, int(timeout) / 1000


def _id(options: Mapping[str, str], prefix: str) -> str:
    name = options.get("mirror.id") or f"{prefix}-{socket.gethostname()}"
    if len(name) > MAX_ID or not name.isprintable():
        raise InvalidConfigError(f"mirror.id: at most {MAX_ID} printable characters")
    return name


def _size(options: Mapping[str, str], key: str, default: int) -> int:
    value = options.get(key, str(default))
    if not value.isdigit() or not 1024 <= int(value) <= MAX_FETCH:
        raise InvalidConfigError(f"{key}={value}: expected 1024 to {MAX_FETCH}")
    return int(value)


def _flag(options: Mapping[str, str], key: str) -> bool:
    value = options.get(key, "true")
    if value not in ("true", "false"):
        raise InvalidConfigError(f"{key}={value}: expected true or false")
    return value == "true"
