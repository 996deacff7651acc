"""I/O errors injected into a running daemon with libfiu (Debian's fiu-utils).

The daemon runs under ``fiu-run -x``, which preloads libfiu's wrappers of the
POSIX I/O functions; ``fiu-ctrl`` then makes a chosen function fail with a
chosen errno at a chosen moment, once (``onetime``) or until disabled. The
store calls a different function for each place, so each row of the failure
table in docs/reliability.md is one failure point:

    fdatasync   the fsync of a segment's .log and indexes
    fsync       the fsync of a partition directory (and of checkpoint files)
    writev      the append of batches to a segment (FUSE replies use it too,
                so it is failed ``onetime``, on a quiet mount)
    write       index entries (and checkpoint and config files)
    ftruncate   cutting a partly written batch off again
    open        creating a segment at a roll
    rename      deleting a segment (renamed aside first), replacing a
                checkpoint or a topic's config file

Each test checks what clients see, what is still served, and that after a
clean remount every acknowledged record (its fsync() returned) is there, in
order, whole.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import stress
from mount_helpers import LOGFS, Daemon

import logfs
from logfs.core.log.store import RECOVERY_POINT_FILE, read_checkpoint

pytestmark = [pytest.mark.mount, pytest.mark.timeout(180)]

# a small segment.bytes so that a few KiB roll; the flusher only flushes on fsync()
OPTIONS = ("partitions=2", "segment.bytes=4096", "index.interval.bytes=64", "flush.ms=600000")


class Faults:
    """fiu-ctrl for one daemon started under fiu-run."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        deadline = time.monotonic() + 10
        while not os.path.exists(f"/tmp/fiu-ctrl-{pid}.in"):
            assert time.monotonic() < deadline, "fiu-run made no control fifo"
            time.sleep(0.01)

    def _ctl(self, command: str) -> None:
        proc = subprocess.Popen(
            ["fiu-ctrl", "-c", command, str(self.pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # fiu-ctrl is a script: on a timeout, kill its children too
        )
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError(f"fiu-ctrl got no answer to {command!r}") from None
        assert proc.returncode == 0 and "error" not in out, (command, out)

    def enable(self, point: str, code: int = errno.EIO, *, onetime: bool = False) -> None:
        self._ctl(f"enable name={point},failinfo={code}" + (",onetime" if onetime else ""))

    def disable(self, point: str) -> None:
        self._ctl(f"disable name={point}")


class Store:
    """A data dir and mount point; the daemon under fiu-run, then plainly."""

    def __init__(self, tmp_path: Path) -> None:
        self.data, self.mnt = tmp_path / "data", tmp_path / "mnt"
        self.mnt.mkdir()
        self.daemon: Daemon | None = None
        self.faults: Faults | None = None
        self.acked: list[bytes] = []  # lines of t/0 whose fsync() returned

    def mount(self, *options: str, faulty: bool = True) -> Daemon:
        prefix = (shutil.which("fiu-run"), "-x") if faulty else ()
        assert all(prefix), "fiu-run is missing: install fiu-utils (mount_scripts/install.sh)"
        self.daemon = Daemon(self.data, self.mnt, *OPTIONS, *options, prefix=prefix).start()
        self.faults = Faults(self.daemon.pid) if faulty else None
        return self.daemon

    def remount(self) -> None:
        self.daemon.stop()
        assert self.daemon.proc.returncode == 0, self.daemon.output()
        self.mount(faulty=False)

    def path(self, *parts: str) -> Path:
        return self.mnt.joinpath(*parts)

    def append_acked(self, lines: list[bytes], partition: int = 0) -> None:
        fd = os.open(self.path("t", str(partition), "append"), os.O_WRONLY)
        try:
            os.write(fd, b"".join(line + b"\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        if partition == 0:
            self.acked += lines

    def values(self, partition: int = 0) -> list[bytes]:
        return self.path("t", str(partition), "stream").read_bytes().split(b"\n")[:-1]

    def state(self, partition: int = 0) -> dict:
        return json.loads(self.path("t", str(partition), "state").read_text())

    def health(self) -> tuple[str, dict]:
        health = os.getxattr(self.mnt, "user.logfs.health").decode()
        return health, json.loads(os.getxattr(self.mnt, "user.logfs.failures"))

    def check(self) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*LOGFS, "check", str(self.data)], capture_output=True, text=True, timeout=60
        )

    def close(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path)
    yield s
    s.close()


def lines(prefix: str, n: int, width: int = 60) -> list[bytes]:
    return [f"{prefix}-{i}-".encode().ljust(width, b"x") for i in range(n)]


def write_batches(fd: int, values: list[bytes]) -> None:
    """One write() per line: batches enough for index entries (index.interval.bytes=64)."""
    for value in values:
        os.write(fd, value + b"\n")


# segments big enough for dozens of batches per writev(), which libfiu can cut short
BIG_SEGMENTS = "segment.bytes=1073741824\n"


def many(prefix: str) -> bytes:
    """~900 KiB of lines in one write(): dozens of batches (with BIG_SEGMENTS, one writev())."""
    return b"".join(line + b"\n" for line in lines(prefix, 15000))


def torn_write(store: Store, fd: int, code: int) -> list[bytes]:
    """A write() of many batches that libfiu's writev/reduce cuts short, so
    that it fails with ``code``. libfiu drops a random number of the buffers,
    which may be none: such a write succeeds whole, and another is tried.
    Returns the lines of the writes that succeeded."""
    whole: list[bytes] = []
    for attempt in range(6):
        store.faults.enable("posix/io/rw/writev/reduce", onetime=True)
        batch = lines(f"try{attempt}", 15000)
        try:
            os.write(fd, b"".join(line + b"\n" for line in batch))
        except OSError as e:
            assert e.errno == code, e
            return whole
        whole += batch
    raise AssertionError("libfiu never cut a write short")


def assert_errno(code: int, call, *args) -> None:
    with pytest.raises(OSError) as e:
        call(*args)
    assert e.value.errno == code, e.value


def assert_recovered(store: Store, *, repair: bool = False) -> None:
    """After a clean remount (``repair``: `logfs check --repair` first, offline):
    every acknowledged line in order, nothing torn, and the partition takes
    appends and fsyncs again."""
    if repair:
        store.daemon.stop()
        done = subprocess.run(
            [*LOGFS, "check", "--repair", str(store.data)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        recovery_points = read_checkpoint(store.data / RECOVERY_POINT_FILE)
        with logfs.Store(store.data, read_only=True) as data:  # re-validated, made durable
            assert recovery_points[("t", 0)] == data.log("t", 0).next_offset >= len(store.acked)
        store.mount(faulty=False)
    else:
        store.remount()
    got = store.values()
    assert got[: len(store.acked)] == store.acked
    for line in got[len(store.acked) :]:  # lines written but not acknowledged: whole or absent
        assert re.fullmatch(rb"(try|roll)\d*-\d+-x*", line) and len(line) == 60, line
    store.append_acked([b"after-recovery"])
    assert store.values()[-1] == b"after-recovery"
    assert store.state()["status"] == "online" and store.health() == ("ok", {})
    check = store.check()
    assert check.returncode == 0, check.stdout + check.stderr


def assert_offline(store: Store, fd: int, cause: str) -> None:
    """What a partition taken offline looks like from outside."""
    for _ in range(3):  # the fault is gone, yet no fsync may report success
        assert_errno(errno.EIO, os.fsync, fd)
        time.sleep(0.2)
    assert_errno(errno.EIO, os.write, fd, b"refused\n")
    state = store.state()
    assert state["status"] == "offline" and cause in state["failure"], state
    assert state["recovery_point"] >= len(store.acked)
    last = store.path("t", "0", "offset", str(len(store.acked) - 1))
    assert last.read_bytes() == store.acked[-1]  # below the recovery point: served
    past = store.path("t", "0", "offset", str(state["recovery_point"]))  # not known durable
    unknown = state["next_offset"] > state["recovery_point"]
    assert_errno(errno.EIO if unknown else errno.ENOENT, past.read_bytes)
    store.append_acked([b"other-partition"], partition=1)  # the rest of DATA works
    assert store.values(1) == [b"other-partition"]
    health, failures = store.health()
    assert health == "failed" and cause in failures["t-0"]
    check = store.check()
    said = [line for line in check.stdout.splitlines() if line.startswith("t-0: ")]
    assert check.returncode == 1 and len(said) == 1 and cause in said[0], check.stdout
    assert store.daemon.output().count("t-0 is offline") == 1  # logged once


def start(store: Store, *options: str, config: str = "") -> int:
    """Mount under fiu-run, create ``t`` (with ``config`` lines), append
    acknowledged lines; an open ``t/0/append`` for the test."""
    store.mount(*options)
    store.path("t").mkdir()
    if config:
        with open(store.path("t", "config"), "a") as f:
            f.write(config)
    store.append_acked(lines("acked", 50))
    return os.open(store.path("t", "0", "append"), os.O_WRONLY)


# ---------------------------------------------------------------- the partition goes offline


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_fsync_failing_for_a_moment_never_reports_success_until_recovery(store, code):
    fd = start(store)
    store.faults.enable("posix/io/sync/fdatasync", code)
    os.write(fd, b"".join(line + b"\n" for line in lines("try", 10)))
    assert_errno(code, os.fsync, fd)
    deadline = time.monotonic() + 1  # the disk fails for about a second
    while time.monotonic() < deadline:
        assert_errno(errno.EIO, os.fsync, fd)
        time.sleep(0.1)
    store.faults.disable("posix/io/sync/fdatasync")
    assert_offline(store, fd, "fsync failed")
    os.close(fd)
    assert_recovered(store)


def test_flush_messages_acknowledgement(store):
    """With flush.messages=1 a write() returns once durable: during the fault it
    fails, and so does every later one."""
    fd = start(store, "flush.messages=1")
    store.faults.enable("posix/io/sync/fdatasync")
    assert_errno(errno.EIO, os.write, fd, lines("try", 1)[0] + b"\n")
    store.faults.disable("posix/io/sync/fdatasync")
    assert_offline(store, fd, "fsync failed")
    os.close(fd)
    assert_recovered(store)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_directory_fsync(store, code):
    fd = start(store)
    store.faults.enable("posix/io/sync/fsync", code)
    os.write(fd, b"".join(line + b"\n" for line in lines("roll", 100)))  # rolls: a new entry
    assert store.state()["segments"] > 1
    assert_errno(code, os.fsync, fd)
    store.faults.disable("posix/io/sync/fsync")
    assert_offline(store, fd, "fsync failed")
    os.close(fd)
    assert_recovered(store)


def test_segment_write(store):
    fd = start(store)
    store.faults.enable("posix/io/rw/writev", onetime=True)
    assert_errno(errno.EIO, os.write, fd, lines("try", 1)[0] + b"\n")
    assert_offline(store, fd, "appending to a segment failed: EIO")
    os.close(fd)
    assert_recovered(store, repair=True)


def test_torn_write_that_cannot_be_cut_off(store):
    """A write() of many batches done only in part, then cutting it off fails
    too: the partition goes offline and recovery keeps a prefix of the batches.
    (libfiu shortens writev()'s list of buffers, so this tear falls between
    batches; tears inside a batch are in test_failure.py and the power-loss
    model.)"""
    fd = start(store, config=BIG_SEGMENTS)
    store.faults.enable("posix/io/rw/ftruncate", onetime=True)
    whole = torn_write(store, fd, errno.EIO)
    torn = lines(f"try{len(whole) // 15000}", 15000)  # the write cut short
    assert_offline(store, fd, "cutting off a partly written batch failed")
    os.close(fd)
    acked = len(store.acked)
    assert_recovered(store)
    kept = store.values()[acked:-1]
    assert kept[: len(whole)] == whole
    assert kept[len(whole) :] == torn[: len(kept) - len(whole)]  # a prefix of it, in order


def test_index_write(store):
    fd = start(store)
    write_batches(fd, lines("try", 10))  # index entries pending
    store.faults.enable("posix/io/rw/write", onetime=True)
    assert_errno(errno.EIO, os.fsync, fd)
    assert_offline(store, fd, "writing an index before an fsync failed: EIO")
    os.close(fd)
    assert_recovered(store)


def test_roll_cannot_create_the_segment(store):
    fd = start(store)
    store.faults.enable("posix/io/oc/open", onetime=True)
    assert_errno(errno.EIO, os.write, fd, b"".join(x + b"\n" for x in lines("roll", 100)))
    assert_offline(store, fd, "appending to a segment failed: EIO")
    os.close(fd)
    assert_recovered(store)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_retention_cannot_delete_a_segment(store, code):
    fd = start(store, "log.retention.check.interval.ms=100")
    with open(store.path("t", "config"), "a") as config:
        config.write("retention.bytes=4096\n")  # one segment: nothing to delete yet
    store.faults.enable("posix/io/dir/rename", code)  # segments are renamed aside, then removed
    os.write(fd, b"".join(x + b"\n" for x in lines("roll", 100)))  # several segments
    deadline = time.monotonic() + 10
    while store.state()["status"] == "online":
        assert time.monotonic() < deadline, "retention did not run"
        time.sleep(0.05)
    store.faults.disable("posix/io/dir/rename")
    state = store.state()
    assert "deleting segment" in state["failure"] and state["log_start_offset"] > 0
    assert_errno(errno.EIO, os.fsync, fd)
    assert_errno(errno.EIO, os.write, fd, b"refused\n")
    os.close(fd)
    store.daemon.stop()
    store.mount(faulty=False)  # recovery, then retention deletes what it could not
    deadline = time.monotonic() + 10
    while (state := store.state())["segments"] > 2:
        assert time.monotonic() < deadline, "retention did not delete the segments"
        time.sleep(0.05)
    assert state["status"] == "online" and state["log_start_offset"] > 0
    written = store.acked + lines("roll", 100)
    assert store.values() == written[state["log_start_offset"] :]


# ---------------------------------------------------------------- clean errors: nothing changes


@pytest.mark.parametrize(
    "point", ["posix/io/rw/writev", "posix/io/rw/writev/reduce"], ids=["full", "torn"]
)
def test_full_disk_on_segment_write(store, point):
    """ENOSPC, or a short write (a batch written in part): the part is cut
    off, the write() fails with ENOSPC and the partition stays online."""
    fd = start(store, config=BIG_SEGMENTS)
    whole = []
    if point.endswith("reduce"):
        whole = torn_write(store, fd, errno.ENOSPC)
    else:
        store.faults.enable(point, errno.ENOSPC, onetime=True)
        assert_errno(errno.ENOSPC, os.write, fd, many("try"))
    os.close(fd)
    store.acked += whole  # appended whole, and made durable by the next fsync
    store.append_acked([b"next"])
    assert store.values() == store.acked
    assert store.state()["status"] == "online"
    assert_recovered(store)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EMFILE])
def test_full_disk_or_no_descriptors_at_a_roll(store, code):
    fd = start(store)
    store.faults.enable("posix/io/oc/open", code, onetime=True)
    assert_errno(code, os.write, fd, b"".join(x + b"\n" for x in lines("roll", 100)))
    os.close(fd)
    store.append_acked(lines("roll", 100))  # the roll succeeds now
    assert store.values() == store.acked and store.state()["segments"] > 1
    assert_recovered(store)


def test_full_disk_writing_an_index(store):
    fd = start(store)
    write_batches(fd, lines("try", 10))
    store.faults.enable("posix/io/rw/write", errno.ENOSPC, onetime=True)
    assert_errno(errno.ENOSPC, os.fsync, fd)  # not durable yet, and said so
    os.fsync(fd)  # room again: the same records become durable
    store.acked += lines("try", 10)
    os.close(fd)
    assert store.state()["recovery_point"] == len(store.acked)
    assert_recovered(store)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_checkpoint_write(store, code):
    store.mount("log.flush.offset.checkpoint.interval.ms=100")
    store.path("t").mkdir()
    store.faults.enable("posix/io/dir/rename", code)
    deadline = time.monotonic() + 10
    while store.health()[0] != "degraded":
        assert time.monotonic() < deadline, "no checkpoint failed"
        time.sleep(0.05)
    assert "checkpoints" in store.health()[1]
    store.append_acked(lines("acked", 50))  # appends and fsyncs go on
    store.faults.disable("posix/io/dir/rename")
    while store.health()[0] != "ok":
        assert time.monotonic() < deadline, "checkpoints did not recover"
        time.sleep(0.05)
    checkpoint = (store.data / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert "t 0 50" in checkpoint
    assert_recovered(store)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_config_write(store, code):
    store.mount()
    store.path("t").mkdir()
    before = store.path("t", "config").read_text()
    store.faults.enable("posix/io/dir/rename", code)
    with pytest.raises(OSError) as e, open(store.path("t", "config"), "a") as config:
        config.write("retention.ms=1234\n")
    assert e.value.errno == code
    assert store.path("t", "config").read_text() == before
    assert not (store.data / "config" / "t.properties").exists()
    store.faults.disable("posix/io/dir/rename")
    with open(store.path("t", "config"), "a") as config:
        config.write("retention.ms=1234\n")
    assert "retention.ms=1234" in store.path("t", "config").read_text()
    store.append_acked([b"a"])
    assert_recovered(store)


# ---------------------------------------------------------------- faults at random moments

# (point, errno). Only the sync calls: libfiu's control thread in the daemon
# itself opens, reads and writes its fifos, so an open/read/write failure left
# armed when no store call took it breaks fiu-ctrl; those points have their
# deterministic tests above, where the store's call takes the failure at once.
RANDOM_FAULTS = [
    ("posix/io/sync/fdatasync", errno.EIO),
    ("posix/io/sync/fdatasync", errno.ENOSPC),
    ("posix/io/sync/fsync", errno.EIO),
    ("posix/io/sync/fsync", errno.ENOSPC),
]


@pytest.mark.timeout(stress.scale(180, 1200))
def test_random_faults_under_a_writer_lose_no_acknowledged_record(store):
    """Rounds of: a writer appends and fsyncs batches of lines while fsync or
    fdatasync fails (EIO or ENOSPC) from a random moment for 0.3 s; then a
    clean remount. Every
    acknowledged line survives every round, in order; nothing is torn or
    invented; the partition always comes back."""
    rng = random.Random(int(os.environ.get("LOGFS_STRESS_SEED", "1")))
    figures = stress.tally("faults")
    acked: list[bytes] = []
    tried: list[bytes] = []
    for round_ in range(stress.scale(4, 60)):
        store.mount()
        if round_ == 0:
            store.path("t").mkdir()
        point, code = rng.choice(RANDOM_FAULTS)
        fault_at, started, enabled = rng.uniform(0.05, 0.4), time.monotonic(), None
        fd = os.open(store.path("t", "0", "append"), os.O_WRONLY)
        seq = 0
        while time.monotonic() - started < 3:
            if enabled is None and time.monotonic() - started > fault_at:  # once
                store.faults.enable(point, code)
                enabled = time.monotonic()
                figures["faults_injected"] += 1
            if enabled and time.monotonic() - enabled > 0.3:
                store.faults.disable(point)
                enabled = 0.0
            batch = [f"r{round_}-{seq + i}-".encode().ljust(60, b"x") for i in range(50)]
            seq += len(batch)
            tried += batch
            try:
                os.write(fd, b"".join(line + b"\n" for line in batch))
                os.fsync(fd)
            except OSError as e:
                if e.errno != errno.EIO:
                    continue  # a clean error: nothing appended, the partition online
                assert store.state()["status"] == "offline"
                figures["partitions_taken_offline"] += 1
                break
            acked += batch
        store.faults.disable(point)
        os.close(fd)
        store.daemon.stop()
        store.mount(faulty=False)  # recovery
        got = store.values()
        assert store.state()["status"] == "online"
        position = {line: i for i, line in enumerate(tried)}
        order = [position[line] for line in got]  # KeyError: a line never written
        assert order == sorted(order) and len(set(order)) == len(order)
        missing = set(acked) - set(got)
        assert not missing, f"round {round_}: lost {len(missing)} acknowledged lines"
        figures["rounds"] += 1
        figures["acknowledged_record_checks"] += len(acked)  # all of them, every round
        store.daemon.stop()
    figures["acknowledged_records"] += len(acked)
    figures["lines_written"] += len(tried)
