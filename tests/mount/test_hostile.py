"""Hostile clients: a shared mount (``allow_other``) attacked by an unprivileged user.

DATA is root's, mode 0755; the mount root is chmod 0777 through the mount, so
the second user (made here with ``useradd``, removed at teardown) may create
topics of their own, as on a shared ext4 directory. Each case makes one attack
and asserts: the errno it gets, the daemon alive, the daemon's RSS (VmRSS from
/proc) under `RSS_BOUND_MIB`, another user's reads of a control topic's
``state`` answered within `PROBE_BOUND_S` (`LISTING_BOUND_S` during
listings) all through the attack (a probe process reading in a loop as the
other user), and the control topic's data unchanged. ``LOGFS_STRESS=long``
runs the cases again in random order for ``LOGFS_STRESS_SECONDS`` (180 by
default). Figures: docs/reliability.md
(Hostile clients).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import pwd
import random
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from bombs import bomb_batch
from mount_helpers import Daemon, sh

from logfs import Store
from logfs.core.format.compression import ZSTD

pytestmark = [pytest.mark.mount, pytest.mark.timeout(600)]

MIB = 1 << 20
RSS_BOUND_MIB = 256  # the daemon's resident memory after any case (docs/reliability.md)
# The longest another user's `cat state` may wait during a case, and during
# listings. Creating and deleting a topic still fsyncs DATA and rewrites the
# checkpoints on the daemon's loop: up to 0.5 s at 8,000 partitions.
PROBE_BOUND_S = 1.0
LISTING_BOUND_S = 0.3
CONTROL = b"".join(b"control %d\n" % i for i in range(100))
LONG = os.environ.get("LOGFS_STRESS") == "long"
PARTITIONS = 5000 if LONG else 1000  # of the large topic (row 12)
TOPICS = 3000 if LONG else 300  # in the mount beside it

# The other user's reader: reads the control topic's state in a loop until its
# stdin closes, then prints how many reads it made and the longest one (s).
PROBE = """
import os, select, sys, time
path, longest, reads = sys.argv[1], 0.0, 0
while not select.select([sys.stdin], [], [], 0.005)[0]:
    start = time.monotonic()
    with open(path, "rb") as f:
        assert f.read().startswith(b'{"topic": "control"')
    longest, reads = max(longest, time.monotonic() - start), reads + 1
    if reads == 1:
        print("reading", flush=True)
print(reads, longest)
"""

# Run as the other user: calls ``op`` on ``path`` (and ``arg``), prints the errno (0: done).
TRY = """
import os, sys
op, path, arg = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
try:
    if op == "write":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            data = open(arg, "rb").read() if arg.startswith("/") else bytes.fromhex(arg)
            os.write(fd, data)
        finally:
            os.close(fd)
    elif op == "mkdir":
        os.mkdir(path)
    elif op == "rmdir":
        os.rmdir(path)
    print(0)
except OSError as e:
    print(e.errno)
