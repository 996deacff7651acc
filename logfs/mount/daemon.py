"""Wiring a mount: store, flusher, FUSE, signals, teardown; and the daemon.

`serve` is the one function that runs a mount: it opens the store, mounts,
then in one nursery runs `pyfuse3.main` and recovers the partitions in a
worker thread (the root's ``user.logfs.health`` says "recovering" and other
requests wait meanwhile), after which the flusher and the log cleaner start;
until SIGINT/SIGTERM or an external unmount. It tears down in this order: the
open append files' unterminated lines become records, every log is flushed,
the checkpoints are written, the file system is unmounted, the store's lock is
released. Mount options are options.py's.

While a writable mount runs, ``DATA/logfs-mount.json`` records where it is
mounted and by which process (core/mountinfo.py), so that producers on the
same machine hand their batches to this daemon; it is written once the
partitions are recovered and removed first at a clean shutdown.

`mount` is ``logfs mount``: it checks what it can up front, then (unless
foreground) starts the daemon in a new session and returns once the daemon
reports the mount ready and it shows in /proc/self/mountinfo. `umount` is
``logfs umount``: it asks the daemon (its pid is the root's
``user.logfs.pid`` attribute) to shut down with SIGTERM and waits for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping

import pyfuse3
import trio

from ..core.client import mountinfo
from ..core.errors import LogfsError
from ..core.log import Store
from ..core.storage import DESCRIPTORS, raise_nofile_limit
from ..groups import Coordinator
from . import fuseinit
from ._lines import LineWrites
from .cleaning import Cleaner
from .flusher import Flusher
from .network import address_of, kafka_listener
from .operations import Operations
from .options import MountOptions, parse_options

logger = logging.getLogger("logfs")

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt(3) parameters
LOG_FILE = "logfs.log"  # in DATA, for a daemon without -o log=...


# ---------------------------------------------------------------- the daemon


def keep_freed_memory() -> None:
    """Let glibc reuse freed memory instead of returning it to the kernel.

    The hot paths build numpy arrays of a few MiB per request; by default glibc
    maps each one fresh and unmaps it on free, so every request page-faults
    its buffers in again — the profile showed appends and stream reads about
    1.6x slower for it. Best effort: a no-op without glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 64 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 256 << 20)
    except (OSError, AttributeError):
        pass


def serve(
    data: str, mountpoint: str, options: MountOptions, ready: Callable[[], None] | None = None
) -> int:
    """Run a mount until it is unmounted or signalled; returns an exit code."""
    keep_freed_memory()
    limit = raise_nofile_limit()  # the descriptor budget: core/storage/descriptors.py
    logger.info("open-file limit %d: up to %d segments hold open files", limit, DESCRIPTORS.limit)
    # Partitions are recovered once mounted, in a worker thread: meanwhile the
    # root's user.logfs.health says "recovering" and other requests wait.
    # Store raises the open-file limit to the hard one and sizes the segments'
    # descriptor budget from it (core/storage/descriptors.py).
    store = Store(
        data,
        defaults=options.defaults,
        read_only=options.read_only,
        recover=False,
        limits=options.limits,
    )
    flusher = Flusher(store, **options.tasks["flusher"])
    log_cleaner = Cleaner(store, **options.tasks["cleaner"])
    groups = Coordinator(store)  # one: the mount's groups/ files and the listener's
    # Resolved now: once mounted, a stat of the mount point from this thread would
    # wait for an answer from this very thread.
    real_mountpoint = os.path.realpath(mountpoint)
    ops = Operations(
        store,
        groups=groups,
        sync=flusher.flush_log,
        partitions=options.partitions,
        owner=options.owner,
        buffered=options.buffered,
        mountpoint=real_mountpoint,
    )
    fuse_options = {f"fsname={os.path.abspath(data)}", "subtype=logfs", *options.fuse}
    try:
        listener = kafka_listener(
            store, groups, options, ops.ready, ops.view.forget_topic, flusher.flush_log
        )
        pyfuse3.init(ops, mountpoint, fuse_options)
        lines = LineWrites(ops)
        fuseinit.set_write_hook(lines.take, lines.done)
    except BaseException:
        store.close()
        raise
    logger.info("mounted %s on %s", data, mountpoint)

    def on_recovered() -> None:
        if not options.read_only:
            _write_mount_record(data, real_mountpoint, options, address_of(listener))
        if ready is not None:
            ready()

    try:
        cleaner_or_none = None if options.read_only else log_cleaner
        trio.run(_run, store, ops, flusher, cleaner_or_none, on_recovered, listener)
    finally:
        with contextlib.ExitStack() as teardown:  # runs bottom-up, each step even if one fails
            teardown.callback(store.close)
            teardown.callback(pyfuse3.close, unmount=True)
            teardown.callback(fuseinit.set_write_hook, None, None)
            teardown.callback(store.checkpoint)
            teardown.callback(store.flush)
            teardown.callback(ops.close_files)
            # First: from here on producers go to the store, and wait for its lock.
            teardown.callback(_remove_mount_record, data)
        logger.info("unmounted %s", mountpoint)
    return 1 if ops.failed_to_recover else 0


