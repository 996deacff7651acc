"""Real mounts driven by shell tools and plain file IO (needs /dev/fuse).

Each test gets its own data dir and mount point under tmp_path and a topic
``t`` with two partitions; the fixture always unmounts (see mount_helpers).
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mount_helpers import LOGFS, Daemon, force_unmount, mount_type, sh, wait_mounted

from logfs import Store
from logfs.mount.files.framing import frame

pytestmark = [pytest.mark.mount, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mnt(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    with Daemon(data, mountpoint, "partitions=2") as daemon:
        os.mkdir(mountpoint / "t")
        daemon.p0 = mountpoint / "t" / "0"
        yield daemon


def values(daemon_or_mountpoint, partition=0) -> list[bytes]:
    mountpoint = getattr(daemon_or_mountpoint, "mountpoint", daemon_or_mountpoint)
    stream = (mountpoint / "t" / str(partition) / "stream").read_bytes()
    return stream.split(b"\n")[:-1]


def state(daemon, partition=0) -> dict:
    return json.loads((daemon.mountpoint / "t" / str(partition) / "state").read_text())


# ---------------------------------------------------------------- writing with shell tools


def test_shell_writers(mnt, tmp_path):
    src = tmp_path / "src.txt"
    src.write_bytes(b"".join(b"file line %d\n" % i for i in range(50_000)))
    env = {**os.environ, "A": str(mnt.p0 / "append"), "SRC": str(src)}
    sh(
        """
        set -e
        echo one > "$A"
        echo two >> "$A"
        printf 'three\\nfour\\nno newline' >> "$A"
        cat "$SRC" > "$A"
        cp "$SRC" "$A"
        dd if="$SRC" of="$A" bs=1M status=none
        seq 1 1000 | tee -a "$A" > /dev/null
        """,
        env=env,
    )
    lines = src.read_bytes().split(b"\n")[:-1]
    expected = [b"one", b"two", b"three", b"four", b"no newline", *lines, *lines, *lines]
    expected += [b"%d" % i for i in range(1, 1001)]
    assert values(mnt) == expected


def test_python_writers(mnt):
    path = mnt.p0 / "append"
    with open(path, "a") as f:
        f.write("appended\n")
    with open(path, "w") as f:  # "w" truncates on open: a no-op on an append file
        f.writelines(f"buffered {i}\n" for i in range(100_000))
        f.write("tail without newline")
    fd = os.open(path, os.O_WRONLY)
    os.write(fd, b"raw\n")
    os.close(fd)
    got = values(mnt)
    assert got[0] == b"appended"
    assert got[1:100_001] == [b"buffered %d" % i for i in range(100_000)]
    assert got[100_001:] == [b"tail without newline", b"raw"]


def test_concurrent_writers_never_interleave(mnt):
    script = (
        "import sys\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    for i in range(20000):\n"
        "        f.write(f'{sys.argv[2]}-{i}-' + 'x' * (i % 50) + '\\n')\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(mnt.p0 / "append"), f"w{w}"])
        for w in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    per_writer: dict[str, list[int]] = {}
    for line in values(mnt):
        writer, i, pad = line.decode().split("-")
        assert pad == "x" * (int(i) % 50)
        per_writer.setdefault(writer, []).append(int(i))
    assert per_writer == {f"w{w}": list(range(20000)) for w in range(4)}


def test_binary_values_and_receipts(mnt):
    payloads = [b"with\nnewlines\n", bytes(range(256)), b""]
    with open(mnt.p0 / "append.bin", "ab") as f:
        f.write(b"".join(frame(p) for p in payloads))
    for n, payload in enumerate(payloads):
        assert (mnt.p0 / "offset" / str(n)).read_bytes() == payload
    fd = os.open(mnt.p0 / "append", os.O_RDWR)
    os.write(fd, b"a\nb\n")
    os.write(fd, b"c\n")
    assert os.read(fd, 4096) == b"0 3 4\n0 5 5\n"
    os.close(fd)


def test_writer_learns_offsets_from_shell(mnt):
    script = """
        exec 3<>"$A"
        echo first >&3
        echo second >&3
        read -r p1 first1 last1 <&3
        read -r p2 first2 last2 <&3
        exec 3>&-
        echo "$p1 $first1 $last1 / $p2 $first2 $last2"
    """
    out = sh(script, env={**os.environ, "A": str(mnt.p0 / "append")}).stdout
    assert out == "0 0 0 / 0 1 1\n"
    with open(mnt.p0 / "append", "a+b", buffering=0) as f:  # Python's "a+" works too
        f.write(b"third\n")
        assert f.read() == b"0 2 2\n"


# ---------------------------------------------------------------- reading


def test_offset_files_with_tools(mnt, tmp_path):
    record = b"exactly this\x00 value" * 1000
    with open(mnt.p0 / "append.bin", "ab") as f:
        f.write(frame(b"first") + frame(record))
    path = mnt.p0 / "offset" / "1"
    env = {**os.environ, "F": str(path), "T": str(tmp_path / "copy")}
    assert sh('wc -c < "$F"', env=env).stdout.strip() == str(len(record))
    assert sh('stat -c %s "$F"', env=env).stdout.strip() == str(len(record))
    assert sh('head -c 7 "$F"', env=env).stdout == "exactly"
    sh('cp "$F" "$T"', env=env)
    assert (tmp_path / "copy").read_bytes() == record
    sh('dd if="$F" of="$T" bs=4096 status=none', env=env)
    assert (tmp_path / "copy").read_bytes() == record
    with open(path, "rb") as f:
        f.seek(6)
        assert f.read(4) == b"y th"
        assert f.seek(0, os.SEEK_END) == len(record)
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            assert m[:12] == b"exactly this"
    with open(path, "rb") as src, open(tmp_path / "sent", "wb") as dst:
        assert os.sendfile(dst.fileno(), src.fileno(), 0, len(record)) == len(record)
    assert (tmp_path / "sent").read_bytes() == record
    assert os.getxattr(path, "user.logfs.offset") == b"1"
    assert int(os.getxattr(path, "user.logfs.timestamp")) > 1_600_000_000_000
    with pytest.raises(FileNotFoundError):
        (mnt.p0 / "offset" / "2").read_bytes()
    assert sorted(os.listdir(mnt.p0 / "offset")) == ["0", "1"]


def test_stream_with_tools(mnt):
    (mnt.p0 / "append").write_text("".join(f"row {i}\n" for i in range(10_000)))
    env = {**os.environ, "S": str(mnt.p0 / "stream")}
    assert sh('wc -l < "$S"', env=env).stdout.strip() == "10000"
    assert sh('grep -c "row 99" "$S"', env=env).stdout.strip() == "111"
    assert sh('head -n 2 "$S"', env=env).stdout == "row 0\nrow 1\n"
    assert sh('tail -n 1 "$S"', env=env).stdout == "row 9999\n"
    assert sh('cat "$S" | md5sum', env=env).stdout == sh("seq -f 'row %g' 0 9999 | md5sum").stdout


def test_tail_f_sees_new_records_within_a_second(mnt, tmp_path):
    (mnt.p0 / "append").write_text("before\n")
    out = tmp_path / "tail.out"
    with open(out, "wb") as f:
        tail = subprocess.Popen(["tail", "-f", str(mnt.p0 / "stream")], stdout=f)
    try:
        deadline = time.monotonic() + 10
        while b"before" not in out.read_bytes():
            assert time.monotonic() < deadline, "tail -f never printed the existing record"
            time.sleep(0.05)
        with open(mnt.p0 / "append", "a") as f:
            f.write("after\n")
        appended = time.monotonic()
        while b"after" not in out.read_bytes():
            assert time.monotonic() - appended < 3, "tail -f missed the appended record"
            time.sleep(0.05)
        assert time.monotonic() - appended < 2.0
    finally:
        tail.kill()
        tail.wait()
    assert out.read_bytes() == b"before\nafter\n"


def test_time_state_segments(mnt):
    before = int(time.time() * 1000) - 1
    (mnt.p0 / "append").write_text("a\nb\n")
    assert os.readlink(mnt.p0 / "time" / str(before)) == "../offset/0"
    assert (mnt.p0 / "time" / str(before)).read_bytes() == b"a"
    assert state(mnt)["next_offset"] == 2
    log = mnt.p0 / "segments" / "00000000000000000000.log"
    assert os.path.realpath(log).startswith(f"{mnt.data}/")
    assert log.read_bytes()[:8] == (0).to_bytes(8, "big")  # base offset of the first batch


def test_metadata_tools(mnt):
    env = {**os.environ, "P": str(mnt.p0)}
    out = sh('ls -l "$P"', env=env).stdout
    assert "append" in out and "stream" in out
    sh('touch "$P/append" && truncate -s 0 "$P/append" && stat "$P/append" > /dev/null', env=env)
    done = sh('echo x > "$P/offset/0"', env=env, check=False)
    assert done.returncode != 0
    done = sh('touch "$P/newfile"', env=env, check=False)
    assert "Operation not permitted" in done.stderr
    assert state(mnt)["next_offset"] == 0


# ---------------------------------------------------------------- errors


def test_errors_reach_the_caller_and_change_nothing(mnt):
    env = {**os.environ, "M": str(mnt.mountpoint)}
    assert "Invalid argument" in sh('mkdir "$M/bad name"', env=env, check=False).stderr
    (mnt.mountpoint / "t" / "config").write_text("max.message.bytes=100\n")
    done = sh(
        'head -c 200 /dev/zero | tr "\\0" x | dd of="$M/t/0/append" status=none',
        env=env,
        check=False,
    )
    assert "Message too long" in done.stderr
    done = sh('echo no.such.key=1 >> "$M/t/config"', env=env, check=False)
    assert "Invalid argument" in done.stderr
    with pytest.raises(OSError) as e, open(mnt.mountpoint / "t" / "config", "a") as f:
        f.write("retention.ms=never\n")
    assert e.value.errno == errno.EINVAL
    assert "max.message.bytes=100\n" in (mnt.mountpoint / "t" / "config").read_text()
    assert state(mnt)["next_offset"] == 0


def test_fsync_returns_when_durable(mnt):
    fd = os.open(mnt.p0 / "append", os.O_WRONLY)
    os.write(fd, b"durable\n" * 10)
    os.fsync(fd)
    os.close(fd)
    s = state(mnt)
    assert s["recovery_point"] == s["next_offset"] == 10


# ---------------------------------------------------------------- crash and restart


def test_sigkill_loses_no_acknowledged_line(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    acked = tmp_path / "acked"
    writer_script = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
        "with open(sys.argv[2], 'w') as acked:\n"
        "    i = 0\n"
        "    while True:\n"
        "        try:\n"
        "            os.write(fd, b'line %d\\n' % i)\n"
        "        except OSError:\n"
        "            break\n"
        "        acked.write(f'{i}\\n'); acked.flush()\n"
        "        i += 1\n"
    )
    daemon = Daemon(data, mountpoint).start()
    try:
        os.mkdir(mountpoint / "t")
        writer = subprocess.Popen(
            [sys.executable, "-c", writer_script, str(mountpoint / "t/0/append"), str(acked)]
        )
        deadline = time.monotonic() + 30
        while not acked.exists() or acked.stat().st_size < 20_000:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        daemon.kill()
        assert writer.wait(timeout=30) == 0
    finally:
        daemon.stop()
    assert mount_type(mountpoint) is None
    n_acked = len(acked.read_text().splitlines())
    assert n_acked > 1000
    with Daemon(data, mountpoint):
        got = values(mountpoint)
    # every acknowledged line once and in order; at most the write in flight beyond
    assert got[:n_acked] == [b"line %d" % i for i in range(n_acked)]
    assert len(got) - n_acked in (0, 1)


def test_recovery_after_a_crash_is_visible_and_requests_wait(tmp_path):
    """After a SIGKILL with much unflushed data, the remounted daemon shows
    ``user.logfs.health = recovering`` on its root while it validates the
    log (a line per partition, with its rate, in its log), and a reader that
    comes meanwhile waits and then gets everything."""
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    with Daemon(data, mountpoint, "flush.ms=600000") as daemon:  # nothing flushed
        os.mkdir(mountpoint / "t")
        sh(f"seq 1 20000000 > {mountpoint}/t/0/append")  # 169 MB of text, 330 MB of log
        daemon.kill()
    daemon = Daemon(data, mountpoint, log=tmp_path / "second.log").start()
    try:
        health, states = [], []
        while not health or health[-1] != b"ok":
            health.append(os.getxattr(mountpoint, "user.logfs.health"))
            states.append(json.loads((mountpoint / ".state").read_bytes()))
        assert health[0] == b"recovering" and set(health) == {b"recovering", b"ok"}
        # the mount's .state tells the same, for scripts that read files only
        recovering = [s["recovery"] for s in states if s["health"] == "recovering"]
        assert recovering and recovering[0]["done"] is False, states[:3]
        assert all(r["recovered"] <= r["partitions"] <= 1 for r in recovering), recovering
        assert sh(f"wc -l < {mountpoint}/t/0/stream").stdout.strip() == "20000000"
        done = json.loads((mountpoint / ".state").read_bytes())
        assert done["health"] == "ok" and done["failures"] == {} and done["pid"] == daemon.proc.pid
        assert done["recovery"]["done"] is True and done["recovery"]["recovered"] == 1
    finally:
        daemon.stop()
    log = (tmp_path / "second.log").read_text()
    assert re.search(r"recovered t-0 from offset 0: [0-9.]+ MB validated in .* MB/s", log), log


# ---------------------------------------------------------------- the command line


def test_daemon_mount_and_umount(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    run = lambda *args: subprocess.run([*LOGFS, *args], capture_output=True, text=True, timeout=60)  # noqa: E731
    try:
        done = run("mount", str(data), str(mountpoint), "-o", "flush.ms=200,partitions=3")
        assert done.returncode == 0, done.stderr
        assert mount_type(mountpoint) == "fuse.logfs"  # ready when mount returns
        os.mkdir(mountpoint / "t")
        assert sorted(os.listdir(mountpoint / "t"))[:3] == ["0", "1", "2"]
        (mountpoint / "t" / "0" / "append").write_text("kept\n")
        again = run("mount", str(data), str(mountpoint))
        assert again.returncode == 1 and "already mounted" in again.stderr
        done = run("umount", str(mountpoint))
        assert done.returncode == 0, done.stderr
        assert mount_type(mountpoint) is None
    finally:
        force_unmount(mountpoint)
    with Store(data, read_only=True) as store:
        log = store.log("t", 0)
        assert [r.value for r in log.scan()] == [b"kept"]
        assert log.recovery_point == 1  # checkpointed by the clean shutdown
    missing = run("mount", str(data), str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    assert run("umount", str(mountpoint)).returncode == 1


def test_sigterm_flushes_and_unmounts(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    daemon = Daemon(data, mountpoint, "flush.ms=3600000").start()
    try:
        os.mkdir(mountpoint / "t")
        fd = os.open(mountpoint / "t/0/append", os.O_WRONLY)
        os.write(fd, b"a\nunterminated")  # the file stays open across the shutdown
        assert daemon.terminate() == 0
    finally:
        daemon.stop()
    with contextlib.suppress(OSError):
        os.close(fd)
    assert mount_type(mountpoint) is None
    with Store(data, read_only=True) as store:
        log = store.log("t", 0)
        assert [r.value for r in log.scan()] == [b"a", b"unterminated"]
        assert log.recovery_point == 2


def test_read_only_mount(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    with Store(data) as store:
        store.create_topic("t")
        store.log("t", 0).append([b"old"])
    with Daemon(data, mountpoint, "ro"):
        assert (mountpoint / "t/0/offset/0").read_bytes() == b"old"
        for name in ("append", "append.bin", "append.batches"):
            with pytest.raises(OSError) as e:
                (mountpoint / "t/0" / name).write_bytes(b"new\n")
            assert e.value.errno == errno.EROFS
        with pytest.raises(OSError):
            os.mkdir(mountpoint / "u")


def test_mount_helper_for_fstab(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    helper = ROOT / "mount_scripts" / "mount.logfs"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        options = "rw,noauto,nofail,x-systemd.automount,flush.ms=500"
        done = subprocess.run(
            [str(helper), str(data), str(mountpoint), "-o", options],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        wait_mounted(mountpoint, timeout=5)
        os.mkdir(mountpoint / "t")
        assert "flush.ms=500" in (mountpoint / "t" / "config").read_text()
    finally:
        subprocess.run([*LOGFS, "umount", str(mountpoint)], capture_output=True, timeout=60)
        force_unmount(mountpoint)


def test_systemd_unit_starts_and_stops_the_mount(tmp_path):
    """Run the unit's own ExecStart/ExecStartPost lines the way systemd would."""
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    unit = ROOT / "mount_scripts" / "logfs@.service"
    # mount_scripts/install.sh installs systemd-analyze (Debian's systemd package).
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing: run install.sh"
    instance = tmp_path / "logfs@mnt-logs.service"
    instance.symlink_to(unit)
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(instance)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = dict(
        line.split("=", 1) for line in unit.read_text().splitlines() if line.startswith("Exec")
    )

    def command(key: str) -> list[str]:
        return shlex.split(lines[key].replace("%f", str(mountpoint)).replace("$$", "$"))

    env = {
        **os.environ,
        "DATA": str(data),
        "OPTIONS": "flush.ms=500",
        "LOGFS": str(Path(sys.executable).parent / "logfs"),
    }
    with open(tmp_path / "journal", "wb") as journal:
        service = subprocess.Popen(
            command("ExecStart"), env=env, stdout=journal, stderr=journal, start_new_session=True
        )
    try:
        assert subprocess.run(command("ExecStartPost"), timeout=90).returncode == 0
        assert mount_type(mountpoint) == "fuse.logfs"
        os.mkdir(mountpoint / "t")
        (mountpoint / "t/0/append").write_text("via systemd\n")
        service.send_signal(signal.SIGTERM)  # systemctl stop, KillMode=mixed
        assert service.wait(timeout=60) == 0
        assert mount_type(mountpoint) is None
    finally:
        force_unmount(mountpoint, service.pid if service.poll() is None else None)
    with Store(data, read_only=True) as store:
        assert [r.value for r in store.log("t", 0).scan()] == [b"via systemd"]