"""


class Hostile:
    """The shared mount, its users and its checks."""

    def __init__(self, root: Path, user: str, daemon: Daemon) -> None:
        self.root = root
        self.user = user
        self.daemon = daemon
        self.mnt = daemon.mountpoint
        self.names = itertools.count()
        self.figures: dict[str, float] = {}

    def figure(self, name: str, value: float) -> None:
        """Keep the largest ``value`` measured of ``name`` (for the report)."""
        self.figures[name] = max(value, self.figures.get(name, value))

    def name(self, prefix: str) -> str:
        """A topic name not used yet (the cases run again in the long mode)."""
        return f"{prefix}{next(self.names)}"

    def as_user(self, *args: str, stdin=None, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(
            ["runuser", "-u", self.user, "--", "/usr/bin/python3", *args],
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs,
        )  # fmt: skip

    def user_errno(self, op: str, path: Path, arg: Path | bytes = b"") -> int:
        """The errno the other user gets for ``op`` on ``path`` (0: it worked);
        a write writes ``arg``, or the file it names."""
        text = str(arg) if isinstance(arg, Path) else arg.hex()
        proc = self.as_user("-c", TRY, op, str(path), text)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return int(out)

    @contextlib.contextmanager
    def attack(self, case: str, bound: float = PROBE_BOUND_S):
        """Around one attack: the probe reads as the other user meanwhile;
        afterwards the daemon is alive, small, and the control data whole."""
        probe = self.as_user("-c", PROBE, str(self.mnt / "control/0/state"), stdin=subprocess.PIPE)
        assert probe.stdout.readline() == "reading\n"  # its first read is answered
        try:
            yield
        finally:
            out, err = probe.communicate("", timeout=60)
        assert probe.returncode == 0, err
        reads, longest = out.split()
        assert int(reads) > 0
        self.figure(f"{case}: longest state read (s)", float(longest))
        assert float(longest) < bound, f"{case}: a state read took {longest} s"
        assert self.daemon.proc.poll() is None, f"{case}: the daemon died"
        rss = status_mib(self.daemon.pid, "VmRSS")
        self.figure(f"{case}: RSS (MiB)", rss)
        assert rss < RSS_BOUND_MIB, f"{case}: RSS {rss} MiB"
        assert (self.mnt / "control/0/stream").read_bytes() == CONTROL


def status_mib(pid: int, field: str) -> int:
    """A field of /proc/<pid>/status, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no {field} for {pid}")


@pytest.fixture(scope="module")
def hostile():
    root = Path(tempfile.mkdtemp(prefix="logfs-hostile-"))
    root.chmod(0o755)
    user = f"lfsh{os.getpid() % 100000}"
    sh(f"useradd --no-create-home --shell /usr/sbin/nologin {user}")
    try:
        data, mnt = root / "data", root / "mnt"
        mnt.mkdir()
        with Store(data) as store:
            store.create_topic("control")
            store.log("control", 0).append(CONTROL.splitlines())
            store.create_topic("big", partitions=PARTITIONS)
            for i in range(TOPICS):
                store.create_topic(f"many{i}")
        data.chmod(0o755)
        (root / "bomb").write_bytes(bomb_batch(ZSTD, 1024 * MIB))  # 1 GiB of zeros
        (root / "claim").write_bytes(bomb_batch(ZSTD, 0, records=2**31 - 1))
        for path in (root / "bomb", root / "claim"):
            path.chmod(0o644)
        with Daemon(data, mnt, "allow_other", log=root / "daemon.log") as daemon:
            mnt.chmod(0o777)  # a shared directory: everyone may make topics
            h = Hostile(root, user, daemon)
            yield h
            report(h.figures)
    finally:
        sh(f"userdel {user}", check=False)
        shutil.rmtree(root, ignore_errors=True)


def report(figures: dict[str, float]) -> None:
    out = os.environ.get("LOGFS_HOSTILE_REPORT")
    if out:
        with open(out, "a") as f:
            for key, value in sorted(figures.items()):
                f.write(f"{key}: {value:.3f}\n")


# ---------------------------------------------------------------- the cases


def deleted_topic_keeps_its_descriptors(h: Hostile) -> None:
    """Row 3: descriptors of a deleted topic never reach the one re-created."""
    topic = h.name("shared")
    sh(f"mkdir {h.mnt}/{topic} && echo old >> {h.mnt}/{topic}/0/append")
    before = os.stat(h.mnt / topic / "0/stream").st_ino
    reader = os.open(h.mnt / topic / "0/stream", os.O_RDONLY)
    writer = os.open(h.mnt / topic / "0/append", os.O_WRONLY)
    try:
        assert os.read(reader, 2) == b"ol"  # read up to the deletion
        with h.attack("row 3: re-created topic"):
            sh(f"rmdir {h.mnt}/{topic} && mkdir {h.mnt}/{topic} && chmod 700 {h.mnt}/{topic}")
            sh(f"echo new >> {h.mnt}/{topic}/0/append")
            assert os.read(reader, 100) == b""  # then the end: never the new topic's
            with pytest.raises(OSError) as caught:
                os.write(writer, b"into the new topic?\n")
            assert caught.value.errno == errno.ESTALE
        assert os.stat(h.mnt / topic / "0/stream").st_ino != before
        assert (h.mnt / topic / "0/stream").read_bytes() == b"new\n"
    finally:
        os.close(reader)
        with contextlib.suppress(OSError):
            os.close(writer)
    sh(f"rmdir {h.mnt}/{topic}")


