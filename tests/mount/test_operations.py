"""The mount's Operations called directly: no kernel, a real Store underneath.

Each test drives the handlers the way the kernel would (lookup, open, write,
flush, release, ...) and most end with `check`, the offline consistency check
of the data directory.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import types

import pyfuse3
import pytest
import trio

from logfs import Store
from logfs.core.format.record import encode_batch
from logfs.core.log.partitioner import partition_for_key
from logfs.core.tools.offline import check
from logfs.mount import Operations
from logfs.mount.errnos import errno_for
from logfs.mount.files.framing import frame
from logfs.mount.tree.directories import OFFSET_LISTING


class FS:
    """Synchronous access to an Operations instance by path."""

    def __init__(self, store: Store, **kwargs) -> None:
        self.store = store
        self.ops = Operations(store, **kwargs)

    def call(self, method, *args):
        return trio.run(getattr(self.ops, method), *args)

    def inode(self, path: str) -> int:
        inode = pyfuse3.ROOT_INODE
        for name in filter(None, path.split("/")):
            inode = self.call("lookup", inode, name.encode(), None).st_ino
        return inode

    def stat(self, path: str) -> pyfuse3.EntryAttributes:
        return self.call("getattr", self.inode(path), None)

    def open(self, path: str, flags: int = os.O_RDONLY) -> int:
        return self.call("open", self.inode(path), flags, None).fh

    def close(self, fh: int) -> None:
        try:
            self.call("flush", fh)
        finally:
            self.call("release", fh)

    def write(self, path: str, *chunks: bytes, flags: int = os.O_WRONLY | os.O_APPEND) -> None:
        fh = self.open(path, flags)
        try:
            for chunk in chunks:
                assert self.call("write", fh, 0, chunk) == len(chunk)
        finally:
            self.close(fh)

    def read(self, path: str, offset: int = 0, size: int = 1 << 20) -> bytes:
        fh = self.open(path)
        try:
            return self.call("read", fh, offset, size)
        finally:
            self.close(fh)

    def listdir(self, path: str, monkeypatch) -> list[str]:
        names = []

        def reply(token, name, attrs, next_id):
            names.append(os.fsdecode(name))
            return True

        monkeypatch.setattr(pyfuse3, "readdir_reply", reply)
        inode = self.inode(path)
        fh = self.call("opendir", inode, None)
        self.call("readdir", fh, 0, None)
        self.call("releasedir", fh)
        assert names[:2] == [".", ".."]  # every directory lists them first
        return names[2:]

    def values(self, topic: str, partition: int = 0) -> list[bytes]:
        return [r.value for r in self.store.log(topic, partition).scan()]


def errno_of(excinfo) -> int:
    return excinfo.value.errno


@pytest.fixture
def fs(tmp_path):
    store = Store(tmp_path / "data")
    fs = FS(store, partitions=2)
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"orders", 0o755, None)
    yield fs
    store.close()
    assert check(tmp_path / "data") == []


def fuse_error(code):
    return pytest.raises(pyfuse3.FUSEError, check=lambda e: e.errno == code)


# ---------------------------------------------------------------- the tree


def test_mkdir_makes_topics_and_partitions(fs):
    assert fs.store.topics() == {"orders": 2}
    assert fs.stat("orders").st_mode & 0o170000 == 0o040000
    fs.call("mkdir", fs.inode("orders"), b"2", 0o755, None)
    assert fs.store.topics() == {"orders": 3}
    with fuse_error(errno.EEXIST):
        fs.call("mkdir", fs.inode("orders"), b"1", 0o755, None)
    with fuse_error(errno.EEXIST):
        fs.call("mkdir", pyfuse3.ROOT_INODE, b"orders", 0o755, None)
    for bad in (b"bad name", b"a/b", b"x" * 250, b".."):
        with fuse_error(errno.EINVAL):
            fs.call("mkdir", pyfuse3.ROOT_INODE, bad, 0o755, None)
    with fuse_error(errno.EINVAL):
        fs.call("mkdir", fs.inode("orders"), b"two", 0o755, None)
    with fuse_error(errno.EPERM):
        fs.call("mkdir", fs.inode("orders/0"), b"x", 0o755, None)
    with fuse_error(errno.EEXIST):  # the mount's own file, not a topic's name here
        fs.call("mkdir", pyfuse3.ROOT_INODE, b".state", 0o755, None)
    assert fs.store.topics() == {"orders": 3}


def test_listing(fs, monkeypatch):
    assert fs.listdir("", monkeypatch) == [".state", "orders"]
    assert fs.listdir("orders", monkeypatch) == ["0", "1", "append", "append.bin", "config"]
    assert sorted(fs.listdir("orders/0", monkeypatch)) == sorted(
        ["append", "append.batches", "append.bin", "from", "offset", "segments", "state", "stream"]
        + ["time", "groups"]
    )
    fs.store.log("orders", 0).append([b"%d" % i for i in range(OFFSET_LISTING + 50)])
    listed = fs.listdir("orders/0/offset", monkeypatch)
    assert listed == [str(i) for i in range(50, OFFSET_LISTING + 50)]
    assert fs.listdir("orders/0/time", monkeypatch) == []
    assert fs.listdir("orders/0/segments", monkeypatch) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]


def test_unknown_names(fs):
    for path in ("nope", "orders/2", "orders/01", "orders/0/nope", "orders/0/offset/x"):
        with fuse_error(errno.ENOENT):
            fs.inode(path)


def test_rmdir_deletes_a_topic_and_its_inodes(fs):
    fs.write("orders/0/append", b"old\n")
    old = fs.inode("orders/0/offset/0")
    fs.call("rmdir", pyfuse3.ROOT_INODE, b"orders", None)
    assert fs.store.topics() == {}
    with fuse_error(errno.ENOENT):
        fs.call("getattr", old, None)
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"orders", 0o755, None)
    fs.write("orders/0/append", b"new!\n")
    assert fs.inode("orders/0/offset/0") != old
    assert fs.read("orders/0/offset/0") == b"new!"
    with fuse_error(errno.ENOENT):
        fs.call("rmdir", pyfuse3.ROOT_INODE, b"nope", None)
    with fuse_error(errno.EPERM):
        fs.call("rmdir", fs.inode("orders"), b"0", None)


def test_forget_drops_offset_inodes(fs):
    fs.store.log("orders", 0).append([b"v"] * 1000)
    fs.inode("orders/0/offset")
    before = len(fs.ops.inodes)
    inodes = [fs.inode(f"orders/0/offset/{n}") for n in range(1000)]
    assert len(fs.ops.inodes) == before + 1000
    fs.call("forget", [(inode, 1) for inode in inodes])
    assert len(fs.ops.inodes) == before


# ---------------------------------------------------------------- append framing


def test_lines_become_records_and_a_partial_line_on_close(fs):
    fs.write("orders/0/append", b"one\ntw", b"o\nthr", b"ee")
    assert fs.values("orders") == [b"one", b"two", b"three"]
    fs.write("orders/0/append", b"\n\nx\n")
    assert fs.values("orders")[3:] == [b"", b"", b"x"]


def test_each_write_is_one_append(fs, monkeypatch):
    calls = []
    log = fs.store.log("orders", 0)
    real = log.append
    monkeypatch.setattr(
        log, "append", lambda values, **kw: calls.append(list(values)) or real(values, **kw)
    )
    fs.write("orders/0/append", b"a\nb\nc\n", b"d\ne", b"f\n")
    assert calls == [[b"a", b"b", b"c"], [b"d"], [b"ef"]]


def test_concurrent_open_files_keep_their_own_partial_lines(fs):
    one = fs.open("orders/0/append", os.O_WRONLY)
    two = fs.open("orders/0/append", os.O_WRONLY)
    fs.call("write", one, 0, b"hel")
    fs.call("write", two, 0, b"wor")
    fs.call("write", one, 0, b"lo\n")
    fs.call("write", two, 0, b"ld\n")
    fs.close(one)
    fs.close(two)
    assert fs.values("orders") == [b"hello", b"world"]


def test_receipts_tell_a_writer_its_offsets(fs):
    fs.write("orders/0/append", b"a\nb\n")
    fh = fs.open("orders/0/append", os.O_RDWR)
    fs.call("write", fh, 0, b"c\nd\ne\n")
    fs.call("write", fh, 0, b"f\n")
    assert fs.call("read", fh, 0, 4096) == b"0 2 4\n0 5 5\n"
    assert fs.call("read", fh, 0, 4096) == b""
    fs.close(fh)
    write_only = fs.open("orders/0/append", os.O_WRONLY)
    fs.call("write", write_only, 0, b"g\n")
    assert fs.call("read", write_only, 0, 4096) == b""
    fs.close(write_only)


def test_keys_with_parse_key(fs):
    fs.write("orders/config", b"parse.key=true\nkey.separator=:\n")
    fs.write("orders/0/append", b"k1:v1\n:empty key\nk3:v:3\n")
    records = list(fs.store.log("orders", 0).scan())
    assert [(r.key, r.value) for r in records] == [
        (b"k1", b"v1"),
        (b"", b"empty key"),
        (b"k3", b"v:3"),
    ]
    fh = fs.open("orders/0/append", os.O_WRONLY)
    with fuse_error(errno.EINVAL):
        fs.call("write", fh, 0, b"k4:ok\nno separator\n")
    fs.close(fh)
    assert fs.store.log("orders", 0).next_offset == 3  # nothing of the bad write


def test_too_large_records_are_rejected_whole(fs):
    fs.write("orders/config", b"max.message.bytes=1000\n")
    fh = fs.open("orders/0/append", os.O_WRONLY)
    fs.call("write", fh, 0, b"keep")
    with fuse_error(errno.EMSGSIZE):
        fs.call("write", fh, 0, b"\nsmall\n" + b"x" * 2000 + b"\n")
    fs.call("write", fh, 0, b" me\n")
    assert fs.values("orders") == [b"keep me"]  # the rejected write() left nothing behind
    fs.call("write", fh, 0, b"held")
    with fuse_error(errno.EMSGSIZE):
        fs.call("write", fh, 0, b"y" * 2000)  # this line can never fit: all of it is dropped
    with fuse_error(errno.EMSGSIZE):
        fs.call("write", fh, 0, b"y" * 10)
    fs.call("write", fh, 0, b"y\nnext\n")
    fs.close(fh)
    assert fs.values("orders") == [b"keep me", b"next"]


def test_binary_frames(fs):
    values = [b"line\nbreaks\n", b"\x00\xff" * 100, b""]
    data = b"".join(frame(v) for v in values)
    fs.write("orders/0/append.bin", data[:3], data[3:20], data[20:])
    assert fs.values("orders") == values
    fh = fs.open("orders/0/append.bin", os.O_WRONLY)
    fs.call("write", fh, 0, frame(b"whole") + frame(b"torn")[:6])
    with fuse_error(errno.EINVAL):
        fs.call("flush", fh)
    fs.call("release", fh)
    assert fs.values("orders")[3:] == [b"whole"]
    fs.write("orders/config", b"max.message.bytes=100\n")
    fh = fs.open("orders/0/append.bin", os.O_WRONLY)
    with fuse_error(errno.EMSGSIZE):
        fs.call("write", fh, 0, frame(b"z" * 101))
    fs.close(fh)
    assert len(fs.values("orders")) == 4


def test_whole_batches(fs):
    """append.batches: batches split over writes or many per write, one
    receipt per write() that completed any; a bad batch fails its write()
    (EINVAL) and keeps what was held before it; closing inside one is EINVAL."""
    one, two, three = (encode_batch(0, [b"%d-%d" % (n, i) for i in range(n)]) for n in (1, 2, 3))
    fh = fs.open("orders/1/append.batches", os.O_RDWR)
    for chunk in (one[:5], one[5:20], one[20:] + two + three[:30]):
        assert fs.call("write", fh, 0, chunk) == len(chunk)
    assert fs.call("read", fh, 0, 4096) == b"1 0 2\n"  # one and two, in one write()
    bad = bytearray(two)
    bad[-1] ^= 1
    with fuse_error(errno.EINVAL):
        fs.call("write", fh, 0, three[30:] + bytes(bad))
    with fuse_error(errno.EINVAL):  # so is a header that cannot start a batch
        fs.call("write", fh, 0, three[30:] + bytes(12))
    fs.call("write", fh, 0, three[30:])  # the held start of `three` is still there
    assert fs.call("read", fh, 0, 4096) == b"1 3 5\n"
    fs.call("write", fh, 0, one[:-1])
    with fuse_error(errno.EINVAL):
        fs.call("flush", fh)
    fs.call("release", fh)
    assert fs.values("orders", 1) == [b"1-0", b"2-0", b"2-1", b"3-0", b"3-1", b"3-2"]
    fs.store.set_topic_config("orders", {"max.message.bytes": str(len(three) - 1)})
    with fuse_error(errno.EINVAL):  # too large: EINVAL here, not append's EMSGSIZE
        fs.write("orders/1/append.batches", three)
    with fuse_error(errno.ENOENT):  # partitions only
        fs.inode("orders/append.batches")
    assert fs.store.log("orders", 1).next_offset == 6


def test_topic_append_spreads_records(fs):
    fs.write("orders/config", b"parse.key=true\n")
    fs.write("orders/append", b"alpha\t1\nbeta\t2\ngamma\t3\n")
    for key, value in ((b"alpha", b"1"), (b"beta", b"2"), (b"gamma", b"3")):
        p = partition_for_key(key, 2)
        assert (key, value) in [(r.key, r.value) for r in fs.store.log("orders", p).scan()]
    fs.write("orders/config", b"parse.key=false\n")
    fh = fs.open("orders/append", os.O_RDWR)
    fs.call("write", fh, 0, b"u1\nu2\n")  # one write: one partition (sticky)
    fs.call("write", fh, 0, b"u3\n")
    receipts = fs.call("read", fh, 0, 100).decode().splitlines()
    fs.close(fh)
    (p1, first, last), (p2, _, _) = (map(int, r.split()) for r in receipts)
    assert last - first == 1 and p1 != p2
    assert [r.value for r in fs.store.log("orders", p1).scan(first)] == [b"u1", b"u2"]


def test_fsync_makes_a_partition_durable(fs):
    log = fs.store.log("orders", 0)
    fh = fs.open("orders/0/append", os.O_WRONLY)
    fs.call("write", fh, 0, b"a\nb\n")
    assert log.recovery_point < log.next_offset
    fs.call("fsync", fh, False)
    assert log.recovery_point == log.next_offset == 2
    assert log.unflushed_messages == 0
    fs.close(fh)


# ---------------------------------------------------------------- reading


def test_offset_files(fs):
    log = fs.store.log("orders", 1)
    log.append(
        [b"hello", b"", b"x" * 5000],
        keys=[b"k", None, None],
        headers=[[("h", b"v"), ("n", None)], [], []],
        timestamp=1234,
    )
    assert fs.read("orders/1/offset/0") == b"hello"
    assert fs.read("orders/1/offset/0", 1, 3) == b"ell"
    assert fs.stat("orders/1/offset/2").st_size == 5000
    assert fs.stat("orders/1/offset/1").st_size == 0
    assert fs.stat("orders/1/offset/0").st_mtime_ns == 1234 * 1_000_000
    inode = fs.inode("orders/1/offset/0")
    names = fs.call("listxattr", inode, None)
    assert set(names) >= {b"user.logfs.key", b"user.logfs.timestamp", b"user.logfs.headers"}
    assert fs.call("getxattr", inode, b"user.logfs.key", None) == b"k"
    assert fs.call("getxattr", inode, b"user.logfs.timestamp", None) == b"1234"
    assert fs.call("getxattr", inode, b"user.logfs.header.h", None) == b"v"
    assert json.loads(fs.call("getxattr", inode, b"user.logfs.headers", None)) == [
        ["h", "v"],
        ["n", None],
    ]
    with fuse_error(pyfuse3.ENOATTR):
        fs.call("getxattr", fs.inode("orders/1/offset/1"), b"user.logfs.key", None)
    with fuse_error(errno.ENOENT):
        fs.inode("orders/1/offset/3")


def test_offsets_before_the_log_start_are_gone(fs):
    fs.write("orders/config", b"segment.bytes=1024\nretention.bytes=0\n")
    log = fs.store.log("orders", 0)
    for i in range(20):
        log.append([b"%d" % i * 50])
    log.enforce_retention()
    assert log.log_start_offset > 0
    with fuse_error(errno.ENOENT):
        fs.inode("orders/0/offset/0")
    assert fs.read(f"orders/0/offset/{log.log_start_offset}")


def test_stream_reads_at_any_position(fs):
    log = fs.store.log("orders", 0)
    values = [b"r%d-" % i + b"x" * (i % 97) for i in range(3000)]
    for i in range(0, 3000, 100):
        log.append(values[i : i + 100])
    expected = b"".join(v + b"\n" for v in values)
    assert fs.stat("orders/0/stream").st_size == len(expected)
    assert fs.read("orders/0/stream", 0, len(expected) + 10) == expected
    fh = fs.open("orders/0/stream")
    got = b"".join(fs.call("read", fh, pos, 4096) for pos in range(0, len(expected), 4096))
    assert got == expected
    for pos in (0, 1, 65535, 65536, 100_000, len(expected) - 1, len(expected)):
        assert fs.call("read", fh, pos, 777) == expected[pos : pos + 777]
    log.append([b"more"])
    assert fs.call("read", fh, len(expected), 100) == b"more\n"
    fs.close(fh)
    assert fs.stat("orders/0/stream").st_size == len(expected) + 5


def test_time_files_link_to_offsets(fs):
    log = fs.store.log("orders", 0)
    log.append([b"a", b"b"], timestamp=[1000, 2000])
    link = fs.inode("orders/0/time/1500")
    assert fs.call("readlink", link, None) == b"../offset/1"
    assert fs.call("readlink", fs.inode("orders/0/time/0"), None) == b"../offset/0"
    with fuse_error(errno.ENOENT):
        fs.inode("orders/0/time/2001")


def test_segments_link_to_the_data_dir(fs):
    fs.write("orders/0/append", b"x\n")
    target = fs.call("readlink", fs.inode("orders/0/segments/00000000000000000000.log"), None)
    assert target == os.fsencode(fs.store.log("orders", 0).segments[0].log_path)
    assert os.path.isabs(target) and os.path.getsize(target) > 0


def test_state(fs):
    fs.write("orders/1/append", b"a\nb\n")
    state = json.loads(fs.read("orders/1/state"))
    assert (
        state["log_start_offset"] == 0 and state["next_offset"] == 2 and state["last_offset"] == 1
    )
    assert state["segments"] == 1 and state["size_bytes"] > 0
    assert state["unflushed_messages"] == 2
    assert fs.stat("orders/1/state").st_size == len(fs.read("orders/1/state"))


# ---------------------------------------------------------------- config


def test_config_reads_and_writes(fs):
    text = fs.read("orders/config").decode()
    assert "flush.ms=1000\n" in text and "retention.ms=604800000\n" in text
    fs.write("orders/config", b"retention.ms=1000\n")
    fs.write("orders/config", b"segment.bytes=100000\n")  # >> merges
    assert fs.store.topic_overrides("orders") == {"retention.ms": "1000", "segment.bytes": "100000"}
    fs.write("orders/config", b"segment.bytes=200000", flags=os.O_WRONLY)  # > replaces
    assert fs.store.topic_overrides("orders") == {"segment.bytes": "200000"}
    assert fs.store.log("orders", 0).config.segment_bytes == 200000
    # writing back the whole effective configuration pins nothing new
    fs.write("orders/config", fs.read("orders/config"), flags=os.O_WRONLY)
    assert fs.store.topic_overrides("orders") == {"segment.bytes": "200000"}


def test_bad_config_changes_nothing(fs):
    fs.write("orders/config", b"retention.ms=1000\n")
    for bad in (b"no.such.key=1\n", b"retention.ms=soon\n", b"garbage\n"):
        fh = fs.open("orders/config", os.O_WRONLY | os.O_APPEND)
        with fuse_error(errno.EINVAL):
            fs.call("write", fh, 0, b"segment.bytes=100000\n" + bad)
        fs.close(fh)
        assert fs.store.topic_overrides("orders") == {"retention.ms": "1000"}


# ---------------------------------------------------------------- metadata and refusals


def test_metadata_operations_are_harmless(fs):
    attrs = fs.stat("orders/0/append")
    assert attrs.st_blksize == 1 << 20 and attrs.st_size == 0
    fields = types.SimpleNamespace(
        update_mode=False, update_uid=False, update_gid=False, update_size=True,
        update_atime=True, update_mtime=True,
    )  # fmt: skip
    truncate = pyfuse3.EntryAttributes()
    truncate.st_size = 0
    fs.call("setattr", fs.inode("orders/0/append"), truncate, fields, None, None)
    fs.call("setattr", fs.inode("orders/config"), truncate, fields, None, None)
    fs.write("orders/0/append", b"x\n")
    with fuse_error(errno.EACCES):
        fs.call("setattr", fs.inode("orders/0/offset/0"), truncate, fields, None, None)
    chmod = types.SimpleNamespace(**{**vars(fields), "update_mode": True, "update_size": False})
    mode = pyfuse3.EntryAttributes()
    mode.st_mode = stat.S_IFREG | 0o600
    fs.call("setattr", fs.inode("orders/0/append"), mode, chmod, None, None)  # as root
    assert stat.S_IMODE(fs.stat("orders/0/append").st_mode) == 0o600  # remembered
    chown = types.SimpleNamespace(**{**vars(fields), "update_uid": True, "update_size": False})
    owner = pyfuse3.EntryAttributes()
    owner.st_uid = 1000
    someone = types.SimpleNamespace(uid=1000, gid=1000, pid=1, umask=0o022)
    with fuse_error(errno.EPERM):  # only root gives a file away
        fs.call("setattr", fs.inode("orders/0/append"), owner, chown, None, someone)
    fs.call("setattr", fs.inode("orders/0/append"), owner, chown, None, None)
    assert fs.stat("orders/0/append").st_uid == 1000
    assert fs.values("orders") == [b"x"]  # nothing on disk changed


def test_read_only_files_refuse_writes(fs):
    fs.write("orders/0/append", b"x\n")
    for path in ("orders/0/offset/0", "orders/0/stream", "orders/0/state"):
        with fuse_error(errno.EACCES):
            fs.open(path, os.O_WRONLY)
    with fuse_error(errno.EISDIR):
        fs.open("orders/0", os.O_RDONLY)
    parent = fs.inode("orders/0")
    for method, args in (
        ("unlink", (parent, b"append", None)),
        ("rename", (parent, b"append", parent, b"x", 0, None)),
        ("create", (parent, b"new", 0o644, os.O_WRONLY, None)),
        ("symlink", (parent, b"l", b"t", None)),
    ):
        with fuse_error(errno.EPERM):
            fs.call(method, *args)
    assert fs.values("orders") == [b"x"]


def test_read_only_store(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        store.log("t", 0).append([b"a"])
    store = Store(tmp_path / "data", read_only=True)
    fs = FS(store)
    assert fs.read("t/0/offset/0") == b"a"
    assert fs.stat("t/0/append").st_mode & 0o222 == 0
    with fuse_error(errno.EROFS):
        fs.open("t/0/append", os.O_WRONLY)
    with fuse_error(errno.EROFS):
        fs.call("mkdir", pyfuse3.ROOT_INODE, b"new", 0o755, None)
    store.close()


def test_errno_table_never_hangs_or_loops_callers():
    # every error of the table: tests/core/test_errors.py
    assert errno_for(InterruptedError(errno.EINTR, "x")) == errno.EIO
    assert errno_for(OSError(600, "x")) == errno.EIO
    assert errno_for(OSError(errno.ENOSPC, "x")) == errno.ENOSPC
    assert errno_for(KeyError("boom")) == errno.EIO


def test_unexpected_errors_become_eio(fs, monkeypatch):
    monkeypatch.setattr(fs.store, "topics", lambda: 1 / 0)
    with fuse_error(errno.EIO):  # a name the mount has not seen asks the store
        fs.call("lookup", pyfuse3.ROOT_INODE, b"unseen", None)


def test_close_files_keeps_partial_lines_at_unmount(fs):
    fh = fs.open("orders/0/append", os.O_WRONLY)
    fs.call("write", fh, 0, b"half a line")
    fs.ops.close_files()
    assert fs.values("orders") == [b"half a line"]


def test_the_mount_reaches_logs_only_through_their_methods():
    """No segment objects, segment lookups or segment stream counters in
    logfs/mount: `Log` answers what the mount needs (segment_files, and
    `Log.stream` for the stream's size, lines and counting)."""
    import ast
    from pathlib import Path

    import logfs.mount

    forbidden = {
        "segments",
        "segment_for",
        "active_segment",
        "LogSegment",
        "SegmentStream",
        "loaded",
    }
    found = []
    sources = sorted(Path(logfs.mount.__file__).parent.rglob("*.py"))
    assert len(sources) > 1, sources  # the package itself and its modules
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "attr", None) or getattr(node, "id", None)
            if isinstance(node, ast.alias):
                name = node.name.rpartition(".")[2]
            if name in forbidden:
                found.append(f"{path.name}:{node.lineno} {name}")
    assert found == []


