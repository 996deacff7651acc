"""``from/<n>``: a partition's records from offset n on, through a real
mount, against ``stream`` and the store."""

from __future__ import annotations

import errno
import os
import random
import subprocess

import pytest
from mount_helpers import Daemon, sh
from waiting import holds_open, wait_for

from logfs import Store

pytestmark = [pytest.mark.mount, pytest.mark.timeout(180)]


@pytest.fixture
def mnt(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    options = ("segment.bytes=8192", "log.retention.check.interval.ms=100")
    with Daemon(data, mountpoint, *options) as daemon:
        yield daemon


def fill(mountpoint, topic: str, config: str, count: int) -> list[bytes]:
    """``count`` lines in writes of 1 to 40 lines (multi-record batches)."""
    (mountpoint / topic).mkdir()
    if config:
        with open(mountpoint / topic / "config", "a") as f:
            f.write(config)
    rng = random.Random(7)
    values, i = [], 0
    with open(mountpoint / topic / "0" / "append", "ab") as append:
        while i < count:
            n = min(rng.randrange(1, 40), count - i)
            chunk = [
                b"%s-%d-" % (topic.encode(), j) + b"x" * rng.randrange(60) for j in range(i, i + n)
            ]
            append.write(b"".join(v + b"\n" for v in chunk))
            append.flush()
            values += chunk
            i += n
    return values


@pytest.mark.parametrize("topic, config", [("plain", ""), ("zipped", "compression.type=gzip\n")])
def test_from_n_is_the_stream_without_the_records_before_n(mnt, topic, config):
    values = fill(mnt.mountpoint, topic, config, 1500)
    part = mnt.mountpoint / topic / "0"
    stream = (part / "stream").read_bytes()
    assert stream == b"".join(v + b"\n" for v in values)
    with Store(mnt.data, read_only=True) as store:
        batches = [h for h, _ in store.log(topic, 0).batches()]
    assert any(h.records_count > 1 for h in batches) and len(batches) > 40
    starts = {h.base_offset for h in batches}
    inside = [o for o in range(1, 1500) if o not in starts]  # mid-batch offsets
    for n in [0, 1, 1499, 1500, *random.Random(1).sample(inside, 25), *sorted(starts)[::9]]:
        got = (part / "from" / str(n)).read_bytes()
        assert got == b"".join(v + b"\n" for v in values[n:]), n
        assert os.stat(part / "from" / str(n)).st_size == len(got)
    for missing in (1501, 10**9):
        with pytest.raises(FileNotFoundError):
            (part / "from" / str(missing)).read_bytes()


def test_shell_tools_and_tail_f_on_from(mnt, tmp_path):
    values = fill(mnt.mountpoint, "t", "", 600)
    part = mnt.mountpoint / "t" / "0"
    assert sh(f"wc -l < {part}/from/100").stdout.strip() == "500"
    assert (
        sh(f"head -n 2 {part}/from/100").stdout.encode()
        == values[100] + b"\n" + values[101] + b"\n"
    )
    assert sh(f"tail -n 1 {part}/from/100").stdout.encode() == values[-1] + b"\n"
    assert sh(f"grep -c '^t-4[0-9][0-9]-' {part}/from/450").stdout.strip() == "50"
    assert (part / "from" / "600").read_bytes() == b""  # the log end: empty, and growing
    out = tmp_path / "tail.out"
    with open(out, "wb") as sink:
        tail = subprocess.Popen(["tail", "-f", str(part / "from" / "600")], stdout=sink)
    try:
        # appended once tail follows the file, not before it opened it
        wait_for(lambda: holds_open(tail.pid, part / "from" / "600"), "tail -f opening from/600")
        with open(part / "append", "ab") as append:
            append.write(b"new-1\nnew-2\n")
        # about a second: GNU tail polls fstat
        wait_for(lambda: out.read_bytes() == b"new-1\nnew-2\n", "tail -f printing", timeout=3)
    finally:
        tail.kill()
        tail.wait()


def test_from_after_retention_moved_the_log_start(mnt):
    values = fill(mnt.mountpoint, "r", "", 2000)
    part = mnt.mountpoint / "r" / "0"
    with open(mnt.mountpoint / "r" / "config", "a") as f:
        f.write("retention.bytes=20000\n")
    start = wait_for(
        lambda: int(sh(f"grep -o '\"log_start_offset\": [0-9]*' {part}/state").stdout.split()[-1]),
        "retention moving the log start",
    )
    with pytest.raises(OSError) as e:
        (part / "from" / str(start - 1)).read_bytes()  # deleted by retention
    assert e.value.errno == errno.ENOENT
    assert (part / "from" / str(start)).read_bytes() == b"".join(v + b"\n" for v in values[start:])
    assert (part / "from" / str(start + 7)).read_bytes() == b"".join(
        v + b"\n" for v in values[start + 7 :]
    )
