"""Mounting logfs and the null file systems (pyfuse3's nullfs.py, and cnullfs.c on
libfuse's low-level API, compiled here) for benchmarks, and always cleaning up.

The same rules as the test helpers (tests/helpers/mount_helpers.py, which this reuses):
daemons run in their own session with output to a file, readiness comes from
/proc/self/mountinfo, cleanup is SIGTERM, then ``fusermount3 -u`` (``-z``), then
SIGKILL of the daemon's own pid — never a stat of the mount point.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "helpers")]

from mount_helpers import Daemon, force_unmount, mount_type, wait_mounted  # noqa: E402


class NullDaemon:
    """benchmarks/nullfs.py (the pyfuse3 null file system) on ``mountpoint`` as a child
    process."""

    fs_type = "fuse.nullfs"

    def __init__(
        self,
        mountpoint: Path,
        log: Path,
        source_bytes: int,
        copy_to: Path | None = None,
        writeback: bool = False,
    ) -> None:
        self.mountpoint = Path(mountpoint)
        self.writeback = writeback
        self.log = log
        self.source_bytes = source_bytes
        self.copy_to = copy_to
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        cmd = [sys.executable, str(HERE / "nullfs.py"), str(self.mountpoint)]
        cmd += ["--source-bytes", str(self.source_bytes)]
        if self.copy_to is not None:
            cmd += ["--copy-to", str(self.copy_to)]
        if self.writeback:
            cmd.append("--writeback")
        return cmd

    @property
    def pid(self) -> int:
        return self.proc.pid

    def __enter__(self) -> NullDaemon:
        cmd = self.command()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        deadline = time.monotonic() + 30
        while mount_type(self.mountpoint) != self.fs_type:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"{self.fs_type} did not mount; see {self.log}")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        force_unmount(self.mountpoint, self.proc.pid if self.proc.poll() is None else None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def build_cnullfs(directory: Path) -> Path:
    """Compile benchmarks/cnullfs.c (gcc, libfuse3-dev's pkg-config) into ``directory``;
    the program's path. Built afresh for every run, so it is always this source's."""
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "fuse3"], check=True, capture_output=True, text=True
    ).stdout.split()
    program = Path(directory) / "cnullfs"
    subprocess.run(
        ["gcc", "-O2", "-Wall", "-Werror", str(HERE / "cnullfs.c"), "-o", str(program), *flags],
        check=True,
    )
    return program


class CNullDaemon(NullDaemon):
    """benchmarks/cnullfs.c, built by `build_cnullfs`: the floor of the transport, and
    with ``copy_to`` the floor of a file system that keeps what is written (each
    write() answered once its bytes are appended to that file)."""

    fs_type = "fuse.cnullfs"

    def __init__(
        self, program: Path, mountpoint: Path, log: Path, source_bytes: int,
        copy_to: Path | None = None,
    ) -> None:  # fmt: skip
        super().__init__(mountpoint, log, source_bytes, copy_to)
        self.program = program

    def command(self) -> list[str]:
        cmd = [str(self.program), str(self.mountpoint), str(self.source_bytes)]
        return cmd if self.copy_to is None else [*cmd, str(self.copy_to)]


def logfs_mount(data: Path, mountpoint: Path, log: Path, *options: str) -> Daemon:
    """``logfs mount -f`` as a context manager (see tests/helpers/mount_helpers.py, Daemon)."""
    return Daemon(data, mountpoint, *options, log=log)


class CheckoutDaemon(Daemon):
    """``logfs mount -f`` of another checkout (its own ``.venv``), beside this one's: the
    same targets measured against another version of logfs in the same run. It runs
    from that checkout, with only that checkout on ``PYTHONPATH``, so none of this
    checkout's modules are imported."""

    def __init__(self, checkout: Path, data: Path, mountpoint: Path, *options: str, log: Path):
        super().__init__(data, mountpoint, *options, log=log)
        self.checkout = Path(checkout).resolve()
        python = self.checkout / ".venv" / "bin" / "python"
        if not python.exists():
            raise RuntimeError(f"{self.checkout} has no .venv (run its mount_scripts/install.sh)")
        self.python = str(python)

    def start(self) -> CheckoutDaemon:
        cmd = [self.python, "-m", "logfs.cli", "mount", "-f", str(self.data), str(self.mountpoint)]
        if self.options:
            cmd += ["-o", ",".join(self.options)]
        env = {**os.environ, "PYTHONPATH": str(self.checkout)}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                cwd=self.checkout, env=env,
            )  # fmt: skip
        try:
            wait_mounted(self.mountpoint, self.proc)
        except BaseException:
            self.stop()
            raise
        return self
