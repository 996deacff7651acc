"""The mount's kinds of node, called directly: which kind a path names, when a
path gets an inode, how each kind is opened, and the names the mount shares
with the writers beside it (core/client/names.py)."""

from __future__ import annotations

import errno
import json
import os
import time

import pyfuse3
import pytest
import trio

from logfs import Store
from logfs.core.client import delivery, names
from logfs.core.errors import LogfsError
from logfs.core.log import cleaner
from logfs.core.tools.offline import check
from logfs.mount import Operations
from logfs.mount.errnos import errno_for
from logfs.mount.tree import directories, nodes, records


class Mount:
    """An Operations over a store, driven by path as the kernel would."""

    def __init__(self, store: Store) -> None:
        self.ops = Operations(store)

    def call(self, method, *args):
        return trio.run(getattr(self.ops, method), *args)

    def lookup(self, path: str) -> int:
        inode = pyfuse3.ROOT_INODE
        for name in filter(None, path.split("/")):
            inode = self.call("lookup", inode, name.encode(), None).st_ino
        return inode

    def open(self, path: str, flags: int) -> pyfuse3.FileInfo:
        return self.call("open", self.lookup(path), flags, None)

    def close(self, fh: int) -> None:
        self.call("flush", fh)
        self.call("release", fh)


@pytest.fixture
def mount(tmp_path):
    store = Store(tmp_path / "data")
    store.create_topic("orders", partitions=2)
    store.log("orders", 0).append([b"first", b"second"])
    store.create_topic("users", partitions=1, config={"cleanup.policy": "compact"})
    store.append_to_topic("users", [b"v"], [b"alice"])
    yield Mount(store)
    store.close()
    assert check(tmp_path / "data") == []


@pytest.mark.parametrize(
    "path, kind",
    [
        ((), directories.Root),
        (("t",), directories.Topic),
        (("t", "append"), nodes.TopicAppend),
        (("t", "append.bin"), nodes.TopicAppendBin),
        (("t", "append.batches"), None),  # whole batches go to one partition
        (("t", "config"), nodes.Config),
        (("t", "keys"), directories.KeysDir),
        (("t", "keys", "alice"), records.Key),
        (("t", "keys", "alice", "x"), None),
        (("t", "0"), directories.Partition),
        (("t", "12"), directories.Partition),
        (("t", "01"), None),  # one path per partition
        (("t", "x"), None),
        (("t", "0", "append"), nodes.Append),
        (("t", "0", "append.bin"), nodes.AppendBin),
        (("t", "0", "append.batches"), nodes.AppendBatches),
        (("t", "0", "config"), None),
        (("t", "0", "stream"), nodes.Stream),
        (("t", "0", "stream", "x"), None),
        (("t", "0", "state"), nodes.State),
        (("t", "0", "offset"), directories.OffsetDir),
        (("t", "0", "offset", "7"), records.Offset),
        (("t", "0", "offset", "07"), None),
        (("t", "0", "offset", "-1"), None),
        (("t", "0", "offset", "\u0663"), None),  # a digit, but not an ASCII one
        (("t", "0", "offset", "7", "x"), None),
        (("t", "0", "time", "1700000000000"), nodes.Time),
        (("t", "0", "from", "3"), nodes.From),
        (("t", "0", "from", "x"), None),
        (("t", "0", "segments", "00000000000000000000.log"), nodes.Segment),
        (("t", "0", "keys"), None),
    ],
)
def test_the_kind_of_a_path_comes_from_its_shape(path, kind):
    assert directories.node_class(path) is kind


def test_a_path_that_is_not_there_gets_no_inode(mount):
    before = len(mount.ops.inodes)
    for path in (
        "orders/0/offset/2",  # past the end
        "orders/0/time/99999999999999",  # after the last record
        "orders/0/from/3",  # past the log end
        "orders/0/segments/none.log",
        "orders/2/stream",  # no such partition
        "orders/keys",  # not a compacted topic
        "users/keys/bob",  # no such key
        "nobody/0/stream",
    ):
        with pytest.raises(pyfuse3.FUSEError, check=lambda e: e.errno == errno.ENOENT):
            mount.lookup(path)
        assert mount.ops.inodes.inode_of(tuple(path.split("/"))) is None
    # only the directories on the way: orders, orders/0, its offset, time, from
    # and segments, users and users/keys
    assert len(mount.ops.inodes) == before + 8
    inode = mount.lookup("orders/0/offset/1")
    assert mount.lookup("orders/0/offset/1") == inode  # a path keeps its inode


