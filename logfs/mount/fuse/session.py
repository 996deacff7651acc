"""The FUSE side of a daemon: `Operations` over the store, mounted on a mount
point, its request loop, and its end. The daemon (logfs/daemon) builds one
when ``logfs mount`` asks for a file system, beside the store, the group
coordinator and the background tasks it hands it.

Its life: `mount` (pyfuse3.init, and the one-line write() hook of
``_fuseinit.c`` and ``_lines.pyx``), `serve` until `stop` (a signal: what the
kernel holds of open files in the buffered mode is written back first) or an
external unmount, then `close_files` (the open append files' partial lines
become records) and, once the store is flushed, `unmount`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

import pyfuse3
import trio

from ...core.client import mountinfo, names
from ...core.log import Log, Store
from ...groups import Coordinator
from ..errnos import Metrics
from ..tree import DATA_OWNER, Ownership
from . import fuseinit
from ._lines import LineWrites
from .operations import Operations

logger = logging.getLogger(__name__)

WRITE_BACK_TIMEOUT = 10.0  # seconds a signalled daemon gives the kernel's dirty pages
KILLPRIV_CHECK_AFTER = 1.0  # seconds: the kernel's INIT is answered by then
ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"  # the kernel's switch (docs/mount.md)


class FuseMount:
    """The mount of ``store`` on ``mountpoint``, built whole and not mounted yet.

    Args:
        store: the data directory's store.
        mountpoint: where to mount (as given: the kernel's name for it).
        groups: the daemon's group coordinator (the ``groups/`` files).
        ready: set once the store's partitions are recovered; requests wait for it.
        sync: ``sync(log)`` makes a log durable off the loop (the flusher's).
        fuse_options: options for the kernel and libfuse (``allow_other``, ``ro``...).
        partitions: partitions of a topic made by mkdir.
        owner: the owner, group and modes the mount shows.
        buffered: the buffered mode (``-o acks=0``, files/buffered.py).
        io_uring: ask the kernel for FUSE over io_uring (``-o io_uring``, _fusering.c).
        io_uring_spin_us: how long the ring is watched for a writer's next line
            before the daemon sleeps (``-o io_uring_spin_us``, _fusering_io.c).
        metrics: the daemon's metrics (``-o metrics=``), told of every request, or None.
        recovery: how far the recovery at the start went (the root's ``user.logfs.recovery``).
    """

    def __init__(
        self,
        store: Store,
        mountpoint: str,
        *,
        groups: Coordinator,
        ready: trio.Event,
        sync: Callable[[Log], Awaitable[None]] | None,
        fuse_options: frozenset[str] = frozenset(),
        partitions: int = 1,
        owner: Ownership = DATA_OWNER,
        buffered: bool = False,
        io_uring: bool = False,
        io_uring_spin_us: int = 0,
        metrics: Metrics | None = None,
        recovery: Callable[[], dict] = dict,
    ) -> None:
        self.mountpoint = mountpoint
        # Resolved now: once mounted, a stat of the mount point from this thread
        # would wait for an answer from this very thread.
        self.real_mountpoint = os.path.realpath(mountpoint)
        self.options = {f"fsname={os.path.abspath(store.path)}", "subtype=logfs", *fuse_options}
        self.io_uring, self.io_uring_spin_us = io_uring, io_uring_spin_us
        self.ops = Operations(
            store,
            groups=groups,
            sync=sync,
            partitions=partitions,
            owner=owner,
            buffered=buffered,
            mountpoint=self.real_mountpoint,
            ready=ready,
            metrics=metrics,
            recovery=recovery,
        )

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted otherwise than by rmdir (over Kafka): see `View.forget_topic`."""
        self.ops.view.forget_topic(topic)

    def mount(self) -> None:
        """Mount: the kernel sends requests from now on (`serve` answers them)."""
        fuseinit.use_io_uring(self.io_uring, self.io_uring_spin_us)
        pyfuse3.init(self.ops, self.mountpoint, self.options)
        lines = LineWrites(self.ops)
        fuseinit.set_write_hook(lines, lines.hooks)

    async def serve(self) -> None:
        """Answer requests until `stop` or an external unmount."""
        fuseinit.set_loop_fd(fuseinit.loop_fd())  # lines in a row end when the loop has work
        try:
            await pyfuse3.main()
        finally:
            fuseinit.set_loop_fd(-1)

    def start_background(self, nursery: trio.Nursery) -> None:
        """The mount's own background work, once the store is recovered: its
        read-ahead, the buffered mode's write-backs, and what became of ``-o io_uring``."""
        nursery.start_soon(self._read_ahead)
        if self.io_uring:
            nursery.start_soon(self._say_io_uring)
        if self.ops.buffered is not None:
            nursery.start_soon(self.ops.buffered.run)
            nursery.start_soon(self._check_killpriv)

    async def _read_ahead(self) -> None:
        """Have the kernel read ahead of a reader through its page cache
        (``stream``) in FUSE's largest request, 1 MiB, not the 128 KiB libfuse
        answers in INIT: a first read then costs an eighth of the requests.
        Set in the mount's entry of /sys/class/bdi once INIT is answered (which
        would lower it again); where that cannot be written (not root, a
        read-only /sys) reads go on in 128 KiB requests."""
        await init_answered()
        if not set_read_ahead(self.real_mountpoint, names.MAX_WRITE >> 10):
            logger.debug("the read-ahead of %s stays as the kernel set it", self.mountpoint)

    async def _say_io_uring(self) -> None:
        """Whether ``-o io_uring`` took effect, once the kernel's INIT is answered."""
        await init_answered()
        state, errno = fuseinit.io_uring()
        if state == "on":
            logger.info(
                "FUSE requests come over io_uring (the next line watched for %d µs)",
                self.io_uring_spin_us,
            )
        elif state == "not offered":
            logger.warning(
                "FUSE over io_uring was asked for but the kernel does not offer it (Linux 6.14 "
                "and later, after echo 1 > %s): requests come over /dev/fuse",
                ENABLE_URING,
            )
        else:  # failed, or the mount's C library not in use (fuseinit.py)
            logger.warning(
                "FUSE over io_uring could not be set up (%s): requests come over /dev/fuse",
                os.strerror(errno) if errno else "the mount's own request loop is not in use",
            )

    async def _check_killpriv(self) -> None:
        """The buffered mode works without ``handle_killpriv_v2`` (fuseinit.py),
        at a round trip per write(): say so, once the kernel's INIT is answered."""
        await trio.sleep(KILLPRIV_CHECK_AFTER)
        if not fuseinit.asked():
            logger.warning(
                "the kernel was not asked for handle_killpriv_v2 (pyfuse3 imported before "
                "logfs.mount, or _fuseinit not built): each buffered write() costs a round trip"
            )

    async def stop(self) -> None:
        """End `serve`; in the buffered mode, what the kernel holds of open
        files is written back first (for at most `WRITE_BACK_TIMEOUT`)."""
        if self.ops.buffered is not None:
            with trio.move_on_after(WRITE_BACK_TIMEOUT):
                await self.ops.buffered.write_back_open_files()
        pyfuse3.terminate()

    def terminate(self) -> None:
        """End `serve` now (the store failed to recover)."""
        pyfuse3.terminate()

    def close_files(self) -> None:
        """At unmount: every open append file's partial line becomes a record."""
        self.ops.close_files()

    def unmount(self) -> None:
        """Unmount (after `serve` returned and the store is flushed)."""
        try:
            fuseinit.set_write_hook(None, None)
        finally:
            pyfuse3.close(unmount=True)


async def init_answered() -> None:
    """Once the kernel's INIT is answered (at most `KILLPRIV_CHECK_AFTER` seconds:
    without the mount's C library nothing says so)."""
    with trio.move_on_after(KILLPRIV_CHECK_AFTER):
        while not fuseinit.asked():
            await trio.sleep(0.01)


def set_read_ahead(mountpoint: str, kib: int) -> bool:
    """Set the read-ahead of the mount on ``mountpoint`` (found in
    /proc/self/mountinfo: nothing is asked of the mount itself, whose requests
    this thread answers); False if it could not be."""
    device = mountinfo.mount_device(mountpoint)
    if device is None:
        return False
    try:
        with open(f"/sys/class/bdi/{device}/read_ahead_kb", "w") as f:
            f.write(f"{kib}\n")
    except OSError:
        return False
    return True
