"""One authority for every face: who a client is, what owner, group and mode
each node shows, and the one decision made from them (docs/kafka.md, Who may
do what; docs/operations.md, Security model).

Who asks is a local user (`Identity`): the uid and gid the kernel gives a
mount request; for the Kafka listener the uid owning a loopback client's
socket or the local user a SASL principal names (`of_user`); anything else is
`NOBODY`, as NFS squashes users it cannot map: the bits for others apply.

What nodes show, from DATA's owner and mode (the ``uid=``, ``gid=``, ``umask=``
options over them) and each topic's owner, group and mode M (the store keeps
them in DATA, log/owners.py; a topic without one shows DATA's)::

    the mount's root             DATA's
    <topic>/                     the topic's owner, group and M
    a directory in it            M without set-id and sticky bits
    append*, config, a group's   M & 0666 (a group file: the group's own, below)
    stream, offset/<n>, ...      M & 0444
    <topic>/<p>/groups/          sticky, rwx for each class M gives r and x: whoever
                                 may read the topic may commit for a new group there
    __consumer_offsets ...       root's, 0700 (Kafka's internal topics)

`permits` is the kernel's own rule for ``default_permissions`` (POSIX, no
ACLs): root may do anything; the owner's bits apply to the owner, else the
group's to a member of the group, else the others'; every bit asked must be
there. The mount's kernel checks what `permits` checks on the attributes
above; the listener asks `allowed` for the mount operation each Kafka
operation equals (`TopicOp`, `GroupOp`), on the same owners.
"""

from __future__ import annotations

import enum
import os
import pwd
import stat
import time
from collections import OrderedDict
from typing import NamedTuple

from .config import INTERNAL_TOPICS
from .log import Owner

READ, WRITE, SEARCH = 4, 2, 1
NOBODY_NAME = "nobody"
NOBODY_ID = 65534  # nobody and nogroup where the system names neither
GROUPS_TTL = 10.0  # seconds a user's supplementary groups are kept
GROUPS_KEPT = 4096  # users whose groups are kept at most
INTERNAL = Owner(0, 0, 0o700)  # __consumer_offsets, __transaction_state
KAFKA_UMASK = 0o022  # what a Kafka client creates is made as with this umask


class Identity(NamedTuple):
    """A local user as a request's author: its uid and primary (or the
    request's) gid."""

    uid: int
    gid: int

    @property
    def is_root(self) -> bool:
        return self.uid == 0


ROOT = Identity(0, 0)


def _nobody() -> Identity:
    try:
        entry = pwd.getpwnam(NOBODY_NAME)
    except KeyError:
        return Identity(NOBODY_ID, NOBODY_ID)
    return Identity(entry.pw_uid, entry.pw_gid)


NOBODY = _nobody()


def of_uid(uid: int) -> Identity:
    """The local user ``uid`` with its primary group (a uid without an
    account: nobody's group)."""
    try:
        return Identity(uid, pwd.getpwuid(uid).pw_gid)
    except KeyError:
        return Identity(uid, NOBODY.gid)


def of_user(name: str | None) -> Identity:
    """The local user named ``name`` (a SASL principal), else nobody."""
    if not name:
        return NOBODY
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return NOBODY
    return Identity(entry.pw_uid, entry.pw_gid)


class _Groups:
    """Users' supplementary groups, kept a while and bounded: a lookup may
    read /etc/group or ask NSS."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Identity, tuple[float, frozenset[int]]] = OrderedDict()

    def of(self, who: Identity) -> frozenset[int]:
        now = time.monotonic()
        kept = self._kept.get(who)
        if kept is not None and now - kept[0] < GROUPS_TTL:
            self._kept.move_to_end(who)
            return kept[1]
        try:
            groups = frozenset(os.getgrouplist(pwd.getpwuid(who.uid).pw_name, who.gid))
        except (KeyError, OSError):
            groups = frozenset({who.gid})
        self._kept[who] = (now, groups)
        self._kept.move_to_end(who)
        while len(self._kept) > GROUPS_KEPT:
            self._kept.popitem(last=False)
        return groups


_GROUPS = _Groups()


def in_group(who: Identity, gid: int) -> bool:
    """Whether ``who`` is a member of group ``gid`` (its own gid or a login group)."""
    return who.gid == gid or gid in _GROUPS.of(who)


def permits(who: Identity, owner: Owner, want: int) -> bool:
    """Whether ``who`` has every bit of ``want`` (READ | WRITE | SEARCH) on a
    node showing ``owner``, as the kernel's permission check says."""
    if who.is_root:
        return True
    if who.uid == owner.uid:
        bits = owner.mode >> 6
    elif in_group(who, owner.gid):
        bits = owner.mode >> 3
    else:
        bits = owner.mode
    return bits & want == want


