"""Who is at the other end of a loopback connection: the uid that owns the
client's socket, from the kernel's socket tables (docs/kafka.md, Who a
client is).

One NETLINK_SOCK_DIAG request (``SOCK_DIAG_BY_FAMILY``, an ``inet_diag_req_v2``
naming the client socket's exact 4-tuple: its local address and port are
the connection's remote ones) asks the kernel for that one socket; the
answer's ``inet_diag_msg`` carries its owner's uid. The cost does not grow
with the number of sockets, as reading /proc/net/tcp would. Asked once per
connection, at accept, through a non-blocking netlink socket on the event
loop, within `LOOKUP_TIMEOUT` seconds.

Only a peer on a loopback address is looked up: such a socket lives in this
network namespace, on this machine. Anything else (another machine, another
namespace through a bridge, a socket gone or not found) has no local uid.

Message layouts (linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h; native
byte order unless said)::

    nlmsghdr         len u32, type u16, flags u16, seq u32, pid u32
    inet_diag_req_v2 family u8, protocol u8, ext u8, pad u8, states u32, sockid
    inet_diag_sockid sport be16, dport be16, src be32[4], dst be32[4], if u32, cookie u32[2]
    inet_diag_msg    family u8, state u8, timer u8, retrans u8, sockid,
                     expires u32, rqueue u32, wqueue u32, uid u32, inode u32
    nlmsgerr         error s32 (a negative errno), then the request's header
"""

from __future__ import annotations

import ipaddress
import socket
import struct

import trio

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NO_COOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF
LOOKUP_TIMEOUT = 1.0

HEADER = struct.Struct("=IHHII")
SOCKID = struct.Struct("!HH16s16s")  # ports and addresses, big-endian
TAIL = struct.Struct("=III")  # interface, cookie
REQUEST = struct.Struct("=BBBBI")
MESSAGE = struct.Struct("=BBBB")
COUNTERS = struct.Struct("=IIIII")  # expires, rqueue, wqueue, uid, inode
ERROR = struct.Struct("=i")


def loopback(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an address if it is a loopback one (a v4-mapped v6 address
    as its v4 address), else None."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address if address.is_loopback else None


def request(peer: tuple[str, int], local: tuple[str, int]) -> bytes | None:
    """The netlink request for the socket at ``peer`` connected to ``local``
    (None unless both are loopback addresses of one family)."""
    src, dst = loopback(peer[0]), loopback(local[0])
    if src is None or dst is None or src.version != dst.version:
        return None
    family = socket.AF_INET if src.version == 4 else socket.AF_INET6
    sockid = SOCKID.pack(
        peer[1], local[1], src.packed.ljust(16, b"\0"), dst.packed.ljust(16, b"\0")
    )
    body = (
        REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_STATES)
        + sockid
        + TAIL.pack(0, NO_COOKIE, NO_COOKIE)
    )
    return HEADER.pack(HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + body


def answer(data: bytes) -> int | None:
    """The uid in the kernel's answer, or None (an error: no such socket)."""
    if len(data) < HEADER.size:
        return None
    length, kind, _, _, _ = HEADER.unpack_from(data)
    if kind == NLMSG_ERROR or kind != SOCK_DIAG_BY_FAMILY:
        return None
    at = HEADER.size + MESSAGE.size + SOCKID.size + TAIL.size
    if length < at + COUNTERS.size or len(data) < at + COUNTERS.size:
        return None
    return COUNTERS.unpack_from(data, at)[3]


async def peer_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The uid owning the client socket of a connection from ``peer`` to
    ``local`` (addresses as getpeername and getsockname give them), or None:
    not a loopback connection, or the kernel does not know the socket."""
    message = request(peer[:2], local[:2])
    if message is None:
        return None
    try:
        sock = trio.socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    except OSError:
        return None
    with sock, trio.move_on_after(LOOKUP_TIMEOUT):
        try:
            await sock.sendto(message, (0, 0))
            return answer(await sock.recv(8192))
        except OSError:
            return None
    return None
