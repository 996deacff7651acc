"""The mount's inode table: nodes by inode number and by path, as the kernel knows them."""

from __future__ import annotations

from typing import Protocol

import pyfuse3

ROOT_INODE = pyfuse3.ROOT_INODE


class Inoded(Protocol):
    """What the table keeps of a node (view.py's `Node` is one)."""

    inode: int
    lookups: int
    path: tuple[str, ...]


class InodeTable:
    """Inodeds by inode and by path; a path keeps its inode while the kernel
    remembers it, and gets a fresh one after its topic is deleted."""

    def __init__(self, root: Inoded) -> None:
        root.inode = ROOT_INODE
        self._nodes: dict[int, Inoded] = {ROOT_INODE: root}
        self._by_path: dict[tuple[str, ...], int] = {(): ROOT_INODE}
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

    def add(self, node: Inoded) -> Inoded:
        """Give ``node`` an inode, once; the caller counts the lookup."""
        if not node.inode:
            node.inode = self._next
            self._next += 1
            self._nodes[node.inode] = node
            self._by_path[node.path] = node.inode
        return node

    def forget(self, inode: int, count: int) -> None:
        node = self._nodes.get(inode)
        if node is None or inode == ROOT_INODE:
            return
        node.lookups -= count
        if node.lookups <= 0:
            del self._nodes[inode]
            if self._by_path.get(node.path) == inode:
                del self._by_path[node.path]

    def unlink_prefix(self, prefix: tuple[str, ...]) -> None:
        """Forget the paths under ``prefix`` (a deleted topic): later lookups
        get new inodes, so no cached page of the old topic is ever served."""
        n = len(prefix)
        for path in [p for p in self._by_path if p[:n] == prefix and p]:
            del self._by_path[path]