def _write_mount_record(
    data: str, mountpoint: str, options: MountOptions, kafka: str | None = None
) -> None:
    """The record producers find the mount by. Without it they fall back to the
    store and wait for its lock, so failing to write it does not fail the mount."""
    try:
        mountinfo.write_record(
            data, mountpoint, partitions=options.partitions, defaults=options.defaults, kafka=kafka
        )
    except OSError as e:
        logger.warning("cannot write the mount record %s: %s", mountinfo.record_path(data), e)


def _remove_mount_record(data: str) -> None:
    try:
        mountinfo.remove_record(data)
    except OSError as e:
        logger.warning("cannot remove the mount record %s: %s", mountinfo.record_path(data), e)


async def _run(
    store: Store,
    ops: Operations,
    flusher: Flusher,
    log_cleaner: Cleaner | None,
    on_recovered: Callable[[], None],
    listener=None,
) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, ops)
        if listener is not None:  # requests wait for the recovery (ops.ready)
            await nursery.start(listener.run)
            await nursery.start(listener.broker.groups.run)  # expires members' sessions
        nursery.start_soon(_recover, store, ops, flusher, log_cleaner, on_recovered, nursery)
        await pyfuse3.main()  # returns on pyfuse3.terminate() or an external unmount
        nursery.cancel_scope.cancel()


async def _recover(store, ops, flusher, log_cleaner, on_recovered, nursery) -> None:
    """Recover the partitions while the mount already answers (requests that
    need the store wait), then start the background tasks. A failure to
    recover unmounts."""
    started = time.monotonic()
    try:
        # A reader opens each partition on first use; with nothing to recover the
        # mount already answers (ops.ready), so the store is not touched here.
        if not ops.ready.is_set():
            await trio.to_thread.run_sync(store.recover)
    except Exception as e:  # noqa: BLE001 - logged, then the mount goes
        logger.error("recovering %s failed: %s", store.path, e)
        ops.failed_to_recover = True
        pyfuse3.terminate()
        return
    ops.ready.set()
    if time.monotonic() - started > 1:
        logger.info("recovered %s in %.1f s", store.path, time.monotonic() - started)
    await nursery.start(flusher.run)
    if log_cleaner is not None:
        await nursery.start(log_cleaner.run)
    if ops.buffered is not None:
        nursery.start_soon(ops.buffered.run)
    on_recovered()


async def _stop_on_signal(ops: Operations) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("%s: unmounting", signal.Signals(signum).name)
            if ops.buffered is not None:  # what the kernel holds of open files, first
                with trio.move_on_after(10):
                    await ops.buffered.write_back_open_files()
            pyfuse3.terminate()
            return


# ---------------------------------------------------------------- mount / umount


def mount(
    data: str,
    mountpoint: str,
    options: Mapping[str, str | None] | None = None,
    foreground: bool = False,
) -> int:
    """``logfs mount``: returns 0 once the mount is ready (foreground: once it
    is unmounted again), else 1 with a one-line reason on stderr."""
    data, mountpoint = os.path.abspath(data), _kernel_path(mountpoint)
    try:
        opts = parse_options(options or {})
        _preflight(data, mountpoint, opts)
        if foreground:
            level = logging.DEBUG if "debug" in opts.fuse else logging.INFO
            logging.basicConfig(level=level, format="logfs: %(levelname)s: %(message)s")
            return serve(data, mountpoint, opts)
        return _spawn(data, mountpoint, options or {}, opts)
    except (LogfsError, OSError, RuntimeError) as e:
        print(f"logfs mount: {_one_line(e)}", file=sys.stderr)
        return 1


def _preflight(data: str, mountpoint: str, opts: MountOptions) -> None:
    # mountinfo first: stat on a dead or hung mount point would fail or block.
    if is_mounted(mountpoint):
        raise LogfsError(f"{mountpoint} is already mounted")
    if not os.path.isdir(mountpoint):
        raise LogfsError(f"mount point {mountpoint} does not exist or is not a directory")
    if not os.path.exists("/dev/fuse"):
        raise LogfsError("FUSE is not available: /dev/fuse is missing (modprobe fuse)")
    if opts.read_only and not os.path.isdir(data):
        raise LogfsError(f"{data}: no such data directory")