# ---------------------------------------------------------------- what nodes show


class Ownership(NamedTuple):
    """The ``uid=``, ``gid=`` and ``umask=`` mount options (None: DATA's)."""

    uid: int | None = None
    gid: int | None = None
    umask: int | None = None


DATA_OWNER = Ownership()  # no options: DATA's owner, group and modes


def data_owner(data: str | os.PathLike, options: Ownership = DATA_OWNER) -> Owner:
    """What the mount's root shows: DATA's owner, group and mode, or the options'."""
    st = os.stat(data)
    return Owner(
        st.st_uid if options.uid is None else options.uid,
        st.st_gid if options.gid is None else options.gid,
        stat.S_IMODE(st.st_mode) if options.umask is None else 0o777 & ~options.umask,
    )


def new_owner(who: Identity, mode: int, options: Ownership = DATA_OWNER) -> Owner:
    """The owner a topic ``who`` creates with ``mode`` (mkdir's, after the
    umask) gets: its creator's, as on ext4, unless the options say otherwise."""
    return Owner(
        who.uid if options.uid is None else options.uid,
        who.gid if options.gid is None else options.gid,
        stat.S_IMODE(mode) & ~(options.umask or 0),
    )


def topic_owner(store, topic: str, data: Owner) -> Owner:
    """What ``topic``'s directory shows: root's for Kafka's internal topics,
    its own kept in DATA, else DATA's (``data``)."""
    if topic in INTERNAL_TOPICS:
        return INTERNAL
    return store.topic_owner(topic) or data


def inner_mode(topic_mode: int, *, directory: bool = False, writable: bool = False) -> int:
    """The bits a node inside a topic of ``topic_mode`` shows."""
    if directory:
        return topic_mode & 0o777
    return topic_mode & (0o666 if writable else 0o444)


def groups_dir_mode(topic_mode: int) -> int:
    """A partition's ``groups/``: sticky, rwx for each class that may read the topic."""
    bits = stat.S_ISVTX
    for shift in (6, 3, 0):
        if topic_mode >> shift & (READ | SEARCH) == READ | SEARCH:
            bits |= 0o7 << shift
    return bits


def group_shown(owner: Owner | None, data: Owner) -> Owner:
    """What a consumer group's files show: its own owner, else (a group made
    before logfs kept owners) DATA's, as a regular file."""
    return (owner or data)._replace(mode=(owner or data).mode & 0o666)


# ---------------------------------------------------------------- Kafka's operations


class TopicOp(enum.Enum):
    """A Kafka operation on a topic, by the mount operation it equals."""

    DESCRIBE = "ls MNT/<topic>"  # Metadata, DescribeProducers
    READ = "cat MNT/<topic>/<p>/stream"  # Fetch, ListOffsets, a group's offsets
    WRITE = "write MNT/<topic>/<p>/append.batches"  # Produce, transactions
    DESCRIBE_CONFIGS = "cat MNT/<topic>/config"
    ALTER_CONFIGS = "write MNT/<topic>/config"  # AlterConfigs, IncrementalAlterConfigs
    ALTER = "mkdir MNT/<topic>/<n>"  # CreatePartitions
    OWNER = "the topic's owner"  # DeleteRecords: what the mount has no file for