@pytest.mark.parametrize(
    "path, flags, direct_io, keep_cache, nonseekable",
    [
        # a record never changes: the page cache keeps it across opens
        ("orders/0/offset/0", os.O_RDONLY, False, True, False),
        # lines through the page cache, none kept from before (test_stream_cache.py)
        ("orders/0/stream", os.O_RDONLY, False, False, False),
        ("orders/0/from/1", os.O_RDONLY, False, False, False),
        ("orders/0/state", os.O_RDONLY, True, True, False),
        ("orders/config", os.O_RDONLY, True, True, False),
        ("orders/config", os.O_WRONLY | os.O_APPEND, True, True, False),
        ("orders/0/append", os.O_WRONLY, True, True, False),
        ("orders/append", os.O_WRONLY, True, True, False),
        # receipts are read as a stream; Python's "a+" needs a seekable file
        ("orders/0/append", os.O_RDWR, True, True, True),
        ("orders/0/append.batches", os.O_RDWR, True, True, True),
        ("orders/0/append", os.O_RDWR | os.O_APPEND, True, True, False),
        # a key's value changes: the page cache is dropped at each open
        ("users/keys/alice", os.O_RDONLY, False, False, False),
        ("users/keys/alice", os.O_WRONLY, True, True, False),
    ],
)
def test_each_kind_is_opened_with_its_own_flags(
    mount, path, flags, direct_io, keep_cache, nonseekable
):
    info = mount.open(path, flags)
    try:
        assert (info.direct_io, info.keep_cache, info.nonseekable) == (
            direct_io,
            keep_cache,
            nonseekable,
        )
    finally:
        mount.close(info.fh)


def test_a_stream_keeps_the_kernels_cache_while_its_lines_stay_where_they_were(mount):
    store = mount.ops.store
    store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "1024"})
    orders, compacted = store.log("orders", 0), store.log("c", 0)
    for i in range(100):
        compacted.append([b"v%d" % i], keys=[b"k%d" % (i % 3)])

    def kept(path: str) -> bool:
        """Open and close ``path``: may the kernel keep what it read before?"""
        info = mount.open(path, os.O_RDONLY)
        mount.close(info.fh)
        assert not info.direct_io
        return info.keep_cache

    def mtime(path: str) -> int:
        return mount.call("getattr", mount.lookup(path), None).st_mtime_ns

    for path in ("orders/0/stream", "orders/0/from/1", "c/0/stream"):
        assert not kept(path)  # the first open: nothing kept
        assert kept(path)
    shown = mtime("orders/0/stream")
    assert mtime("orders/0/stream") == shown  # unchanged lines, unchanged mtime
    orders.append([b"third"])  # lines added at the end: the kernel sees the size change
    assert kept("orders/0/stream") and mtime("orders/0/stream") > shown
    shown = mtime("orders/0/stream")
    orders.delete_records(1)  # the log start moved: so did every line
    assert not kept("orders/0/stream") and mtime("orders/0/stream") > shown
    assert kept("orders/0/stream")
    assert cleaner.clean_store(store, now_ms=int(time.time() * 1000) + 1000, force=True)
    assert not kept("c/0/stream")  # a cleaning swapped segments in
    assert kept("c/0/stream")


@pytest.mark.parametrize(
    "path, code",
    [
        ("orders", errno.EISDIR),
        ("orders/0/offset", errno.EISDIR),
        ("orders/0/offset/0", errno.EACCES),
        ("orders/0/stream", errno.EACCES),
        ("orders/0/state", errno.EACCES),
        ("orders/0/from/0", errno.EACCES),
    ],
)
def test_a_kind_that_cannot_be_written_refuses_a_write_open(mount, path, code):
    with pytest.raises(pyfuse3.FUSEError, check=lambda e: e.errno == code):
        mount.open(path, os.O_WRONLY)


def test_links_point_where_the_store_says(mount):
    ms = mount.ops.store.log("orders", 0).read(1).timestamp
    inode = mount.lookup(f"orders/0/time/{ms}")
    assert mount.call("readlink", inode, None) in (b"../offset/0", b"../offset/1")
    name = "00000000000000000000.log"
    segment = mount.call("readlink", mount.lookup(f"orders/0/segments/{name}"))
    assert os.fsdecode(segment) == mount.ops.store.log("orders", 0).segment_file(name)
    assert os.path.samefile(segment, mount.ops.store.path / "orders-0" / name)
    with pytest.raises(pyfuse3.FUSEError, check=lambda e: e.errno == errno.EINVAL):
        mount.call("readlink", mount.lookup("orders/0/stream"), None)


def test_the_errno_a_writer_reads_back_is_the_errno_of_that_error():
    """A writer of append.batches turns an errno back into the store's error
    (`names.ERRORS`); the mount must answer that very errno for it."""
    for code, error in names.ERRORS.items():
        assert errno_for(error("x")) == code
        assert type(delivery.mount_error(OSError(code, "x"), "writing")) is error
    assert all(issubclass(error, LogfsError) for error in names.ERRORS.values())


def test_the_root_answers_the_xattrs_writers_ask_for(mount):
    pid = mount.call("getxattr", pyfuse3.ROOT_INODE, names.PID_XATTR.encode(), None)
    assert int(pid) == os.getpid()
    listed = mount.call("listxattr", pyfuse3.ROOT_INODE, None)
    assert sorted(listed) == sorted(
        name.encode()
        for name in (
            names.PID_XATTR,
            names.DATA_XATTR,
            names.HEALTH_XATTR,
            names.FAILURES_XATTR,
            names.RECOVERY_XATTR,
        )
    )
    assert mount.call("getxattr", pyfuse3.ROOT_INODE, names.HEALTH_XATTR.encode(), None) == b"ok"
    # Operations built alone have no recovery to tell of: an empty object.
    recovery = mount.call("getxattr", pyfuse3.ROOT_INODE, names.RECOVERY_XATTR.encode(), None)
    assert json.loads(recovery) == {}