def _spawn(data: str, mountpoint: str, options: Mapping, opts: MountOptions) -> int:
    """Start the daemon and wait for its ready line (or its error)."""
    log_path = opts.log or os.path.join(data, LOG_FILE)
    if not opts.read_only:
        os.makedirs(data, exist_ok=True)
    try:
        log = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    except OSError:
        log = open(os.devnull, "wb")  # noqa: SIM115
    read_end, write_end = os.pipe()
    cmd = [
        sys.executable,
        "-m",
        "logfs.mount",
        str(write_end),
        data,
        mountpoint,
        json.dumps(dict(options)),
    ]
    with log:
        child = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=[write_end],
            start_new_session=True,
            cwd="/",
        )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as status:
        line = status.readline().decode(errors="replace").strip()
    if line != "ready":
        child.wait()
        raise LogfsError(
            line.removeprefix("error: ") or f"the daemon exited with status {child.returncode}"
        )
    deadline = time.monotonic() + 10
    while not is_mounted(mountpoint):
        if time.monotonic() > deadline or child.poll() is not None:
            raise LogfsError(
                f"the daemon said ready but {mountpoint} is not in /proc/self/mountinfo"
            )
        time.sleep(0.01)
    return 0


def daemon_main(argv: list[str]) -> int:
    """The daemon (``python -m logfs.mount STATUS_FD DATA MNT OPTIONS_JSON``)."""
    status_fd, data, mountpoint, options = int(argv[0]), argv[1], argv[2], json.loads(argv[3])
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s logfs[%(process)d] %(levelname)s: %(message)s"
    )

    def ready() -> None:
        os.write(status_fd, b"ready\n")
        os.close(status_fd)

    try:
        return serve(data, mountpoint, parse_options(options), ready)
    except (LogfsError, OSError, RuntimeError) as e:
        logger.error("%s", _one_line(e))
        with contextlib.suppress(OSError):
            os.write(status_fd, f"error: {_one_line(e)}\n".encode())
        return 1


def umount(mountpoint: str, timeout: float = 60.0) -> int:
    """``logfs umount``: flush, checkpoint and unmount; 0 once done."""
    mountpoint = _kernel_path(mountpoint)
    fstype = mount_type(mountpoint)
    if fstype is None:
        print(f"logfs umount: {mountpoint} is not mounted", file=sys.stderr)
        return 1
    if fstype != "fuse.logfs":
        print(f"logfs umount: {mountpoint} is not a logfs mount ({fstype})", file=sys.stderr)
        return 1
    pid = _daemon_pid(mountpoint)
    if pid is None:  # a dead daemon: only the kernel's mount is left
        done = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"logfs umount: {_one_line(done.stderr)}", file=sys.stderr)
        return done.returncode
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) or is_mounted(mountpoint):
        if time.monotonic() > deadline:
            print(
                f"logfs umount: the daemon (pid {pid}) did not exit within {timeout:.0f} s",
                file=sys.stderr,
            )
            return 1
        time.sleep(0.02)
    return 0


def _kernel_path(path: str) -> str:
    """``path`` absolute with symlinks resolved, as /proc/self/mountinfo names
    mount points. A path that is a mount point is returned unresolved, never
    stat'ed (a dead or hung mount would fail or block); the rest is resolved in
    a thread, given up after 5 s for the same reason."""
    path = os.path.abspath(path)
    if is_mounted(path):
        return path
    result: list[str] = []
    thread = threading.Thread(target=lambda: result.append(os.path.realpath(path)), daemon=True)
    thread.start()
    thread.join(5.0)
    return result[0] if result else path


def _daemon_pid(mountpoint: str) -> int | None:
    """The daemon's pid from the root's xattr, in a thread: a hung mount must not hang us."""
    return mountinfo.mount_pid(mountpoint)


def _alive(pid: int) -> bool:
    return mountinfo.process_start_ticks(pid) is not None


def mount_type(mountpoint: str) -> str | None:
    """The file system type mounted on ``mountpoint`` (from /proc/self/mountinfo), or None."""
    entry = mountinfo.mount_entry(mountpoint)
    return None if entry is None else entry.fstype


def is_mounted(mountpoint: str) -> bool:
    return mount_type(mountpoint) is not None


def _one_line(e: BaseException | str) -> str:
    text = str(e).strip() or type(e).__name__
    if isinstance(e, OSError) and e.strerror:
        text = f"{e.filename + ': ' if e.filename else ''}{e.strerror}"
    return text.splitlines()[0] if text else "unknown error"
