"""Where the listener listens: ``[HOST:]PORT`` parsed, and the rule that a
listener other machines can reach authenticates its clients."""

from __future__ import annotations

import ipaddress
import socket

from ..core.errors import LogfsError


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
