"""The mount's inode table: nodes by inode number and by path, as the kernel
knows them, and how many lookups of each the kernel holds."""

from __future__ import annotations

from typing import Protocol

import pyfuse3

ROOT_INODE = pyfuse3.ROOT_INODE


class Inoded(Protocol):
    """What the table keeps of a node (view.py's `Node` is one): built with
    its number (`InodeTable.number`)."""

    @property
    def inode(self) -> int: ...

    @property
    def path(self) -> tuple[str, ...]: ...


class InodeTable:
    """Inodeds by inode and by path; a path keeps its inode while the kernel
    remembers it, and gets a fresh one after its topic is deleted."""

    def __init__(self, root: Inoded) -> None:
        if root.inode != ROOT_INODE:
            raise ValueError(f"the root is inode {ROOT_INODE}, not {root.inode}")
        self._nodes: dict[int, Inoded] = {ROOT_INODE: root}
        self._by_path: dict[tuple[str, ...], int] = {(): ROOT_INODE}
        self._lookups: dict[int, int] = {}  # inode -> lookups the kernel holds
        self._next = ROOT_INODE + 1

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, inode: int) -> Inoded | None:
        return self._nodes.get(inode)

    def inode_of(self, path: tuple[str, ...]) -> int | None:
        """The inode the kernel knows ``path`` by, if any."""
        return self._by_path.get(path)

    def at(self, path: tuple[str, ...]) -> Inoded | None:
        """The node the kernel knows ``path`` by, if any."""
        inode = self._by_path.get(path)
        return None if inode is None else self._nodes[inode]

    def number(self) -> int:
        """The inode a new node is built with: the next one, taken only when
        the node is added (a path found not to exist takes none)."""
        return self._next

    def add(self, node: Inoded) -> Inoded:
        """Keep a node built with `number` (once); the caller counts the lookup."""
        if node.inode == self._next:
            self._next += 1
            self._nodes[node.inode] = node
            self._by_path[node.path] = node.inode
        return node

    def looked_up(self, node: Inoded) -> None:
        """The kernel took one more lookup of ``node`` (an entry it was answered)."""
        self._lookups[node.inode] = self._lookups.get(node.inode, 0) + 1

    def forget(self, inode: int, count: int) -> None:
        """The kernel dropped ``count`` lookups of ``inode``: at none, the node goes."""
        node = self._nodes.get(inode)
        if node is None or inode == ROOT_INODE:
            return
        lookups = self._lookups.get(inode, 0) - count
        if lookups > 0:
            self._lookups[inode] = lookups
            return
        self._lookups.pop(inode, None)
        del self._nodes[inode]
        if self._by_path.get(node.path) == inode:
            del self._by_path[node.path]

    def lookups(self, inode: int) -> int:
        """The lookups of ``inode`` the kernel holds."""
        return self._lookups.get(inode, 0)

    def unlink_prefix(self, prefix: tuple[str, ...]) -> None:
        """Forget the paths under ``prefix`` (a deleted topic): later lookups
        get new inodes, so no cached page of the old topic is ever served."""
        n = len(prefix)
        for path in [p for p in self._by_path if p[:n] == prefix and p]:
            del self._by_path[path]
