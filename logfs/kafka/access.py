"""Which authenticated clients may do what: a SASL principal is the local
user of the same name, and topics follow the owner, group and mode bits the
mount shows for them (DATA's, or the mount's ``uid=``/``gid=``/``umask=``):

- read (Fetch, ListOffsets, DescribeConfigs): the ``r`` bit that applies;
- write (Produce, creating a topic): the ``w`` bit that applies;
- owner (DeleteTopics, CreatePartitions, IncrementalAlterConfigs): the owner.

root may do everything; a principal that is no local user gets the bits for
others. Without SASL (loopback, or anonymous access allowed) every client may
do everything, as every local program may use the mount's files.
"""

from __future__ import annotations

import os
import pwd
from typing import NamedTuple

from ..core.errors import AccessDeniedError

READ, WRITE, OWNER = "read", "write", "owner"
_BITS = {READ: 4, WRITE: 2}


class Access(NamedTuple):
    """The owner, group and permission bits topics have."""

    uid: int
    gid: int
    mode: int

    def allows(self, user: str | None, want: str) -> bool:
        if user is None:  # no authentication configured
            return True
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            uid, groups = None, set()
        else:
            uid = entry.pw_uid
            groups = {entry.pw_gid, *os.getgrouplist(user, entry.pw_gid)}
        if uid == 0:
            return True
        if want == OWNER:
            return uid == self.uid
        bit = _BITS[want]
        if uid == self.uid:
            return bool(self.mode >> 6 & bit)
        if self.gid in groups:
            return bool(self.mode >> 3 & bit)
        return bool(self.mode & bit)


class Client(NamedTuple):
    """Who sent a request: the address it reached, its principal (None when
    the listener does not authenticate), where it came from as Kafka
    shows a client's host (``/127.0.0.1``), and the listener's number for its
    connection (what group members joined over, `Broker.disconnected`)."""

    host: str
    port: int
    user: str | None = None
    peer: str = ""
    connection: int | None = None


def require(broker, client: Client, want: str, topic: str) -> None:
    """Raise `AccessDeniedError` unless ``client`` may ``want`` on ``topic``."""
    if not broker.allows(client, want):
        raise AccessDeniedError(f"{client.user} may not {want} {topic!r}")
