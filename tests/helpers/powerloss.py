"""The power-loss model: a file system that keeps only what was fsynced.

`DurableImage` wraps ``os.fsync`` (and ``os.fdatasync``) of the files under a
directory: it keeps, per inode, the bytes a file had when an fsync of it
began, and per directory the entries it had; `DurableImage.crash` builds the
directory a power failure would leave, each file's unsynced tail dropped,
kept in part, zero-filled or replaced by garbage (`MODES`). Used by the
mount's power-loss tests (system/test_powerloss.py) and the listener's
acks=-1 tests (kafka/test_kafka_acks.py).
"""

from __future__ import annotations

import os
import random
import stat
import threading
from pathlib import Path

REAL_FSYNC = os.fsync
REAL_FDATASYNC = os.fdatasync
MODES = ("clean", "partial", "zeros", "garbage")


class DurableImage:
    """What a file system that persists only fsynced data would keep."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.files: dict[int, bytes] = {}
        self.dirs: dict[int, dict[str, tuple[int, bool]]] = {}
        self.lock = threading.Lock()
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        inside = path == self.root or path.startswith(self.root + "/")
        snapshot = None
        if inside:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                snapshot = {
                    e.name: (e.inode(), e.is_dir(follow_symlinks=False)) for e in os.scandir(path)
                }
            else:
                with open(f"/proc/self/fd/{fd}", "rb") as f:  # the same inode, readable
                    snapshot = f.read()
        REAL_FSYNC(fd)  # what was there before the fsync began is durable once it returns
        if snapshot is not None:
            with self.lock:
                (self.dirs if isinstance(snapshot, dict) else self.files)[st.st_ino] = snapshot
                self.fsyncs += 1

    def crash(self, target: Path, rng: random.Random, mode: str) -> int:
        """Build the surviving directory at ``target``; returns unsynced bytes kept."""
        with self.lock:
            files, dirs = dict(self.files), {k: dict(v) for k, v in self.dirs.items()}
        kept = 0

        def build(ino: int, live: Path, out: Path) -> None:
            nonlocal kept
            out.mkdir()
            for name, (child, is_dir) in sorted(dirs.get(ino, {}).items()):
                if is_dir:
                    build(child, live / name, out / name)
                    continue
                data = files.get(child, b"")
                try:
                    current = (live / name).read_bytes()
                    same = (live / name).stat().st_ino == child
                except OSError:
                    current, same = b"", False
                if same and len(current) > len(data) and mode != "clean":
                    tail = current[len(data) :]
                    cut = rng.randrange(len(tail) + 1)
                    data += {
                        "partial": tail[:cut],
                        "zeros": bytes(cut),
                        "garbage": rng.randbytes(cut),
                    }[mode]
                    kept += cut
                (out / name).write_bytes(data)

        build(os.stat(self.root).st_ino, Path(self.root), target)
        return kept
