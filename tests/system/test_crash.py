"""Crash consistency through the mount: SIGKILL the daemon under concurrent writers.

Each cycle mounts the data directory (the daemon recovers it), runs
``logfs check`` on it, verifies every record against what the writers were
told, then starts writer processes — on the same and on different
partitions, text lines and binary frames, some calling fsync — and kills the
daemon with SIGKILL at a random moment. A writer logs ``try <last seq>``
before each write() and ``ok <last seq>`` once it returned; every record is
``<writer>c<cycle> <seq> <payload(seq)>``.

Checked after every cycle: each acknowledged record is present exactly once,
in its writer's order, with its exact payload; nothing beyond the write in
flight at the kill is there; nothing torn or foreign is in any partition;
`logfs check` finds nothing to complain about. LOGFS_STRESS=long runs more
cycles (docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest
from mount_helpers import LOGFS, Daemon, abort_connection, mount_type
from stress import report, scale

from logfs import Store

pytestmark = [pytest.mark.mount, pytest.mark.timeout(scale(300, 7200))]

WRITERS = 4  # writers 0, 2 on partition 0; 1, 3 on partition 1
PARTITIONS = 2

WRITER = r"""
import os, random, struct, sys, time
path, tag, acks, binary, syncs, seed = sys.argv[1:7]
rng = random.Random(int(seed))
binary, syncs = binary == "1", syncs == "1"

def payload(seq):
    body = b"%d" % (seq * 7919 % 100003)
    body = body * (1 + seq % 37)
    return body + (b"\n\x00\xff" if binary else b"") + body[:5]

log = open(acks, "w", buffering=1)
try:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
except OSError:  # the daemon was killed before this writer got going
    sys.exit(0)
seq = 0
while True:
    n = rng.choice((1, 1, 2, 5, 20, 200))
    values = [b"%s %d %s" % (tag.encode(), seq + i, payload(seq + i)) for i in range(n)]
    if binary:
        data = b"".join(struct.pack(">I", len(v)) + v for v in values)
    else:
        data = b"".join(v + b"\n" for v in values)
    log.write(f"try {seq + n - 1}\n")
    try:
        if os.write(fd, data) != len(data):
            raise OSError("short write")
        synced = syncs and rng.random() < 0.1
        if synced:
            os.fsync(fd)
    except OSError:
        break
    seq += n
    log.write(f"ok {seq - 1}\n")
    if synced:
        log.write(f"synced {seq - 1}\n")
    time.sleep(0.005)  # a crash test, not a benchmark: keeps the long form's data small
