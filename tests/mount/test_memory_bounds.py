"""Memory the mount holds per open file and per request stays bounded
(docs/mount.md, "Limits"): partial lines, ``keys/`` and ``config`` write
buffers, stream read-ahead, cached records, and the log of rejected requests.

The mount tests run a real daemon and read its RSS from /proc; each checks
the errno, that the daemon is alive, and that a control topic is unchanged.
Counts are scaled down from the hostile cases they stand for; each bound is
chosen so that the memory held before these bounds existed would exceed it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import time

import pytest
from mount_helpers import Daemon, sh

from logfs import Store
from logfs.core.config import TopicConfig
from logfs.core.errors import FileTooLargeError, TooLargeError
from logfs.core.format import Record
from logfs.core.log import Log
from logfs.mount import errnos
from logfs.mount.files.framing import LineFramer, frame
from logfs.mount.files.generated import CONFIG_MAX_BYTES, READ_AHEAD_REQUEST, ReadAhead
from logfs.mount.files.memory import Pool, RecordCache, record_cost

MB = 1 << 20
CONTROL = [b"control %d" % i for i in range(100)]


def status(pid: int, field: str) -> int:
    """A VmRSS/VmHWM figure of ``pid`` in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


@pytest.fixture
def mnt(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    with Daemon(data, mountpoint, "partitions=1") as daemon:
        os.mkdir(mountpoint / "control")
        (mountpoint / "control" / "0" / "append").write_bytes(b"".join(v + b"\n" for v in CONTROL))
        os.mkdir(mountpoint / "t")
        daemon.t = mountpoint / "t"
        daemon.rss = lambda: status(daemon.pid, "VmRSS")
        daemon.base = daemon.rss()
        yield daemon
        assert daemon.proc.poll() is None, "the daemon died"
        stream = (mountpoint / "control" / "0" / "stream").read_bytes()
        assert stream.split(b"\n")[:-1] == CONTROL


def errno_of(call) -> int:
    with pytest.raises(OSError) as e:
        call()
    return e.value.errno


# ---------------------------------------------------------------- partial lines


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_partial_lines_are_capped_per_descriptor(mnt):
    """200 descriptors each sending 1 MB without a newline (uncapped: +200 MB):
    each is refused at max.message.bytes, nothing is held or appended, and
    the descriptors' later whole lines are appended."""
    (mnt.t / "config").write_text("max.message.bytes=65536\n")
    fds = [os.open(mnt.t / "0" / "append", os.O_WRONLY) for _ in range(200)]
    chunk = b"x" * (128 << 10)
    try:
        for fd in fds:
            os.write(fd, chunk[:1000])  # a partial line under the cap is held
            codes = {errno_of(lambda fd=fd: os.write(fd, chunk)) for _ in range(8)}
            assert codes == {errno.EMSGSIZE}
        assert mnt.rss() - mnt.base < 200 * 65536 + 64 * MB
        for fd in fds:
            os.write(fd, b"\nwhole\n")  # ends the dropped line; the next one is a record
    finally:
        for fd in fds:
            os.close(fd)
    stream = (mnt.t / "0" / "stream").read_bytes()
    assert stream == b"whole\n" * 200
    bin_fd = os.open(mnt.t / "0" / "append.bin", os.O_WRONLY)
    try:  # a frame's length over the cap is refused from its first 4 bytes
        assert errno_of(lambda: os.write(bin_fd, (1 << 30).to_bytes(4, "big"))) == errno.EMSGSIZE
        os.write(bin_fd, frame(b"framed"))
    finally:
        os.close(bin_fd)
    batches = os.open(mnt.t / "0" / "append.batches", os.O_WRONLY)
    try:  # so is a batch's: base offset, then a length of 1 GB
        header = bytes(8) + (1 << 30).to_bytes(4, "big") + bytes(4) + b"\x02"
        assert errno_of(lambda: os.write(batches, header)) == errno.EINVAL
    finally:
        os.close(batches)
    assert (mnt.t / "0" / "stream").read_bytes() == b"whole\n" * 200 + b"framed\n"


def test_line_framer_holds_at_most_max_bytes():
    framer = LineFramer(max_bytes=100)
    framed, tail = framer.feed(b"a\n" + b"x" * 100)
    assert framed.values == [b"a"] and len(tail) == 100
    framer.pending = tail
    with pytest.raises(TooLargeError):
        framer.feed(b"y")
    # that line can never be a record: what was held is let go, not grown
    assert framer.pending == b"" and framer.discarding


# ---------------------------------------------------------------- keys/ and config


@pytest.fixture
def kv(mnt):
    os.mkdir(mnt.mountpoint / "kv")
    (mnt.mountpoint / "kv" / "config").write_text("cleanup.policy=compact\n")
    mnt.keys = mnt.mountpoint / "kv" / "keys"
    return mnt


def next_offset(daemon, topic="kv") -> int:
    state = json.loads((daemon.mountpoint / topic / "0" / "state").read_text())
    return state["next_offset"]


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_key_writes_and_truncates_are_capped(kv):
    """``truncate -s 4G keys/k`` (was: 21 GB, then a traceback) and a write
    past max.message.bytes are EFBIG at once. As in a regular file system,
    the key they created (or opened with O_TRUNC) is left empty."""
    env = {**os.environ, "K": str(kv.keys)}
    started = time.monotonic()
    done = sh('truncate -s 4G "$K/k"', env=env, check=False)
    assert done.returncode != 0 and "File too large" in done.stderr
    done = sh('dd if=/dev/zero of="$K/k" bs=1M count=2 status=none', env=env, check=False)
    assert done.returncode != 0 and "File too large" in done.stderr
    sh('echo small > "$K/j"', env=env)
    assert errno_of(lambda: os.truncate(kv.keys / "j", 4 << 30)) == errno.EFBIG
    assert time.monotonic() - started < 10
    assert status(kv.pid, "VmHWM") - kv.base < 64 * MB
    assert (kv.keys / "j").read_bytes() == b"small\n"
    assert (kv.keys / "k").read_bytes() == b""
    assert next_offset(kv) == 3  # k created empty, k truncated by dd, j


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_config_writes_are_capped_and_parsed_once(kv):
    """A 400 MB config write (was: 88 s, 1.47 GB) is EFBIG after a few KB;
    the configuration is unchanged; a bad line still fails its write()."""
    env = {**os.environ, "C": str(kv.mountpoint / "t" / "config")}
    before = (kv.t / "config").read_text()
    started = time.monotonic()
    done = sh('yes retention.ms=1000 | head -c 400M > "$C"', env=env, check=False)
    assert "File too large" in done.stderr and "Invalid argument" not in done.stderr
    assert time.monotonic() - started < 20
    assert status(kv.pid, "VmHWM") - kv.base < 64 * MB
    assert (kv.t / "config").read_text() == before
    done = sh('echo no.such.key=1 >> "$C"', env=env, check=False)
    assert "Invalid argument" in done.stderr
    sh('echo retention.ms=1000 >> "$C"', env=env)
    assert "retention.ms=1000\n" in (kv.t / "config").read_text()


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_one_key_record_per_completed_write(kv):
    """bash's ``echo v > keys/k`` closes a duplicate of the descriptor before
    writing: one record, not ``""`` and ``v``; a truncation alone is one
    record at the last close."""
    env = {**os.environ, "K": str(kv.keys)}
    sh('echo v > "$K/k"', env=env)
    assert next_offset(kv) == 1
    assert (kv.keys / "k").read_bytes() == b"v\n"
    sh('exec 3> "$K/k"; exec 4>&3; echo w >&4; exec 4>&-; exec 3>&-', env=env)
    assert next_offset(kv) == 2
    assert (kv.keys / "k").read_bytes() == b"w\n"
    sh(': > "$K/k"', env=env)
    assert next_offset(kv) == 3
    assert (kv.keys / "k").read_bytes() == b""


# ---------------------------------------------------------------- stream read-ahead


@pytest.mark.mount
@pytest.mark.timeout(180)
def test_stream_readers_share_a_capped_read_ahead(mnt):
    """40 readers each 8 MB into a 24 MB stream, all kept open (was: an
    8 MB buffer each, 320 MB): the read-ahead beyond each request is shared
    and capped per mount."""
    line = b"r" * 1023 + b"\n"
    sh(f'yes "{"r" * 1023}" | head -c {24 * MB} > "{mnt.t}/0/append"')
    stream = mnt.t / "0" / "stream"
    fds = [os.open(stream, os.O_RDONLY) for _ in range(40)]
    try:
        base = mnt.rss()
        for position in range(0, 8 * MB, 128 << 10):
            for fd in fds:
                assert os.pread(fd, 128 << 10, position)[:1024] == line
        held = mnt.rss() - base
        assert held < 64 * MB + 40 * (READ_AHEAD_REQUEST + 1024) + 64 * MB, held
    finally:
        for fd in fds:
            os.close(fd)


def test_read_ahead_takes_from_the_pool_and_gives_back(tmp_path):
    log = Log(tmp_path / "t-0", "t", 0, TopicConfig())
    log.append([b"v%06d" % i + b"z" * 1000 for i in range(4000)])
    pool = Pool(2 * MB)
    readers = [ReadAhead(None, pool) for _ in range(3)]
    for reader in readers:
        reader.read(log, 0, 4096)
    assert pool.used <= pool.capacity
    assert readers[2].held == 0  # the pool was spent: sized to the request
    whole = log.stream.size()
    for reader in readers:
        got, position = 0, 0
        while position < whole:
            got += len(reader.read(log, position, 128 << 10))
            position = got
        assert got == whole
    assert pool.used == 0  # all read: given back
    log.close()


# ---------------------------------------------------------------- cached records


@pytest.mark.mount
@pytest.mark.timeout(180)
def test_stat_of_many_offset_files_is_bounded(mnt):
    """stat of 200 offset/<n> with 1 MB values, the kernel holding every
    inode (was: +200 MB): the records are in an LRU of 64 MB."""
    value = b"v" * 1_000_000
    fd = os.open(mnt.t / "0" / "append.bin", os.O_WRONLY)
    try:
        for _ in range(200):
            os.write(fd, frame(value))
    finally:
        os.close(fd)
    base = mnt.rss()
    offsets = mnt.t / "0" / "offset"
    sizes = [os.stat(offsets / str(n)).st_size for n in range(200)]
    assert sizes == [len(value)] * 200
    assert mnt.rss() - base < 64 * MB + 48 * MB
    assert (offsets / "7").read_bytes() == value  # dropped from the cache: read again
    assert os.getxattr(offsets / "199", "user.logfs.offset") == b"199"


def test_record_cache_drops_the_least_recently_used():
    def record(n, size):
        return Record(n, 0, None, b"x" * size)

    cache = RecordCache(capacity=3 * record_cost(record(0, 1000)))
    for n in range(3):
        cache.put(n, record(n, 1000))
    assert cache.get(0) is not None  # 0 is now the most recent
    cache.put(3, record(3, 1000))
    assert cache.get(1) is None and cache.get(0) is not None
    assert cache.size <= cache.capacity and len(cache) == 3
    cache.put(4, record(4, 10_000))  # larger than the cache: not kept
    assert cache.get(4) is None and len(cache) == 3


# ---------------------------------------------------------------- rejected requests


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_rejected_requests_are_logged_at_a_bounded_rate(mnt):
    """2,000 rejected batches (was: 2.7 MB of log for 20 k) log a few lines,
    the last saying how many were suppressed."""
    before = mnt.log.stat().st_size
    started = time.monotonic()
    bad = bytes(8) + (100).to_bytes(4, "big") + bytes(4) + b"\x07" + bytes(100)
    fd = os.open(mnt.t / "0" / "append.batches", os.O_WRONLY)
    try:
        for _ in range(2000):
            assert errno_of(lambda: os.write(fd, bad)) == errno.EINVAL
    finally:
        os.close(fd)
    elapsed = time.monotonic() - started
    time.sleep(1.1)  # let a token come back for the count
    os.close(os.open(mnt.t / "0" / "append.batches", os.O_WRONLY))
    fd = os.open(mnt.t / "0" / "append.batches", os.O_WRONLY)
    try:
        assert errno_of(lambda: os.write(fd, bad)) == errno.EINVAL
    finally:
        os.close(fd)
    text = mnt.log.read_bytes()[before:].decode(errors="replace")
    refused = [line for line in text.splitlines() if "refused a batch" in line]
    assert 1 <= len(refused) <= 10 + elapsed + 3
    assert "similar messages suppressed" in refused[-1]
    assert len(text) < 64 << 10


def test_rate_limit_counts_what_it_suppressed(caplog, monkeypatch):
    limit = errnos.RateLimit(per_second=0.001, burst=2)
    with caplog.at_level(logging.WARNING, logger=errnos.logger.name):
        for n in range(50):
            errnos.log_rejected(logging.WARNING, "bad %d", n, limit=limit)
        limit.tokens = 1.0  # as if time passed
        errnos.log_rejected(logging.WARNING, "bad %d", 50, limit=limit)
    assert [r.getMessage() for r in caplog.records] == [
        "bad 0",
        "bad 1",
        "bad 50 (48 similar messages suppressed)",
    ]


def test_key_and_config_caps_called_directly(tmp_path):
    import trio

    from logfs.groups import Coordinator
    from logfs.mount.files import ConfigFile, KeyFile
    from logfs.mount.tree import Root, View

    store = Store(tmp_path / "data")
    store.create_topic("kv", 1, {"cleanup.policy": "compact", "max.message.bytes": "1000"})
    view = View(store, Root(()), Coordinator(store))
    key = KeyFile(view, b"k", ("kv", "keys", "k"), b"", writing=True)
    with pytest.raises(FileTooLargeError):
        key.truncate(4 << 30)
    with pytest.raises(FileTooLargeError):
        trio.run(key.write, 10**9, b"x")
    assert len(key.buffer) == 0
    config = ConfigFile(view, "kv", merge=True)
    trio.run(config.write, 0, b"retention.ms=5\n")
    trio.run(config.flush)
    assert store.topic_overrides("kv")["retention.ms"] == "5"
    config = ConfigFile(view, "kv", merge=True)
    trio.run(config.write, 0, b"retention.ms=6\n")
    with pytest.raises(FileTooLargeError):
        trio.run(config.write, 0, b"#" * CONFIG_MAX_BYTES)
    with pytest.raises(FileTooLargeError):  # cut off: none of it applies
        trio.run(config.flush)
    assert store.topic_overrides("kv")["retention.ms"] == "5"
    store.close()
