"""The mount's open files by file handle (`Handles`): each one's `OpenFile`, the
topic life it was opened in and whether it was opened for writing (a deleted
topic's descriptors never reach a topic created again under its name), and how
many are open per inode (a deleted topic's open files still answer ``getattr``,
which the kernel asks before it reads past what it holds of one)."""

from __future__ import annotations

import errno
import itertools
import stat
from collections import Counter

import pyfuse3

from ...core.log import Owner
from ..errnos import fail
from ..files import OpenFile
from ..tree import Node, TopicLife


class Handles:
    def __init__(self) -> None:
        self.files: dict[int, OpenFile] = {}  # by handle (read by _lines.pyx too)
        self.numbers = itertools.count(1)  # for open directories too
        self._opened: dict[int, tuple[TopicLife | None, bool, int]] = {}
        self._per_inode: Counter[int] = Counter()

    def add(self, file: OpenFile, node: Node, *, writing: bool) -> int:
        fh = next(self.numbers)
        self.files[fh] = file
        self._opened[fh] = (node.life, writing, node.inode)
        self._per_inode[node.inode] += 1
        return fh

    def file(self, fh: int) -> OpenFile:
        """The open file ``fh``; EBADF if there is none."""
        file = self.files.get(fh)
        if file is None:
            raise fail(errno.EBADF)
        return file

    def life_of(self, fh: int) -> TopicLife | None:
        """The topic life ``fh`` was opened in, for good (None outside a topic)."""
        return self._opened.get(fh, (None, False, 0))[0]

    def topic_deleted(self, fh: int) -> bool:
        """Whether ``fh``'s topic was deleted since it was opened."""
        return getattr(self.life_of(fh), "deleted", False)

    def writing(self, fh: int) -> bool:
        return self._opened.get(fh, (None, False, 0))[1]

    def is_open(self, inode: int) -> bool:
        return self._per_inode[inode] > 0

    def remove(self, fh: int) -> OpenFile | None:
        """Forget ``fh``; the open file it was, if any."""
        opened = self._opened.pop(fh, None)
        if opened is not None:
            self._per_inode[opened[2]] -= 1
            if not self._per_inode[opened[2]]:
                del self._per_inode[opened[2]]
        return self.files.pop(fh, None)


def gone_attrs(node: Node, owner: Owner, mtime_ns: int) -> pyfuse3.EntryAttributes:
    """stat(2) of ``node`` while a file of it is open after its topic was
    deleted, as of an unlinked file: no link, nothing left (size 0), ``owner``
    (the mount's); nothing is read from the store, where a topic created again
    under the name may be. A ``stream`` open through the page cache then reads
    as ended past what the kernel holds of it."""
    attrs = pyfuse3.EntryAttributes()
    attrs.st_ino = node.inode
    attrs.generation = node.life.generation if node.life is not None else 0
    attrs.st_uid, attrs.st_gid = owner.uid, owner.gid
    kind = stat.S_IFDIR if node.directory else stat.S_IFREG
    attrs.st_mode = kind | (owner.mode & 0o555)
    attrs.st_nlink = attrs.st_size = attrs.st_blocks = 0
    attrs.st_atime_ns = attrs.st_ctime_ns = attrs.st_mtime_ns = mtime_ns
    attrs.entry_timeout = attrs.attr_timeout = 0
    return attrs