"""


def payload(seq: int, binary: bool) -> bytes:
    body = b"%d" % (seq * 7919 % 100003)
    body = body * (1 + seq % 37)
    return body + (b"\n\x00\xff" if binary else b"") + body[:5]


def acks_of(path, acknowledged: str = "ok") -> tuple[int, int]:
    """(last acknowledged seq, last attempted seq); -1 for none. What counts as
    acknowledged: a returned write() (``ok``) or a returned fsync() (``synced``)."""
    ok = tried = -1
    for line in path.read_text().splitlines():
        word, _, number = line.partition(" ")
        if not number.isdigit():
            continue  # a line cut short can only be the last
        if word == acknowledged:
            ok = int(number)
        elif word == "try":
            tried = int(number)
    return ok, tried


def verify(data, expected: dict[str, tuple[int, int, int, bool]], start: list[int]) -> list[int]:
    """The records from offsets ``start`` on (per partition) against the
    writers' acknowledgements; returns where each partition ends now.

    ``expected``: tag -> (partition, last acknowledged, last attempted, binary)
    for the writers of the last cycle, whose records are all past ``start``.
    """
    seen: dict[str, list[int]] = {tag: [] for tag in expected}
    ends = []
    with Store(data, read_only=True) as store:
        for partition in range(PARTITIONS):
            log = store.log("t", partition)
            assert log.next_offset >= start[partition], "records before the last cycle vanished"
            for record in log.scan(start[partition]):
                tag, seq, body = record.value.split(b" ", 2)
                tag = tag.decode()
                assert tag in expected, f"foreign record {record.value[:60]!r}"
                part, _, _, binary = expected[tag]
                assert part == partition, f"{tag} record in partition {partition}"
                assert body == payload(int(seq), binary), f"torn record {record.value[:60]!r}"
                seen[tag].append(int(seq))
            ends.append(log.next_offset)
    for tag, (_, acked, tried, _) in expected.items():
        seqs = seen[tag]
        # exactly once and in order: 0, 1, 2, ... with no gap and no repeat
        assert seqs == list(range(len(seqs))), f"{tag}: out of order, repeated or missing"
        assert len(seqs) >= acked + 1, f"{tag}: lost acknowledged records {len(seqs)}..{acked}"
        assert len(seqs) <= tried + 1, f"{tag}: records that were never written"
    return ends


def logfs_check(data) -> None:
    done = subprocess.run([*LOGFS, "check", str(data)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("acks", ["1", "0"], ids=["default", "buffered"])
def test_sigkill_under_concurrent_writers(tmp_path, acks):
    """The default mode (acks=1): every returned write() survives. The
    buffered mode (acks=0): every write() before a returned fsync() survives,
    and what else survives is still each writer's records in order, once,
    whole (all its writers fsync now and then)."""
    buffered = acks == "0"
    rng = random.Random(int(os.environ.get("LOGFS_STRESS_SEED", "6")))
    cycles = scale(6, 100)
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    # small segments and indexes so that kills land in rolls and index writes too
    options = ["partitions=2", "segment.bytes=262144", "index.interval.bytes=1024", f"acks={acks}"]
    expected: dict[str, tuple[int, int, int, bool]] = {}
    everything: dict[str, tuple[int, int, int, bool]] = {}
    acked_total = 0
    ends = [0] * PARTITIONS
    for cycle in range(cycles + 1):
        daemon = Daemon(data, mountpoint, *options, log=tmp_path / "daemon.log").start()
        try:
            if cycle == 0:
                os.mkdir(mountpoint / "t")
            logfs_check(data)
            ends = verify(data, expected, ends)
            expected = {}
            if cycle == cycles:
                break
            writers = []
            for w in range(WRITERS):
                tag, binary = f"w{w}c{cycle}", w == 3
                acks_file = tmp_path / f"{tag}.acks"
                target = (
                    mountpoint / "t" / str(w % PARTITIONS) / ("append.bin" if binary else "append")
                )
                syncs = "1" if w == 0 or buffered else "0"
                args = [str(target), tag, str(acks_file), "1" if binary else "0", syncs]
                proc = subprocess.Popen(
                    [sys.executable, "-c", WRITER, *args, str(rng.random())[2:]]
                )
                writers.append((tag, w, binary, acks_file, proc))
            time.sleep(rng.uniform(0.3, 2.0))
            daemon.kill()
            for tag, w, binary, acks_file, proc in writers:
                assert proc.wait(timeout=60) == 0
                acked, tried = acks_of(acks_file, "synced" if buffered else "ok")
                expected[tag] = everything[tag] = (w % PARTITIONS, acked, tried, binary)
                acked_total += acked + 1
        finally:
            daemon.stop()
        assert mount_type(mountpoint) is None
    assert mount_type(mountpoint) is None
    total = sum(verify(data, everything, [0] * PARTITIONS))  # everything, once more
    in_flight_kept = total - acked_total
    assert acked_total > cycles * (10 if buffered else 100)
    report(
        "crash (buffered)" if buffered else "crash",
        cycles=cycles,
        sigkills=cycles,
        writer_processes=cycles * WRITERS,
        acknowledged_records=acked_total,
        in_flight_records_kept=in_flight_kept,
        records_checked=total,
        lost=0,
        duplicated=0,
        torn=0,
    )


FAST_WRITER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
line, n = b"x" * 3000 + b"\n", 0
try:
    while True:
        os.write(fd, line)
        n += 1
        if n % 500 == 0:
            os.fsync(fd)
except OSError:
    pass  # the daemon is gone: ENOTCONN
"""


def test_a_killed_buffered_daemon_leaves_no_writer_waiting(tmp_path):
    """kill -9 of a buffered daemon (acks=0) while the kernel writes back what
    its writers wrote: the daemon's process ends (none of its threads waits on
    its own mount, which nothing would answer any more), so the kernel ends the
    connection and the writers get an error instead of waiting in D state for
    good."""
    rng = random.Random(11)
    for cycle in range(scale(8, 40)):
        data, mountpoint = tmp_path / f"data{cycle}", tmp_path / f"mnt{cycle}"
        mountpoint.mkdir()
        daemon = Daemon(data, mountpoint, "acks=0", log=tmp_path / "daemon.log").start()
        device = os.stat(mountpoint).st_dev
        writers = []
        try:
            (mountpoint / "t").mkdir()
            for _ in range(2):
                target = str(mountpoint / "t" / "0" / "append")
                writers.append(subprocess.Popen([sys.executable, "-c", FAST_WRITER, target]))
            time.sleep(rng.uniform(1.0, 3.0))  # write-backs every second (buffered.py)
            daemon.proc.kill()
            try:
                daemon.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pytest.fail(f"cycle {cycle}: the killed daemon did not end: a thread waits on FUSE")
            for writer in writers:
                try:
                    writer.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"cycle {cycle}: a writer still waits on the dead mount")
        finally:
            if any(w.poll() is None for w in writers) or daemon.proc.poll() is None:
                abort_connection(device)  # free what waits, then clean up as usual
            for writer in writers:
                if writer.poll() is None:
                    writer.kill()
                    writer.wait(timeout=30)
            daemon.stop()
