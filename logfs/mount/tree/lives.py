"""Topics as lives: each topic's identity on the mount, from its creation to
its deletion, and who asks (`Caller`).

A topic deleted and created again under the same name is a new life: its
nodes get new inode numbers and a new generation, and its owner, group and
modes are its creator's (kept in DATA by the store, core/log/owners.py);
nothing of the old life (chown, chmod, open files) reaches it (docs/mount.md).
"""

from __future__ import annotations

import itertools

import trio

from ...core.access import Identity, Ownership

__all__ = ["Caller", "Lives", "Ownership", "TopicLife", "make"]


async def make(store, new) -> None:
    """Build new partitions (core/log/making.py) in a worker thread, so that
    others' requests are answered meanwhile, and hand them to ``store``."""
    try:
        await trio.to_thread.run_sync(new.build)
    finally:
        store.finish(new)


class Caller(Identity):
    """Who makes a request (the FUSE request context; None there: root)."""

    __slots__ = ()

    @classmethod
    def of(cls, ctx) -> Caller:
        return cls(0, 0) if ctx is None else cls(ctx.uid, ctx.gid)


class TopicLife:
    """One life of a topic in the mount: from its creation (or the mount's
    first sight of it) to its deletion. Nodes and open files keep the life
    they were found in; ``changed`` holds the chown and chmod of paths inside
    the topic (the topic's own are kept in DATA).
    """

    __slots__ = ("generation", "changed", "deleted")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.changed: dict[tuple[str, ...], tuple[int, int, int]] = {}
        self.deleted = False

    def end(self) -> None:
        """The topic was deleted: its nodes and open files answer as a deleted file's."""
        self.deleted = True


class Lives:
    """The current life of each topic the mount has seen. Kept in memory for
    the mount's life."""

    def __init__(self) -> None:
        self._lives: dict[str, TopicLife] = {}
        self._generations = itertools.count(1)

    def life(self, topic: str) -> TopicLife:
        """The current life of ``topic`` (begun now if the mount has not seen it)."""
        life = self._lives.get(topic)
        if life is None:
            life = self._lives[topic] = TopicLife(next(self._generations))
        return life

    def born(self, topic: str) -> None:
        """``topic`` was just made through the mount: a new life."""
        self._lives[topic] = TopicLife(next(self._generations))

    def end(self, topic: str) -> None:
        """``topic`` was deleted: its life ends with it."""
        life = self._lives.pop(topic, None)
        if life is not None:
            life.end()
