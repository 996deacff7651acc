"""Compacted topics through a real mount: the daemon's background cleaner,
readers across the gaps it leaves, and `logfs compact` beside a mount."""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import time

import pytest
from compacted import latest
from mount_helpers import LOGFS, Daemon
from stress import scale

from logfs import Store
from logfs.core.log.store import CLEANER_FILE
from logfs.core.tools.offline import check

pytestmark = [pytest.mark.mount, pytest.mark.timeout(120)]


def test_the_daemon_cleans_in_the_background_and_readers_skip_the_gaps(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "log.cleaner.backoff.ms=100") as daemon:
        (mnt / "c").mkdir()
        with open(mnt / "c" / "config", "a") as config:
            config.write("cleanup.policy=compact\nparse.key=true\nsegment.bytes=2048\n")
        no_key = open(mnt / "c" / "0" / "append", "a")  # noqa: SIM115
        with pytest.raises(OSError) as e, no_key:  # no key on a compacted topic
            no_key.write("no separator, no key\n")
        assert e.value.errno == errno.EINVAL
        lines = [f"k{i % 5}\tv{i}" for i in range(300)]
        with open(mnt / "c" / "0" / "append", "a") as append:
            for i in range(0, 300, 10):  # a batch per write(): segments roll
                append.write("".join(line + "\n" for line in lines[i : i + 10]))
                append.flush()
            os.fsync(append.fileno())
        deadline = time.monotonic() + 20
        while "cleaned c-0" not in daemon.output():
            assert time.monotonic() < deadline, daemon.output()
            time.sleep(0.1)
        state = json.loads((mnt / "c" / "0" / "state").read_text())
        assert state["next_offset"] == 300 and state["log_start_offset"] == 0
        with Store(data, read_only=True) as store:  # what is on disk now
            survivors = [(r.offset, r.value) for r in store.log("c", 0).scan()]
        assert len(survivors) < 300
        assert [offset for offset, _ in survivors[-5:]] == list(range(295, 300))
        stream = (mnt / "c" / "0" / "stream").read_bytes().split(b"\n")[:-1]
        assert stream == [value for _, value in survivors]  # the gaps are skipped
        kept = {offset for offset, _ in survivors}
        for offset in (0, 1, 150, 296):
            path = mnt / "c" / "0" / "offset" / str(offset)
            if offset in kept:
                assert path.read_bytes() == b"v%d" % offset
            else:
                with pytest.raises(FileNotFoundError):  # cleaned away: ENOENT
                    path.read_bytes()
        busy = subprocess.run([*LOGFS, "compact", str(data)], capture_output=True, text=True)
        assert busy.returncode == 1 and "in use" in busy.stderr
    assert check(data) == []
    first_dirty = (data / CLEANER_FILE).read_text().split("\n")[2]
    assert first_dirty.startswith("c 0 ") and int(first_dirty.split()[2]) > 0


def test_sigkill_of_the_daemon_while_it_cleans(tmp_path):
    """The daemon cleans (throttled, so a cleaning takes seconds) and is
    SIGKILLed at a random moment, round after round, with more appends
    between: after each recovery every key has its latest value and no
    deleted key is back."""
    rng = random.Random(int(os.environ.get("LOGFS_STRESS_SEED", "4")))
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    model: dict[bytes, bytes] = {}
    with Store(data) as store:
        store.create_topic(
            "c",
            1,
            {"cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0"},
        )
    killed = shrunk = appended = 0
    for round_ in range(scale(4, 25)):
        with Store(data) as store:  # more dirt: new values and tombstones
            log = store.log("c", 0)
            for i in range(150):
                key = b"k%d" % rng.randrange(30)
                value = None if rng.random() < 0.1 else b"r%d-%d" % (round_, i)
                log.append([value], keys=[key])
                appended += 1
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
        daemon = Daemon(
            data, mnt, "log.cleaner.backoff.ms=10", "log.cleaner.io.max.bytes.per.second=20000"
        ).start()
        try:
            time.sleep(rng.uniform(0.05, 3.0))
            if daemon.proc.poll() is None:
                daemon.kill()
                killed += 1
        finally:
            daemon.stop()
        with Store(data) as store:  # recovery, including of an interrupted cleaning
            log = store.log("c", 0)
            assert latest(log) == model, f"round {round_}"
            shrunk += len(list(log.scan())) < appended  # some cleaning was committed
        assert check(data) == []
    assert killed and shrunk
