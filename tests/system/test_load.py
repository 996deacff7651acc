"""Load: writer and reader processes for a sustained period.

Writers append tagged, numbered lines (two on partition 0, one on partition
1, one through the topic's ``append``); readers open random ``offset/<n>``
files, read ``stream`` from start to end and resolve ``time/<ms>`` links.
Meanwhile the test times ``ls`` of the mount root (must answer within a
second) and samples the daemon's RSS from /proc (must stay bounded). At the
end every writer's records are all there, once, in order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from mount_helpers import Daemon
from stress import report, scale

from logfs import Store

DURATION = scale(20, 300)
pytestmark = [pytest.mark.mount, pytest.mark.timeout(DURATION + 240)]

WRITER = r"""
import os, sys, time
path, tag, until = sys.argv[1], sys.argv[2], float(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
seq = 0
while time.time() < until:
    os.write(fd, b"".join(b"%s %d\n" % (tag.encode(), seq + i) for i in range(50)))
    seq += 50
    time.sleep(0.002)
print(seq)
"""

READER = r"""
import os, random, sys, time
mnt, until = sys.argv[1], float(sys.argv[2])
rng, reads = random.Random(), 0
while time.time() < until:
    p = rng.choice("01")
    state = open(f"{mnt}/t/{p}/state").read()
    end = int(state.split('"next_offset": ')[1].split(",")[0])
    if end:
        with open(f"{mnt}/t/{p}/offset/{rng.randrange(end)}", "rb") as f:
            assert b" " in f.read()
    if rng.random() < 0.02:
        with open(f"{mnt}/t/{p}/stream", "rb") as f:
            while f.read(1 << 20):
                pass
    if end and rng.random() < 0.2:
        assert os.readlink(f"{mnt}/t/{p}/time/0") == "../offset/0"  # every record is newer
        try:  # a partition may have had no append in the last second: ENOENT is right then
            os.readlink(f"{mnt}/t/{p}/time/{int(time.time() * 1000) - 1000}")
        except FileNotFoundError:
            pass
    reads += 1
print(reads)
"""


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_sustained_load(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "partitions=2", "segment.bytes=4194304") as daemon:
        os.mkdir(mnt / "t")
        until = time.time() + DURATION
        targets = [
            ("w0", "t/0/append"),
            ("w1", "t/0/append"),
            ("w2", "t/1/append"),
            ("wt", "t/append"),
        ]
        writers = {
            tag: subprocess.Popen(
                [sys.executable, "-c", WRITER, str(mnt / path), tag, str(until)],
                stdout=subprocess.PIPE,
            )
            for tag, path in targets
        }
        readers = [
            subprocess.Popen(
                [sys.executable, "-c", READER, str(mnt), str(until)], stdout=subprocess.PIPE
            )
            for _ in range(3)
        ]
        ls_times, rss = [], []
        try:
            while time.time() < until:
                start = time.monotonic()
                done = subprocess.run(["ls", str(mnt)], capture_output=True, timeout=10)
                ls_times.append(time.monotonic() - start)
                assert done.returncode == 0
                rss.append(rss_kib(daemon.pid))
                time.sleep(0.5)
            outputs = {p: p.communicate(timeout=60)[0] for p in [*writers.values(), *readers]}
        finally:  # our own processes only, also when something above failed
            for p in [*writers.values(), *readers]:
                if p.poll() is None:
                    p.kill()
                p.communicate()
        assert all(p.returncode == 0 for p in [*writers.values(), *readers])
        sent = {tag: int(outputs[p]) for tag, p in writers.items()}
        reads = sum(int(outputs[p]) for p in readers)
    assert max(ls_times) < 1.0, f"ls took {max(ls_times):.2f} s under load"
    # bounded: the second half of the run does not keep growing past the first
    half = len(rss) // 2
    assert max(rss[half:]) < max(rss[:half]) * 1.5 + 50_000, rss
    seen: dict[str, list[int]] = {tag: [] for tag in sent}
    with Store(data, read_only=True) as store:
        for p in (0, 1):
            for record in store.log("t", p).scan():
                tag, seq = record.value.split(b" ")
                seen[tag.decode()].append(int(seq))
    for tag, count in sent.items():
        assert sorted(seen[tag]) == list(range(count)), tag
        if tag != "wt":  # the topic-level writer's records spread over both partitions
            assert seen[tag] == list(range(count)), tag
    report(
        "load",
        seconds=DURATION,
        writer_processes=len(writers),
        reader_processes=len(readers),
        records_written=sum(sent.values()),
        reads=reads,
        max_ls_ms=round(max(ls_times) * 1000),
        max_daemon_rss_mib=round(max(rss) / 1024),
        lost=0,
    )
