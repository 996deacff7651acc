"""Who owns each topic, kept in DATA, so that every face answers from the same
owner after remounts and restarts (core/access.py decides from it) and DATA's
own partition directories carry it (storage/ownership.py)::

    DATA/config/<topic>.owner   JSON: {"owner": [uid, gid, "0750"]}: the topic
                                directory's owner, group and permission bits
                                (with the sticky and set-group-ID bits) on the mount

A topic without a file (made by the Python API, by another tool writing DATA,
or before logfs kept owners) follows DATA: it shows DATA's owner, group and
mode, read when asked, and its directories on disk are left as they are.

A file is replaced atomically (write, fsync, rename, fsync the directory). It
is written when the topic is created, before its partitions, and removed when
the topic is deleted, after them: a crash in between leaves a file for a topic
that has no partitions, which a writer opening DATA removes and which the next
creation of that name replaces. A topic name too long for a file name uses
the hashed stem of its settings file (topics.py). The files are root's (the
daemon's), mode 0644: a topic's owner cannot edit them on disk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from ..errors import PartitionLimitError
from ..storage import ownership
from .checkpoints import replace_file
from .topics import CONFIG_DIR, PROPERTIES, Limits, settings_file_name

logger = logging.getLogger(__name__)

SUFFIX = ".owner"


class Owner(NamedTuple):
    """An owner, a group and permission bits (``mode``: with the set-id and
    sticky bits, without the file type)."""

    uid: int
    gid: int
    mode: int


def owner_file_name(topic: str) -> str:
    return settings_file_name(topic).removesuffix(PROPERTIES) + SUFFIX


def read_owner(path: Path) -> Owner | None:
    """The owner in a file; an unreadable one is logged and read as none
    (the topic then follows DATA)."""
    try:
        uid, gid, mode = json.loads(path.read_text())["owner"]
        return Owner(int(uid), int(gid), int(mode, 8) & 0o7777)
    except (OSError, ValueError, TypeError, KeyError) as e:
        logger.warning("%s: %s; the topic follows DATA's owner and mode", path, e)
        return None


class TopicOwners:
    """Every topic's owner in ``DATA/config``."""

    def __init__(self, data: Path, *, read_only: bool) -> None:
        self.data = data
        self.dir = data / CONFIG_DIR
        self.read_only = read_only
        self._owners: dict[str, Owner] = {}

    def load(self, topics: Iterable[str]) -> None:
        """Read the files of ``topics``; a writer removes the files of topics
        that do not exist (left by a crash between a deletion's steps)."""
        if not self.dir.is_dir():
            return
        wanted = {owner_file_name(t): t for t in topics}
        for path in self.dir.glob("*" + SUFFIX):
            topic = wanted.get(path.name)
            if topic is None:
                if not self.read_only:
                    path.unlink(missing_ok=True)
                continue
            owner = read_owner(path)
            if owner is not None:
                self._owners[topic] = owner

    def of(self, topic: str) -> Owner | None:
        """``topic``'s owner (None: it follows DATA)."""
        return self._owners.get(topic)

    def check_share(
        self, limits: Limits, owner: Owner | None, more: int, count: Callable[[str], int]
    ) -> None:
        """Refuse ``more`` partitions for topics of ``owner`` past
        ``logfs.max.partitions.per.user`` (a user other than root, counted over the
        topics they own, ``count`` giving each one's partitions: one pass over the
        owned topics); logged, as a client sees only an errno. A topic that follows
        DATA (no owner) counts for no one."""
        limit = limits.max_partitions_per_user
        if owner is None or owner.uid == 0:
            return
        held = sum(count(t) for t, o in self._owners.items() if o.uid == owner.uid)
        if held + more > limit:
            reason = (
                f"{more} more partitions for user {owner.uid}, who owns {held}, would pass "
                f"logfs.max.partitions.per.user={limit}"
            )
            logger.warning("refused: %s", reason)
            raise PartitionLimitError(reason)

    def set(self, topic: str, owner: Owner | None) -> None:
        """Keep ``owner`` for ``topic`` (None: it follows DATA from now)."""
        path = self.dir / owner_file_name(topic)
        if owner is None:
            path.unlink(missing_ok=True)
            self._owners.pop(topic, None)
            return
        self.dir.mkdir(exist_ok=True)
        text = json.dumps({"owner": [owner.uid, owner.gid, f"{owner.mode:04o}"]})
        replace_file(path, text + "\n")
        self._owners[topic] = owner

    def remove(self, topic: str) -> None:
        """``topic`` was deleted: its owner goes with it."""
        self._owners.pop(topic, None)
        (self.dir / owner_file_name(topic)).unlink(missing_ok=True)

    def carry(self, topic: str, partitions: Iterable[int]) -> None:
        """Give the partition directories of ``topic`` the group and modes its
        owner implies (storage/ownership.py). A topic that
        follows DATA is left as it is; a failure is logged (the faces still
        answer from the owner kept, and `logfs check` reports the directory)."""
        owner = self.of(topic)
        if owner is None or self.read_only:
            return
        for p in partitions:
            directory = str(self.data / f"{topic}-{p}")
            try:
                ownership.own_directory(directory, owner.gid, owner.mode)
            except OSError as e:
                logger.warning("%s: its owner's modes are not carried on disk: %s", directory, e)


class OwnedTopics:
    """The store's words for its topics' owners (`Store` is one)."""

    _owners: TopicOwners

    def topic_owner(self, topic: str) -> Owner | None:
        """``topic``'s owner, group and mode (None: it follows DATA's)."""
        return self._owners.of(topic)

    def set_topic_owner(self, topic: str, owner: Owner) -> None:
        """chown or chmod of a topic, kept in DATA and carried to its partition
        directories.

        Raises:
            UnknownTopicError: no such topic.
            ReadOnlyError: the store is read-only.
            OSError: the file could not be written; nothing changed.
        """
        self._require_writable()
        parts = self.partitions(topic)
        self._owners.set(topic, owner)
        self._owners.carry(topic, parts)
