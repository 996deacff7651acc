"""``<topic>/<p>/groups/<group>``: a consumer group's committed offset for a
partition as a file, over the daemon's group coordinator (`View.groups`, the
groups room's `Coordinator`, which a Kafka listener shares) and its
``__consumer_offsets`` topic.

``cat`` gives the offset and a newline; the extended attributes
``user.logfs.group.type`` and ``user.logfs.group.state`` say which protocol
the group speaks (``classic``, or ``consumer`` for KIP-848's) and its state.
Writing a number and closing the file commits it, the record an OffsetCommit
without a member writes; a group whose members are joined refuses it (its
`GroupError` answers EBUSY: its members own its commits).
Creating a file is committing for a new group. Group ids that cannot be file
names (with ``/``, ``.`` and ``..``, empty) are not listed.
"""

from __future__ import annotations

import errno

from ...core.client import names
from ..errnos import fail
from ..files import OpenFile, SnapshotFile
from .lives import TopicLife
from .nodes import WRITABLE
from .view import Node, Stat, View

MAX_OFFSET = 2**63 - 1  # Kafka's offsets are signed 64-bit


def offset_text(view: View, group: str, topic: str, partition: int) -> bytes:
    """The committed offset as the file reads it; empty when there is none."""
    committed = view.groups.committed(group).get((topic, partition))
    return b"" if committed is None else b"%d\n" % committed.offset


def listed(view: View, topic: str, partition: int) -> list[str]:
    return [
        g for g in view.groups.groups_of(topic, partition) if g not in (".", "..") and "/" not in g
    ]


class Group(Node):
    """``groups/<group>``: the group's committed offset, read on every lookup."""

    __slots__ = ("text",)
    in_partition = True
    writable = True
    shows = "group"  # the group's own owner and mode (core/access.py)
    pending: set[tuple[str, ...]] = set()  # files created, not yet closed

    def __init__(self, path: tuple[str, ...], life: TopicLife | None, inode: int) -> None:
        super().__init__(path, life, inode)
        self.text = b""

    def refresh(self, view: View) -> None:
        self.text = offset_text(view, self.path[3], self.topic, self.partition)
        if not self.text and self.path not in self.pending:
            raise fail(errno.ENOENT)

    def stat(self, view: View) -> Stat:
        return Stat(WRITABLE, len(self.text), timeout=0)

    def xattrs(self, view: View) -> dict[str, bytes]:
        group = view.groups.group(self.path[3])
        if group is None:
            return {}
        return {
            names.GROUP_TYPE_XATTR: group.kind.encode(),
            names.GROUP_STATE_XATTR: group.state.encode(),
        }

    def opened(self, view: View, flags: int) -> OpenFile:
        self.refresh(view)
        return GroupFile(view, self.path, self.text)

    def truncate(self, view: View, size: int, file: OpenFile | None) -> None:
        # `> file`: the number written next is committed at close
        if size != 0:
            raise fail(errno.EINVAL)


class GroupFile(SnapshotFile):
    """An open ``groups/<group>``: reads see the offset at open; the number
    written (from position 0, as ``echo N >`` writes) is committed at close."""

    def __init__(self, view: View, path: tuple[str, ...], data: bytes) -> None:
        super().__init__(data)
        self.view, self.path = view, path
        self.written = bytearray()

    async def write(self, offset: int, data: bytes) -> None:
        """Refused at once (EINVAL) unless digits and white space: a shell
        does not look at what close() returns."""
        data = bytes(data)
        if offset + len(data) > 64 or data.translate(None, b"0123456789 \t\r\n"):
            raise fail(errno.EINVAL)  # not an offset
        self.written[offset : offset + len(data)] = data

    async def flush(self) -> None:
        """close(): commit the number written, once."""
        numbers, self.written = bytes(self.written).split(), bytearray()
        Group.pending.discard(self.path)
        if not numbers:
            return  # nothing written: nothing to commit
        # Digits and white space were all write() let through; of several
        # numbers (``printf '5\n6\n'``) the last is the newest position.
        offset = int(numbers[-1])
        if offset > MAX_OFFSET:
            raise fail(errno.EINVAL)  # no offset of Kafka's (an int64) is this large
        topic, partition, group = self.path[0], int(self.path[1]), self.path[3]
        self.view.groups.commit_offset(group, topic, partition, offset)

    async def release(self) -> None:
        """The last close: a group this file made is its maker's from now
        (`Operations.create` claimed it), one it did not make is no one's."""
        try:
            await self.flush()
        finally:
            self.view.groups.settle_group(self.path[3])
