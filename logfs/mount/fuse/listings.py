"""Open directories (`Listings`): the names each open lists, and the listings
the kernel keeps.

A directory is listed once per open (again when a reader starts over, as for
rewinddir), so a large one costs each chunk of its listing only its entries,
and other requests are served between chunks. A chunk is at most `CHUNK`
entries, however large the reader's buffer: ``ls`` asks for 1 MiB at a time,
which the kernel passes on whole, and 4,500 entries in one answer would hold
every other request up for a tenth of a second. The reader reads again for
the rest, as it does when its buffer is full.

The kernel can keep a listing it has read whole and answer later opens from it
(FUSE's ``cache_readdir``, set by `fuseinit.keep_listing`). A partition's
``segments/`` is listed that way: ``ls`` and globs list it again and again, and
its names change only when a segment is rolled, deleted or cleaned. Each open
compares the names, and the inode each is known by, with those of the listing
the kernel keeps, and tells the kernel to keep it or to read it again. So a
listing is never older than the open it is read through.

What the kernel keeps is the listing last read whole through an open after
which the directory was not opened again (an open told to read again drops
what the kernel kept, and a listing read through an older open is not kept).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyfuse3

from ..tree import Node, SegmentDir, View, resolve
from . import fuseinit

CHUNK = 128  # entries per READDIR answer: a few milliseconds of the loop at most


@dataclass
class Listing:
    """One open directory: its inode and names (``.`` and ``..`` first; None
    until read); for a kept kind, the opens of the directory counted at this
    one and the (name, inode) pairs read through it so far (None once a name
    was skipped or a chunk did not follow the last)."""

    inode: int
    entries: list[str] | None = None
    opened: int = 0
    read: list[tuple[str, int]] | None = None


class Listings:
    def __init__(self, view: View, numbers: Iterator[int]) -> None:
        self.view = view
        self.numbers = numbers  # handles, shared with the open files
        self._open: dict[int, Listing] = {}
        # per kept directory's inode: its opens, and the listing the kernel keeps (or None)
        self._kept: dict[int, tuple[int, list[tuple[str, int]] | None]] = {}

    def inode_of(self, fh: int) -> int:
        listing = self._open.get(fh)
        return fh if listing is None else listing.inode

    def open(self, node: Node) -> int:
        """A handle listing ``node``: for ``segments/``, listed now and kept by
        the kernel, which keeps what it kept if that is still the listing."""
        listing = Listing(node.inode)
        fh = next(self.numbers)
        if not isinstance(node, SegmentDir):
            self._open[fh] = listing
            return fh
        names = node.entries(self.view)
        listing.entries = [".", "..", *names]
        inode_of = self.view.inodes.inode_of
        now = [(name, inode_of((*node.path, name))) for name in names]
        opens, kept = self._kept.get(node.inode, (0, None))
        keep = kept == now
        listing.opened, listing.read = opens + 1, []
        self._kept[node.inode] = (opens + 1, kept if keep else None)
        self._open[fh] = listing
        fuseinit.keep_listing(fh, keep)  # last: the answer to this OPENDIR comes next
        return fh

    def read(self, fh: int, start_id: int, token) -> None:
        """One chunk of the listing (as much as the kernel's buffer takes).

        ``.`` and ``..`` come first, as every directory lists them; the kernel
        takes no reference on either (it never looks them up from a listing),
        so neither is counted as looked up."""
        listing = self._open.setdefault(fh, Listing(fh))  # or a test's own call's
        view = self.view
        node = view.node(listing.inode)
        if listing.entries is None or (start_id == 0 and listing.read != []):
            listing.entries = [".", "..", *node.entries(view)]
            listing.read = None  # listed again: not what the kernel was told it keeps
        entries, read = listing.entries, listing.read
        if read is not None and len(read) != max(0, start_id - 2):
            read = listing.read = None  # a seekdir: not read in order
        room = CHUNK
        for i in range(start_id, len(entries)):
            if not room:
                return
            try:
                if i < 2:
                    child = node if i == 0 or not node.path else self.parent(node)
                else:
                    child = resolve(view, (*node.path, entries[i]))
            except pyfuse3.FUSEError:  # gone since the listing was made
                read = listing.read = None
                continue
            if not pyfuse3.readdir_reply(token, os.fsencode(entries[i]), view.attrs(child), i + 1):
                return
            room -= 1
            if i >= 2:
                view.inodes.looked_up(child)
                if read is not None:
                    read.append((entries[i], child.inode))
        if read is not None and self._kept.get(listing.inode, (0,))[0] == listing.opened:
            self._kept[listing.inode] = (listing.opened, list(read))

    def parent(self, node: Node) -> Node:
        """The directory holding ``node`` (not the root): the kernel knows it,
        having looked ``node`` up through it."""
        parent = self.view.inodes.at(node.path[:-1])
        return parent if parent is not None else resolve(self.view, node.path[:-1])

    def close(self, fh: int) -> None:
        self._open.pop(fh, None)

    def forget(self, inode: int) -> None:
        """The kernel forgot ``inode``, and whatever listing of it it kept."""
        self._kept.pop(inode, None)
