"""Who is at the other end of a loopback connection (kafka/peers.py): the
kernel's socket tables asked for one exact 4-tuple over NETLINK_SOCK_DIAG,
checked against the owner /proc/net/tcp{,6} lists for the same socket and
against a client run as another user."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import trio

from logfs.kafka import peers

NOBODY = 65534


def proc_net_uid(local: tuple) -> int | None:
    """The uid /proc/net/tcp{,6} lists for the socket bound to ``local``'s
    port (an independent reading of the same table)."""
    port = f"{local[1]:04X}"
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[1].endswith(":" + port):
                    return int(fields[7])
    return None


async def accepted_uid(family: int, host: str, client_cmd: list[str] | None = None):
    """Listen on ``host``, connect a client (here, or ``client_cmd`` given the
    port), and answer the uid peers.py finds for the accepted connection and
    the client's port."""
    listener = trio.socket.socket(family, socket.SOCK_STREAM)
    await listener.bind((host, 0))
    listener.listen()
    port = listener.getsockname()[1]
    proc = None
    client = None
    if client_cmd is None:
        client = socket.socket(family, socket.SOCK_STREAM)
        client.connect((host, port))
    else:
        proc = subprocess.Popen([*client_cmd, str(port)], stdin=subprocess.PIPE)
    try:
        with listener:
            conn, _ = await listener.accept()
            with conn:
                peer, local = conn.getpeername(), conn.getsockname()
                return await peers.peer_uid(peer, local), proc_net_uid(peer)
    finally:
        if client is not None:
            client.close()
        if proc is not None:
            proc.stdin.close()
            proc.wait(timeout=10)


@pytest.mark.parametrize(
    ("family", "host"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]
)
def test_the_uid_of_a_loopback_client_is_its_sockets_owner(family, host):
    uid, listed = trio.run(accepted_uid, family, host)
    assert uid == os.geteuid() == listed


@pytest.mark.skipif(os.geteuid() != 0, reason="running a client as another user takes root")
def test_a_client_run_as_another_user_is_that_user():
    script = (
        "import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])));"
        " sys.stdin.read()"
    )
    cmd = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    uid, listed = trio.run(
        accepted_uid, socket.AF_INET, "127.0.0.1", [*cmd, sys.executable, "-c", script]
    )
    assert uid == NOBODY == listed


def test_only_loopback_peers_are_looked_up():
    assert peers.request(("10.0.0.1", 5000), ("127.0.0.1", 9092)) is None
    assert peers.request(("127.0.0.1", 5000), ("::1", 9092)) is None  # families differ
    assert peers.request(("::ffff:127.0.0.1", 5000), ("::ffff:127.0.0.1", 9092)) is not None
    assert peers.loopback("127.3.4.5") is not None
    assert peers.loopback("not an address") is None
    assert trio.run(peers.peer_uid, ("192.0.2.1", 1), ("192.0.2.2", 2)) is None


def test_a_socket_that_does_not_exist_has_no_uid():
    # nothing listens or connects on these ports: the kernel answers an error
    assert trio.run(peers.peer_uid, ("127.0.0.1", 1), ("127.0.0.1", 2)) is None


def test_an_answer_too_short_or_an_error_is_no_uid():
    assert peers.answer(b"") is None
    error = (
        peers.HEADER.pack(peers.HEADER.size + 4, peers.NLMSG_ERROR, 0, 1, 0) + b"\xfe\xff\xff\xff"
    )
    assert peers.answer(error) is None
    short = peers.HEADER.pack(peers.HEADER.size + 8, peers.SOCK_DIAG_BY_FAMILY, 0, 1, 0) + bytes(8)
    assert peers.answer(short) is None
