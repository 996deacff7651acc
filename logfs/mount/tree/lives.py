"""Topics as lives: each topic's owner, modes and identity on the mount,
from its creation to its deletion, and who asks (`Caller`).

A topic deleted and created again under the same name is a new life: its
nodes get new inode numbers and a new generation, and its owner, group and
modes are its creator's; nothing of the old life (chown, chmod, open files)
reaches it (docs/mount.md).
"""

from __future__ import annotations

import itertools
import os
import pwd
import stat
from typing import NamedTuple

import pyfuse3


class Ownership(NamedTuple):
    """The ``uid=``, ``gid=`` and ``umask=`` mount options (None: DATA's)."""

    uid: int | None = None
    gid: int | None = None
    umask: int | None = None


class Caller(NamedTuple):
    """Who makes a request (the FUSE request context; None there: root)."""

    uid: int = 0
    gid: int = 0

    @classmethod
    def of(cls, ctx) -> Caller:
        return cls() if ctx is None else cls(ctx.uid, ctx.gid)


def groups_of(caller: Caller) -> list[int]:
    """The groups of ``caller``'s user (by name, for getgrouplist)."""
    try:
        name = pwd.getpwuid(caller.uid).pw_name
    except KeyError:
        return [caller.gid]
    return os.getgrouplist(name, caller.gid)


def permits(caller: Caller, attrs: pyfuse3.EntryAttributes, want: int) -> bool:
    """Whether ``caller`` has the ``want`` bits (os.W_OK | os.X_OK, ...) on a
    node with ``attrs``, as the kernel's default_permissions judges."""
    if caller.uid == 0:
        return True
    if caller.uid == attrs.st_uid:
        bits = attrs.st_mode >> 6
    elif attrs.st_gid == caller.gid or attrs.st_gid in groups_of(caller):
        bits = attrs.st_mode >> 3
    else:
        bits = attrs.st_mode
    return bits & want == want


class TopicLife:
    """One life of a topic in the mount: from its creation (or the mount's
    first sight of it) to its deletion. Nodes and open files keep the life
    they were found in.

    ``uid``/``gid``/``mode`` (None: the mount's) are the topic's owner, group
    and directory mode; ``changed`` the chown and chmod of its paths.
    """

    __slots__ = ("generation", "uid", "gid", "mode", "changed", "deleted")

    def __init__(
        self,
        generation: int,
        uid: int | None = None,
        gid: int | None = None,
        mode: int | None = None,
    ) -> None:
        self.generation = generation
        self.uid, self.gid, self.mode = uid, gid, mode
        self.changed: dict[tuple[str, ...], tuple[int, int, int]] = {}
        self.deleted = False

    def end(self) -> None:
        """The topic was deleted: its nodes and open files answer as a deleted file's."""
        self.deleted = True


class Lives:
    """The current life of each topic the mount has seen, on a mount with
    ``owner``'s options. Kept in memory for the mount's life."""

    def __init__(self, owner: Ownership) -> None:
        self._owner = owner
        self._lives: dict[str, TopicLife] = {}
        self._generations = itertools.count(1)

    def life(self, topic: str) -> TopicLife:
        """The current life of ``topic`` (begun now if the mount has not seen it:
        a topic found in DATA shows the mount's owner and modes)."""
        life = self._lives.get(topic)
        if life is None:
            life = self._lives[topic] = TopicLife(next(self._generations))
        return life

    def born(self, topic: str, caller: Caller, mode: int) -> None:
        """``caller`` just made ``topic`` with mkdir's ``mode`` (the kernel
        applied the caller's umask): it is the caller's, as on ext4, unless
        the mount's ``uid=``/``gid=``/``umask=`` say otherwise."""
        uid = caller.uid if self._owner.uid is None else self._owner.uid
        gid = caller.gid if self._owner.gid is None else self._owner.gid
        mode = stat.S_IMODE(mode) & ~(self._owner.umask or 0)
        self._lives[topic] = TopicLife(next(self._generations), uid, gid, mode)

    def end(self, topic: str) -> None:
        """``topic`` was deleted: its life, owner and modes end with it."""
        life = self._lives.pop(topic, None)
        if life is not None:
            life.end()