# (node, bits) the kernel checks on the way, after search on the mount's root:
# "topic" the topic directory, "dir" a directory in it, "file"/"ro" a writable or
# read-only file in it. Every node in a topic has the topic's owner and group, so
# one class of bits applies to all of them, masked as `inner_mode` masks the mode.
_MASKS = {"topic": 0o7, "dir": 0o7, "file": 0o6, "ro": 0o4}
_STEPS = {
    TopicOp.DESCRIBE: (("topic", READ),),
    TopicOp.READ: (("topic", SEARCH), ("dir", SEARCH), ("ro", READ)),
    TopicOp.WRITE: (("topic", SEARCH), ("dir", SEARCH), ("file", WRITE)),
    TopicOp.DESCRIBE_CONFIGS: (("topic", SEARCH), ("file", READ)),
    TopicOp.ALTER_CONFIGS: (("topic", SEARCH), ("file", WRITE)),
    TopicOp.ALTER: (("topic", WRITE | SEARCH),),
    TopicOp.OWNER: (("topic", SEARCH),),
}
_NEEDS = {  # op -> the bits of the topic's class each step needs, after its mask
    op: tuple((_MASKS[node], want) for node, want in steps) for op, steps in _STEPS.items()
}


def allowed(who: Identity, op: TopicOp, root: Owner, topic: Owner) -> bool:
    """Whether ``who`` may do ``op`` to a topic showing ``topic`` under a root
    showing ``root``: what the kernel says of its mount operation."""
    if who.is_root:
        return True
    if not permits(who, root, SEARCH):
        return False
    if who.uid == topic.uid:
        bits = topic.mode >> 6
    elif in_group(who, topic.gid):
        bits = topic.mode >> 3
    else:
        bits = topic.mode
    for mask, want in _NEEDS[op]:
        if bits & mask & want != want:
            return False
    return op is not TopicOp.OWNER or who.uid == topic.uid


def may_create(who: Identity, root: Owner) -> bool:
    """``mkdir MNT/<topic>``: write and search permission on the root."""
    return permits(who, root, WRITE | SEARCH)


class Refusal(enum.Enum):
    """Why ``rmdir MNT/<topic>`` is refused, as POSIX refuses it."""

    NO_ACCESS = "EACCES"  # no write or search permission on the root
    STICKY = "EPERM"  # another's topic under a sticky root
    NOT_EMPTY = "ENOTEMPTY"  # another's topic that holds records


def holds_records(store, topic: str) -> bool:
    """Whether any partition of ``topic`` has a record retention kept (a
    non-empty directory to ``rmdir``)."""
    return any(
        store.log(topic, p).next_offset > store.log(topic, p).log_start_offset
        for p in store.partitions(topic)
    )


def may_delete(who: Identity, root: Owner, topic: Owner, full: bool) -> Refusal | None:
    """``rmdir MNT/<topic>`` (DeleteTopics): None when allowed, else why not.
    A topic holding records (``full``) is a non-empty directory only its
    owner (or root) deletes whole."""
    if not permits(who, root, WRITE | SEARCH):
        return Refusal.NO_ACCESS
    if who.uid not in (0, root.uid, topic.uid) and root.mode & stat.S_ISVTX:
        return Refusal.STICKY
    if who.uid not in (0, topic.uid) and full:
        return Refusal.NOT_EMPTY
    return None


class GroupOp(enum.Enum):
    """A Kafka operation on a consumer group, by what it does to the group's
    ``groups/<group>`` files on the mount."""

    JOIN = WRITE  # Join, Sync, Heartbeat, Leave, OffsetCommit: writing the file
    READ = READ  # OffsetFetch, DescribeGroups, ListGroups: reading it
    DELETE = 0  # DeleteGroups, OffsetDelete: the group's owner (or root)


def group_allowed(who: Identity, op: GroupOp, shown: Owner | None) -> bool:
    """Whether ``who`` may do ``op`` to a consumer group showing ``shown``
    (None: no such group yet, anyone's to make: it becomes theirs)."""
    if who.is_root or shown is None:
        return True
    if op is GroupOp.DELETE:
        return who.uid == shown.uid
    return permits(who, shown, op.value)


def new_group_owner(who: Identity) -> Owner:
    """The owner of a group ``who`` makes: a file created with Kafka's umask."""
    return Owner(who.uid, who.gid, 0o666 & ~KAFKA_UMASK)
