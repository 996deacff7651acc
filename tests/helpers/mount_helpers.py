"""Starting, waiting for and always cleaning up real logfs mounts in tests.

Rules learned the hard way (docs/platform.md, "Mounting in tests"): the
daemon runs in its own session with its output going to a file (a never-read
pipe hangs the file system); readiness is read from /proc/self/mountinfo,
never by stat'ing the mount point (which blocks forever on a hung mount);
cleanup is ``fusermount3 -u``, then ``-u -z``, then SIGKILL by pid, and never
stats the mount point either.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from logfs.core.client import mountinfo

LOGFS = [sys.executable, "-m", "logfs.cli"]


def mount_type(mountpoint: str | Path) -> str | None:
    """The fs type mounted exactly on ``mountpoint``, from /proc/self/mountinfo."""
    target = os.path.abspath(mountpoint)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4].replace("\\040", " ") == target:
                found = fields[fields.index("-") + 1]
    return found


def wait_mounted(mountpoint, proc: subprocess.Popen | None = None, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while mount_type(mountpoint) != "fuse.logfs":
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the daemon exited with {proc.returncode} before mounting")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{mountpoint} not mounted after {timeout} s")
        time.sleep(0.02)


def wait_unmounted(mountpoint, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while mount_type(mountpoint) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def wait_live(data, timeout: float = 10) -> str:
    """The live mount point of ``data``. A Daemon (``-f``) counts as started once the
    mount is in the mount table; its record is written just after that."""
    deadline = time.monotonic() + timeout
    while (found := mountinfo.live_mount(data)) is None:
        assert time.monotonic() < deadline, f"no live mount record in {data}"
        time.sleep(0.01)
    return found


def force_unmount(mountpoint, pid: int | None = None) -> None:
    """Unmount whatever state the mount is in; never touches the mount point."""
    for args in (["-u"], ["-u", "-z"]):
        if mount_type(mountpoint) is None:
            break
        subprocess.run(["fusermount3", *args, str(mountpoint)], capture_output=True, timeout=30)
        wait_unmounted(mountpoint, timeout=5)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def abort_connection(device: int) -> bool:
    """End the FUSE connection of the mount whose ``st_dev`` was ``device``
    (fusectl's ``abort``): whatever waits on it gets ENOTCONN. False if there
    is no such connection (any more)."""
    connections = Path("/sys/fs/fuse/connections")
    if not any(connections.iterdir()):
        subprocess.run(["mount", "-t", "fusectl", "none", str(connections)], capture_output=True)
    abort = connections / str(device) / "abort"
    try:
        abort.write_text("1")
    except OSError:
        return False
    return True


class Daemon:
    """``logfs mount -f DATA MNT`` as a child process, output in a file."""

    def __init__(
        self,
        data: Path,
        mountpoint: Path,
        *options: str,
        log: Path | None = None,
        prefix: tuple[str, ...] = (),
    ):
        """``prefix``: a command the daemon runs under (e.g. ``fiu-run -x``)."""
        self.prefix = prefix
        self.data = Path(data)
        self.mountpoint = Path(mountpoint)
        self.options = options
        self.log = log or self.data.parent / "daemon.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Daemon:
        cmd = [*self.prefix, *LOGFS, "mount", "-f", str(self.data), str(self.mountpoint)]
        if self.options:
            cmd += ["-o", ",".join(self.options)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        try:
            wait_mounted(self.mountpoint, self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: what a crash looks like (the kernel mount stays, dead)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM: clean shutdown; returns the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None and mount_type(self.mountpoint) is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.terminate(timeout=20)
        force_unmount(self.mountpoint, self.proc.pid if self.proc.poll() is None else None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def said(self, text: str, timeout: float = 30) -> bool:
        """Whether ``text`` is in the daemon's output within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def uring_switch(on: bool):
    """The fuse module's ``enable_uring`` (FUSE over io_uring, docs/mount.md) set to ``on``,
    as it was after. Yields whether it was set: False on a kernel without the switch, or
    where it cannot be written (not root)."""
    switch = Path("/sys/module/fuse/parameters/enable_uring")
    try:
        before = switch.read_text().strip()
        switch.write_text("1" if on else "0")
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        switch.write_text("1" if before == "Y" else "0")


def sh(
    script: str, *, check: bool = True, timeout: float = 60, **kwargs
) -> subprocess.CompletedProcess:
    """Run a bash script; returns the completed process (text output)."""
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=timeout, **kwargs
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{script!r} exited {done.returncode}: {done.stderr.strip()}")
    return done