def ownership_dies_with_the_topic(h: Hostile) -> None:
    """Row 4: chown and chmod of a topic are gone when it is re-created."""
    topic = h.name("owned")
    uid = int(sh(f"id -u {h.user}").stdout)
    with h.attack("row 4: ownership after deletion"):
        sh(f"mkdir {h.mnt}/{topic} && chown {h.user} {h.mnt}/{topic} && chmod 700 {h.mnt}/{topic}")
        assert os.stat(h.mnt / topic).st_uid == uid
        sh(f"rmdir {h.mnt}/{topic} && mkdir -m 755 {h.mnt}/{topic}")
        st = os.stat(h.mnt / topic)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
        assert h.user_errno("write", h.mnt / topic / "0/append", b"x\n") == errno.EACCES
    sh(f"rmdir {h.mnt}/{topic}")


def rmdir_follows_posix(h: Hostile) -> None:
    """Row 5: another user cannot remove a topic with records; a topic they
    make is theirs; the sticky bit keeps others' empty topics."""
    private, own, empty = h.name("private"), h.name("mine"), h.name("empty")
    uid = int(sh(f"id -u {h.user}").stdout)
    sh(f"mkdir {h.mnt}/{private} {h.mnt}/{empty} && chmod 700 {h.mnt}/{private}")
    sh(f"echo secret >> {h.mnt}/{private}/0/append")
    with h.attack("row 5: rmdir of another user's topic"):
        assert h.user_errno("rmdir", h.mnt / private) == errno.ENOTEMPTY
        assert h.user_errno("mkdir", h.mnt / own) == 0
        assert os.stat(h.mnt / own).st_uid == uid  # the creator's, not DATA's owner
        assert h.user_errno("write", h.mnt / own / "0/append", b"mine\n") == 0
        assert h.user_errno("rmdir", h.mnt / own) == 0  # its owner may, records and all
        sh(f"chmod 1777 {h.mnt}")
        try:
            assert h.user_errno("rmdir", h.mnt / empty) == errno.EPERM  # sticky
        finally:
            sh(f"chmod 777 {h.mnt}")
        sh(f"chmod 755 {h.mnt}")
        try:
            assert h.user_errno("rmdir", h.mnt / empty) == errno.EACCES  # no write on MNT
        finally:
            sh(f"chmod 777 {h.mnt}")
        assert h.user_errno("rmdir", h.mnt / empty) == 0  # empty: POSIX lets them
    assert (h.mnt / private / "0/stream").read_bytes() == b"secret\n"
    sh(f"rmdir {h.mnt}/{private}")


def large_listings_do_not_stall_others(h: Hostile) -> None:
    """Row 12: listing thousands of partitions and topics while another user reads."""
    with h.attack("row 12: ls of large directories", LISTING_BOUND_S):
        start = time.monotonic()
        listed = sh(f"ls {h.mnt}/big | wc -l").stdout
        h.figure(f"row 12: ls of {PARTITIONS} partitions (s)", time.monotonic() - start)
        assert int(listed) == PARTITIONS + 3  # append, append.bin, config
        start = time.monotonic()
        listed = sh(f"ls {h.mnt} | wc -l").stdout
        h.figure(f"row 12: ls of {TOPICS}+ topics (s)", time.monotonic() - start)
        assert int(listed) >= TOPICS + 2
    start = time.monotonic()
    topic = h.name("quick")
    sh(f"mkdir {h.mnt}/{topic}")
    h.figure("row 12: mkdir beside them (s)", time.monotonic() - start)
    sh(f"rmdir {h.mnt}/{topic}")