def Ctx(uid: int, gid: int) -> types.SimpleNamespace:  # noqa: N802 - stands for a class
    """A FUSE request context: who asks."""
    return types.SimpleNamespace(uid=uid, gid=gid, pid=1, umask=0o022)


def test_a_re_created_topic_is_a_new_life(fs):
    fs.write("orders/0/append", b"old\n")
    topic, stream = fs.inode("orders"), fs.inode("orders/0/stream")
    before = fs.stat("orders")
    reader = fs.open("orders/0/stream")
    writer = fs.open("orders/0/append", os.O_WRONLY)
    fs.call("rmdir", pyfuse3.ROOT_INODE, b"orders", None)
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"orders", 0o700, Ctx(1000, 1000))
    fs.write("orders/0/append", b"new\n")
    assert fs.call("read", reader, 0, 100) == b""  # the old topic's: ended
    with fuse_error(errno.ESTALE):
        fs.call("write", writer, 0, b"into the new one?\n")
    with fuse_error(errno.ESTALE):
        fs.call("flush", writer)
    fs.call("release", writer)
    # while open, as an unlinked file (the kernel asks before reading past what it holds)
    gone = fs.call("getattr", stream, None)
    assert (gone.st_nlink, gone.st_size, gone.st_uid) == (0, 0, before.st_uid)
    fs.close(reader)
    for inode in (topic, stream):
        with fuse_error(errno.ENOENT):
            fs.call("getattr", inode, None)
    after = fs.stat("orders")
    assert after.st_ino != before.st_ino and after.generation != before.generation
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (1000, 1000, 0o700)
    assert fs.values("orders") == [b"new"]


