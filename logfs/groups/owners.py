"""Consumer groups' owners, kept in DATA beside ``__consumer_offsets``.

A group belongs to the user who first joined it or committed for it (its
owner, group and a mode; core/access.py decides from them, the mount's
``groups/<group>`` files show them); a chown or chmod of such a file changes
them. An owner lives as long as its group: a group that is gone (forgotten,
deleted) shows none, and a group of the same name made later is its maker's.
``__consumer_offsets`` keeps Kafka's records only, so the owners are a
journal of their own::

    DATA/group-owners     one JSON object a line, the last line of a group wins:
                          {"group": "<id>", "owner": [uid, gid, "0644"]}

A line is appended when a group is made or changes hands (no fsync: a daemon
killed loses nothing; after a power failure a group whose line was lost shows
DATA's owner, as groups made before logfs kept owners do); a torn last line
is skipped. Loading rewrites the journal with the owners of the groups that
exist (a temporary file renamed over it), and so does an append that leaves
it longer than twice the owners kept and `SLACK` more: it stays proportional
to the groups there are.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection
from pathlib import Path

from ..core.log import Owner

logger = logging.getLogger(__name__)

FILE = "group-owners"
SLACK = 1024


class GroupOwners:
    """The owners of the groups of a store in ``data`` (none written when ``read_only``)."""

    def __init__(self, data: Path, *, read_only: bool) -> None:
        self.path = Path(data) / FILE
        self.read_only = read_only
        self._owners: dict[str, Owner] = {}
        self._claimed: set[str] = set()  # claimed by a request under way, not written yet
        self._lines = 0

    def load(self, groups: Collection[str]) -> None:
        """Read the journal; keep the owners of ``groups`` (those that exist)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as e:
            logger.warning("%s: %s; groups show DATA's owner", self.path, e)
            return
        for line in text.splitlines(keepends=True):
            if not line.endswith("\n"):
                break  # torn by a crash
            try:
                entry = json.loads(line)
                uid, gid, mode = entry["owner"]
                owner = Owner(int(uid), int(gid), int(mode, 8) & 0o7777)
                group = str(entry["group"])
            except (ValueError, KeyError, TypeError):
                logger.warning("%s: a line that is not a group's owner, skipped", self.path)
                continue
            if group in groups:
                self._owners[group] = owner
        self._rewrite()

    def owner(self, group_id: str) -> Owner | None:
        return self._owners.get(group_id)

    def claimed(self, group_id: str) -> bool:
        """Whether a request under way claimed ``group_id``."""
        return group_id in self._claimed

    def claim(self, group_id: str, owner: Owner) -> None:
        """A request that may make ``group_id`` (which does not exist) begins:
        ``owner`` owns it from now, whatever a former group of the name had."""
        self._owners[group_id] = owner
        self._claimed.add(group_id)

    def settle(self, group_id: str, exists: bool) -> None:
        """After a request that claimed ``group_id``: its owner is written if
        the group now ``exists``, else dropped."""
        if group_id not in self._claimed:
            return
        self._claimed.discard(group_id)
        if exists:
            self._append(group_id, self._owners[group_id])
        else:
            self._owners.pop(group_id, None)

    def change(self, group_id: str, owner: Owner) -> None:
        """chown or chmod of a group (through its files on the mount)."""
        self._owners[group_id] = owner
        self._claimed.discard(group_id)
        self._append(group_id, owner)

    def _append(self, group_id: str, owner: Owner) -> None:
        if self.read_only:
            return
        line = json.dumps({"group": group_id, "owner": [owner.uid, owner.gid, f"{owner.mode:04o}"]})
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
        except OSError as e:
            logger.warning("%s: group %r's owner not written: %s", self.path, group_id, e)
            return
        self._lines += 1
        if self._lines > 2 * len(self._owners) + SLACK:
            self._rewrite()

    def _rewrite(self) -> None:
        """The journal with one line per owner kept (claims under way left out)."""
        if self.read_only:
            return
        kept = {g: o for g, o in self._owners.items() if g not in self._claimed}
        text = "".join(
            json.dumps({"group": g, "owner": [o.uid, o.gid, f"{o.mode:04o}"]}) + "\n"
            for g, o in kept.items()
        )
        tmp = self.path.with_name(FILE + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, text.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as e:
            logger.warning("%s: not rewritten: %s", self.path, e)
            return
        self._lines = len(kept)


class OwnedGroups:
    """A group store's words for its groups' owners (`GroupStore` is one)."""

    groups: dict
    owners: GroupOwners

    def group_owner(self, group_id: str) -> Owner | None:
        """The owner of the group (None: no such group, or one without an owner);
        a group a request under way claimed is its claimant's already."""
        self.load()
        exists = group_id in self.groups or self.owners.claimed(group_id)
        return self.owners.owner(group_id) if exists else None

    def group_exists(self, group_id: str) -> bool:
        self.load()
        return group_id in self.groups

    def claim_group(self, group_id: str, owner: Owner) -> bool:
        """Before a request that may make the group: unless it exists, ``owner``
        owns it from now; whether it was claimed (then `settle_group` after)."""
        if self.group_exists(group_id):
            return False
        self.owners.claim(group_id, owner)
        return True

    def settle_group(self, group_id: str) -> None:
        """After the request that claimed the group: its owner stays if it exists."""
        self.owners.settle(group_id, group_id in self.groups)

    def change_group_owner(self, group_id: str, owner: Owner) -> None:
        """chown or chmod of a group that exists."""
        if self.group_exists(group_id):
            self.owners.change(group_id, owner)