def bomb_is_refused(h: Hostile) -> None:
    """Row 1: 1 GiB of zeros in a 32 KiB zstd batch: EINVAL, RSS flat."""
    topic = h.name("bomb")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    with h.attack("row 1: zstd bomb"):
        got = h.user_errno("write", h.mnt / topic / "0/append.batches", h.root / "bomb")
        assert got == errno.EINVAL
    assert (h.mnt / topic / "0/stream").read_bytes() == b""
    sh(f"rmdir {h.mnt}/{topic}")


def huge_claim_is_refused(h: Hostile) -> None:
    """Row 15: a batch claiming 2**31 - 1 records: EINVAL."""
    topic = h.name("claim")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    with h.attack("row 15: 2^31-1 records claimed"):
        got = h.user_errno("write", h.mnt / topic / "0/append.batches", h.root / "claim")
        assert got == errno.EINVAL
    sh(f"rmdir {h.mnt}/{topic}")


def bad_config_is_refused(h: Hostile) -> None:
    """Row 16: bytes that are not UTF-8, full-width digits, `1_000_000`."""
    topic = h.name("conf")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    config = h.mnt / topic / "config"
    before = config.read_bytes()
    with h.attack("row 16: bad config values"):
        for line in (b"key.separator=\xff\n", "segment.bytes=１０００００００\n".encode(),
                     b"segment.bytes=1_000_000\n"):  # fmt: skip
            assert h.user_errno("write", config, line) == errno.EINVAL, line
    assert config.read_bytes() == before
    sh(f"rmdir {h.mnt}/{topic}")


def colliding_names_are_refused(h: Hostile) -> None:
    """Row 16: `a.b` beside `a_b`: EINVAL, as Kafka refuses it."""
    base = h.name("dot")
    assert h.user_errno("mkdir", h.mnt / f"{base}.b") == 0
    with h.attack("row 16: a.b beside a_b"):
        assert h.user_errno("mkdir", h.mnt / f"{base}_b") == errno.EINVAL
    assert not (h.mnt / f"{base}_b").exists()
    sh(f"rmdir {h.mnt}/{base}.b")


def tiny_segments_list_without_stalling(h: Hostile) -> None:
    """A topic of 1,500 one-record segments (segment.bytes=14, set by its owner):
    ``ls segments/`` and ``find`` answer at once and never hold up the others."""
    topic = h.name("tiny")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    assert h.user_errno("write", h.mnt / topic / "config", b"segment.bytes=14\n") == 0
    fd = os.open(h.mnt / topic / "0/append", os.O_WRONLY)
    try:
        for i in range(1500):
            os.write(fd, b"%d\n" % i)
    finally:
        os.close(fd)
    with h.attack("tiny segments: ls segments/ and find", LISTING_BOUND_S):
        start = time.monotonic()
        listed = sh(f"ls {h.mnt}/{topic}/0/segments | wc -l").stdout
        h.figure("tiny segments: ls of 1500 segments (s)", time.monotonic() - start)
        assert int(listed) == 3 * 1500
        start = time.monotonic()
        sh(f"find {h.mnt}/{topic} > /dev/null")
        h.figure("tiny segments: find (s)", time.monotonic() - start)
    sh(f"rmdir {h.mnt}/{topic}")