def test_rmdir_follows_posix(fs):
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"theirs", 0o755, Ctx(1000, 1000))
    fs.write("theirs/0/append", b"x\n")
    fields = types.SimpleNamespace(
        update_mode=True, update_uid=False, update_gid=False, update_size=False
    )

    def chmod_root(mode: int) -> None:
        root = fs.stat("")
        root.st_mode = stat.S_IFDIR | mode
        fs.call("setattr", pyfuse3.ROOT_INODE, root, fields, None, None)

    chmod_root(0o777)
    with fuse_error(errno.ENOTEMPTY):  # records: its owner's or root's to delete
        fs.call("rmdir", pyfuse3.ROOT_INODE, b"theirs", Ctx(2000, 2000))
    chmod_root(0o1777)
    with fuse_error(errno.EPERM):  # sticky: neither the root's nor the topic's owner
        fs.call("rmdir", pyfuse3.ROOT_INODE, b"orders", Ctx(2000, 2000))
    chmod_root(0o755)
    with fuse_error(errno.EACCES):  # no write permission on the root
        fs.call("rmdir", pyfuse3.ROOT_INODE, b"orders", Ctx(2000, 2000))
    chmod_root(0o777)
    fs.call("rmdir", pyfuse3.ROOT_INODE, b"theirs", Ctx(1000, 1000))
    fs.call("rmdir", pyfuse3.ROOT_INODE, b"orders", Ctx(2000, 2000))  # empty: anyone may
    for name in (b"theirs", b"orders"):
        with fuse_error(errno.ENOENT):
            fs.call("lookup", pyfuse3.ROOT_INODE, name, None)
