"""The daemon's commands: ``logfs mount`` (and the daemon process it starts),
``logfs umount`` and ``logfs serve``; each one `Daemon` (daemon.py) over DATA.

`mount` checks what it can up front, then (unless foreground) starts the
daemon (``python -m logfs.daemon``) in a new session and returns once the
daemon reports the mount ready and it shows in /proc/self/mountinfo. `umount`
asks the daemon (its pid is the root's ``user.logfs.pid`` attribute) to shut
down with SIGTERM and waits for it. `serve` runs a daemon without FUSE in the
foreground: it holds DATA's lock, recovers the partitions, runs the flusher
and the log cleaner, writes the mount record (no mount point, the listener's
address) and serves Kafka's protocol until SIGINT/SIGTERM; then it flushes,
checkpoints and releases the lock. Mount options are options.py's.
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

from ..core.client import mountinfo
from ..core.errors import LogfsError
from ..core.storage import DESCRIPTORS, raise_nofile_limit
from ..progress import Progress
from .daemon import Daemon
from .options import MountOptions, parse_options

logger = logging.getLogger("logfs")

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt(3) parameters
LOG_FILE = "logfs.log"  # in DATA, for a daemon without -o log=...


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


def run_daemon(
    data: str,
    options: MountOptions,
    mountpoint: str | None = None,
    ready: Callable[[Daemon], None] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> int:
    """Build and run one daemon (a mount on ``mountpoint``, or a listener
    alone); ``ready(daemon)`` once it serves, ``progress(done, total, name)``
    as its recovery goes. Returns its exit code."""
    keep_freed_memory()
    limit = raise_nofile_limit()  # the descriptor budget: core/storage/descriptors.py
    daemon = Daemon(data, options, mountpoint, progress)  # a failure: one line on stderr
    logger.info("open-file limit %d: up to %d segments hold open files", limit, DESCRIPTORS.limit)
    return daemon.run(None if ready is None else lambda: ready(daemon))


# ---------------------------------------------------------------- mount / umount


def mount(
    data: str,
    mountpoint: str,
    options: Mapping[str, str | None] | None = None,
    foreground: bool = False,
    quiet: bool = False,
) -> int:
    """``logfs mount``: returns 0 once the mount is ready (foreground: once it
    is unmounted again), else 1 with a one-line reason on stderr. Meanwhile the
    recovery's progress is shown on stderr, unless ``quiet``."""
    data, mountpoint = os.path.abspath(data), _kernel_path(mountpoint)
    try:
        opts = parse_options(options or {})
        _preflight(data, mountpoint, opts)
        if foreground:
            level = logging.DEBUG if "debug" in opts.fuse else logging.INFO
            logging.basicConfig(level=level, format="logfs: %(levelname)s: %(message)s")
            return run_daemon(data, opts, mountpoint)
        return _spawn(data, mountpoint, options or {}, opts, quiet)
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


def _spawn(
    data: str, mountpoint: str, options: Mapping, opts: MountOptions, quiet: bool = False
) -> int:
    """Start the daemon and wait for its ready line (or its error), showing the
    ``progress DONE TOTAL`` lines of its recovery meanwhile."""
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
        "logfs.daemon",
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
    with (
        os.fdopen(read_end, "rb") as status,
        Progress(f"recovering {data}", None, quiet=quiet) as progress,
    ):
        while (line := status.readline().decode(errors="replace").strip()).startswith("progress "):
            done, total = line.split()[1:3]
            progress.report(int(done), int(total))
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
    """The daemon (``python -m logfs.daemon STATUS_FD DATA MNT OPTIONS_JSON``)."""
    if len(argv) != 4:
        print("usage: python -m logfs.daemon STATUS_FD DATA MNT OPTIONS_JSON", file=sys.stderr)
        return 2
    status_fd, data, mountpoint, options = int(argv[0]), argv[1], argv[2], json.loads(argv[3])
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s logfs[%(process)d] %(levelname)s: %(message)s"
    )

    def ready(daemon: Daemon) -> None:
        os.write(status_fd, b"ready\n")
        os.close(status_fd)

    shown = [0.0]

    def progress(done: int, total: int, name: str) -> None:
        """The recovery's progress for `logfs mount` to show, 5 lines a second at most."""
        now = time.monotonic()
        if done == total or now - shown[0] >= 0.2:
            shown[0] = now
            with contextlib.suppress(OSError):
                os.write(status_fd, f"progress {done} {total}\n".encode())

    try:
        return run_daemon(data, parse_options(options), mountpoint, ready, progress)
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


# ---------------------------------------------------------------- serve


def serve(data: str, listen: str, options: Mapping[str, str | None]) -> int:
    """``logfs serve``: 0 after a clean shutdown, else 1 with a one-line reason."""
    logging.basicConfig(level=logging.INFO, format="logfs: %(levelname)s: %(message)s")

    def ready(daemon: Daemon) -> None:  # what scripts (and tests) wait for
        print(f"serving {data} on {daemon.address}", flush=True)

    try:
        return run_daemon(data, parse_options({**options, "kafka": listen}), None, ready)
    except (LogfsError, OSError, RuntimeError) as e:
        print(f"logfs serve: {_one_line(e)}", file=sys.stderr)
        return 1