def partial_lines_are_bounded_per_mount(h: Hostile) -> None:
    """max.message.bytes past the ceiling: EPERM; partial lines of many
    descriptors past the mount's budget: ENOBUFS, RSS under the bound."""
    topic = h.name("partial")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    config = h.mnt / topic / "config"
    assert h.user_errno("write", config, b"max.message.bytes=2147483647\n") == errno.EPERM
    assert h.user_errno("write", config, b"max.message.bytes=16777216\n") == 0
    fds = [os.open(h.mnt / topic / "0/append", os.O_WRONLY) for _ in range(12)]
    codes = set()
    try:
        with h.attack("partial lines: 12 descriptors of 12 MiB each"):
            chunk = b"p" * (1 << 20)
            for fd in fds:
                for _ in range(12):
                    try:
                        os.write(fd, chunk)
                    except OSError as e:
                        codes.add(e.errno)
                        break
    finally:
        for fd in fds:
            os.close(fd)  # each held line becomes a record, its share given back
    assert codes == {errno.ENOBUFS}
    os.write(fd := os.open(h.mnt / topic / "0/append", os.O_WRONLY), b"x" * (1 << 20))
    os.close(fd)  # the budget is free again
    sh(f"rmdir {h.mnt}/{topic}")


def group_offsets_out_of_range_are_einval(h: Hostile) -> None:
    """``groups/<g>`` given a number past an int64: EINVAL at close, nothing committed."""
    topic = h.name("grp")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    group = h.mnt / topic / "0/groups/app"
    sh(f"echo 1 > {group}")  # the group exists, root's: given to the other user, who writes
    user = pwd.getpwnam(h.user)
    os.chown(group, user.pw_uid, user.pw_gid)
    with h.attack("groups: offsets out of range"):
        for text in (b"9223372036854775808\n", b"9" * 40 + b"\n"):
            assert h.user_errno("write", group, text) == errno.EINVAL
        assert h.user_errno("write", group, b"5\n6\n") == 0
    assert group.read_text() == "6\n"
    sh(f"rmdir {h.mnt}/{topic}")
    assert "Traceback" not in (h.root / "daemon.log").read_text()


def many_partitions_are_made_and_deleted_off_the_loop(h: Hostile) -> None:
    """A topic's owner grows it to 2,000 partitions (seconds of fsync) and deletes
    it: their files are made and removed in worker threads, others are answered."""
    topic = h.name("grown")
    assert h.user_errno("mkdir", h.mnt / topic) == 0
    with h.attack("2,000 partitions made and deleted"):
        start = time.monotonic()
        assert h.user_errno("mkdir", h.mnt / topic / "1999") == 0
        h.figure("mkdir of 2,000 partitions (s)", time.monotonic() - start)
        assert sum(name.isdigit() for name in os.listdir(h.mnt / topic)) == 2000
        start = time.monotonic()
        assert h.user_errno("rmdir", h.mnt / topic) == 0
        h.figure("rmdir of 2,000 partitions (s)", time.monotonic() - start)
    assert not list(h.daemon.data.glob(f"{topic}-*"))
    assert not list(h.daemon.data.glob("*-delete"))


CASES = [
    deleted_topic_keeps_its_descriptors,
    ownership_dies_with_the_topic,
    rmdir_follows_posix,
    large_listings_do_not_stall_others,
    bomb_is_refused,
    huge_claim_is_refused,
    bad_config_is_refused,
    colliding_names_are_refused,
    tiny_segments_list_without_stalling,
    partial_lines_are_bounded_per_mount,
    group_offsets_out_of_range_are_einval,
    many_partitions_are_made_and_deleted_off_the_loop,
]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_hostile(hostile, case):
    case(hostile)


def test_hostile_in_random_order(hostile):
    """Every case once more in a random order; with ``LOGFS_STRESS=long``,
    over and over for ``LOGFS_STRESS_SECONDS``. The seed is printed."""
    seconds = float(os.environ.get("LOGFS_STRESS_SECONDS", "180")) if LONG else 0
    seed = int(os.environ.get("LOGFS_STRESS_SEED", random.randrange(1 << 30)))
    print(f"LOGFS_STRESS_SEED={seed}")
    rng = random.Random(seed)
    deadline, runs = time.monotonic() + seconds, 0
    while runs < len(CASES) or time.monotonic() < deadline:
        for case in rng.sample(CASES, len(CASES)):
            case(hostile)
            runs += 1
    hostile.figures["cases run in random order"] = runs
