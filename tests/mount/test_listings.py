"""Listings and lookups that stay cheap whatever a topic holds, and the
errnos of the tree: ``segments/`` of 5,100 segment files listed in well under
a second while another ``cat state`` is answered, ``.`` and ``..`` in every
listing, ``segments/`` listings and link targets the kernel keeps (and reads
again once they changed), ``groups/<group>`` writes refused or taken as the
docs say."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pyfuse3
import pytest
from mount_helpers import Daemon, sh
from test_operations import FS, fuse_error
from waiting import wait_for

from logfs import Store
from logfs.core.tools.offline import check
from logfs.mount.fuse import listings

SEGMENTS = 1700  # 5,100 files


def tiny_segments(data, n: int) -> None:
    """A topic ``t`` whose every record is a segment of its own (segment.bytes=14,
    Kafka's least), ``n`` records long."""
    with Store(data) as store:
        store.create_topic("t", 1, {"segment.bytes": "14"})
        log = store.log("t", 0)
        for i in range(n):
            log.append([b"%d" % i])


def test_segment_names_and_files_agree_with_the_directory(tmp_path):
    tiny_segments(tmp_path / "data", 30)
    with Store(tmp_path / "data") as store:
        log = store.log("t", 0)
        names = log.segment_names()
        assert names == sorted(names) and len(names) == 3 * 30
        for name in names:
            path = log.segment_file(name)
            assert os.path.dirname(path) == os.path.abspath(log.dir)
            assert os.path.basename(path) == name
        # what is no segment's file is not found: another suffix, another base, not a name
        first = names[0][:20]
        for missing in (f"{first}.snapshot", f"{int(first) + 10**6:020d}.log", "x.log", ".log"):
            assert log.segment_file(missing) is None
        assert set(os.listdir(log.dir)) >= {n for n in names if n.endswith(".log")}


def test_every_listing_starts_with_dot_and_dot_dot(tmp_path, monkeypatch):
    store = Store(tmp_path / "data")
    fs = FS(store, partitions=1)
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"orders", 0o755, None)
    replies = []
    monkeypatch.setattr(
        pyfuse3,
        "readdir_reply",
        lambda token, name, attrs, i: replies.append((name, attrs)) or True,
    )
    for path, parent in (
        ("", ""),
        ("orders", ""),
        ("orders/0", "orders"),
        ("orders/0/offset", "orders/0"),
    ):
        replies.clear()
        inode = fs.inode(path)
        fh = fs.call("opendir", inode, None)
        fs.call("readdir", fh, 0, None)
        fs.call("releasedir", fh)
        (dot, here), (dotdot, up) = replies[:2]
        assert (dot, dotdot) == (b".", b"..")
        assert here.st_ino == inode and up.st_ino == fs.inode(parent)
        assert not {b".", b".."} & {n for n, _ in replies[2:]}  # listed once
    # a listing resumed after the dots (the kernel's next chunk) does not repeat them
    replies.clear()
    fh = fs.call("opendir", fs.inode("orders"), None)
    fs.call("readdir", fh, 0, None)
    first = [n for n, _ in replies]
    replies.clear()
    fs.call("readdir", fh, 2, None)
    assert [n for n, _ in replies] == first[2:]
    fs.call("releasedir", fh)
    store.close()
    assert check(tmp_path / "data") == []


def test_a_listing_is_answered_in_chunks_whatever_the_readers_buffer(tmp_path, monkeypatch):
    """A reader with room for every entry (``ls`` asks for 1 MiB) still gets
    at most `listings.CHUNK` per READDIR, so other requests are served between
    them; read on from each chunk's last offset, the listing is whole, each
    name once, and only its end is an empty answer."""
    tiny_segments(tmp_path / "data", 150)  # 450 files in segments/
    store = Store(tmp_path / "data")
    fs = FS(store)
    replies: list[tuple[bytes, int]] = []
    monkeypatch.setattr(
        pyfuse3, "readdir_reply", lambda token, name, attrs, i: replies.append((name, i)) or True
    )
    fh = fs.call("opendir", fs.inode("t/0/segments"), None)
    names, start, sizes = [], 0, []
    while not sizes or sizes[-1]:
        replies.clear()
        fs.call("readdir", fh, start, None)
        sizes.append(len(replies))
        names += [name for name, _ in replies]
        start = replies[-1][1] if replies else start
    fs.call("releasedir", fh)
    assert sizes == [listings.CHUNK] * 3 + [452 - 3 * listings.CHUNK, 0]
    assert names[:2] == [b".", b".."]
    assert names[2:] == [os.fsencode(n) for n in store.log("t", 0).segment_names()]
    store.close()


def test_segments_of_a_large_partition_list_fast_and_never_stall_others(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    tiny_segments(data, SEGMENTS)
    with Daemon(data, mnt):
        state = mnt / "t" / "0" / "state"
        state.read_text()
        waits: list[float] = []
        stop = threading.Event()

        def reader() -> None:  # another `cat state`, all along: the loop never stalls
            while not stop.is_set():
                started = time.monotonic()
                state.read_bytes()
                waits.append(time.monotonic() - started)
                time.sleep(0.01)

        other = threading.Thread(target=reader)
        other.start()
        try:
            started = time.monotonic()
            listed = os.listdir(mnt / "t" / "0" / "segments")
            took = time.monotonic() - started
            started = time.monotonic()
            found = subprocess.run(
                ["find", str(mnt / "t")], capture_output=True, text=True, timeout=60, check=True
            ).stdout.split()
            took_find = time.monotonic() - started
        finally:
            stop.set()
            other.join()
        assert len(listed) == 3 * SEGMENTS
        assert len([p for p in found if "/segments/" in p]) == 3 * SEGMENTS
        assert took < 1.0, f"ls segments/ of {SEGMENTS} segments took {took:.2f} s"
        assert took_find < 3.0, f"find took {took_find:.2f} s"
        assert waits and max(waits) < 1.0, f"cat state waited {max(waits):.2f} s"


def test_the_kernel_keeps_segments_listings_until_the_segments_change(tmp_path):
    """``segments/`` listed again is answered by the kernel from the listing
    it kept (no READDIR reaches the daemon); after a roll, after retention,
    and after the kernel forgot the entries' inodes, the next listing is read
    again and is DATA's, with each entry's inode the one stat(2) gives (once
    the daemon was told of the forgetting: a listing kept by the kernel may
    name an inode the kernel is forgetting meanwhile)."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    options = ("segment.bytes=4096", "log.retention.check.interval.ms=100", "debug")
    with Daemon(data, mnt, *options, log=log):
        (mnt / "r").mkdir()
        part, files = mnt / "r" / "0", data / "r-0"

        def listed() -> list[str]:
            with os.scandir(part / "segments") as entries:
                pairs = sorted((e.name, e.inode()) for e in entries)
            assert [ino for _, ino in pairs] == [
                os.lstat(part / "segments" / name).st_ino for name, _ in pairs
            ]
            names = [name for name, _ in pairs]
            logs = sorted(n for n in os.listdir(files) if n.endswith(".log"))
            assert [n for n in names if n.endswith(".log")] == logs  # indexes come at flushes
            assert {n.split(".")[0] for n in names} == {n.split(".")[0] for n in logs}
            return names

        def reads() -> int:
            return log.read_text().count("opcode: READDIR")

        def append(lines: int) -> None:
            with open(part / "append", "a") as f:
                for i in range(lines):
                    f.write(f"line {i:04d} of a partition whose segments roll\n")

        append(20)
        first = listed()
        before = reads()
        for _ in range(3):
            assert listed() == first
        assert reads() == before  # answered by the kernel
        append(400)  # rolls
        rolled = listed()
        assert len(rolled) > len(first) and reads() > before
        before = reads()
        assert listed() == rolled and reads() == before
        with open(part.parent / "config", "a") as config:
            config.write("retention.bytes=8000\n")
        wait_for(lambda: json.loads((part / "state").read_text())["log_start_offset"], "retention")
        kept = listed()
        assert kept[0] != rolled[0] and kept[-1] == rolled[-1]
        before, mark = reads(), len(log.read_text())
        held = os.open(part / "segments", os.O_RDONLY | os.O_DIRECTORY)  # it stays, with
        try:  # its listing, while the kernel forgets its entries' inodes
            Path("/proc/sys/vm/drop_caches").write_text("2\n")

            def forgotten() -> bool:  # every FORGET the kernel queued has reached the daemon
                seen = log.read_text()[mark:].count("FORGET")
                time.sleep(0.3)
                return seen > 0 and log.read_text()[mark:].count("FORGET") == seen

            wait_for(forgotten, "the kernel forgetting")
            assert listed() == kept and reads() > before
        finally:
            os.close(held)
    assert check(data) == []


def test_the_kernel_keeps_link_targets_and_a_moved_one_is_read_again(tmp_path):
    """The kernel reads a link's target once (FUSE_CACHE_SYMLINKS): opening a
    segment through ``segments/`` again, after its entry expired too, sends
    no READLINK. A ``time/0`` whose first record retention deleted is
    another inode with the new target, read by the kernel once."""
    data, mnt, log = tmp_path / "data", tmp_path / "mnt", tmp_path / "daemon.log"
    mnt.mkdir()
    options = ("segment.bytes=8192", "log.retention.check.interval.ms=100", "debug")
    with Daemon(data, mnt, *options, log=log):
        (mnt / "r").mkdir()
        part = mnt / "r" / "0"
        with open(part / "append", "a") as append:
            for i in range(40):  # 50 lines a write: a few batches a segment
                append.write("".join(f"line {i * 50 + j:04d} of the log\n" for j in range(50)))
        first = part / "segments" / "00000000000000000000.log"
        target = os.readlink(first)
        assert target == str(data / "r-0" / "00000000000000000000.log")
        for _ in range(2):  # the entry (a second) expires, the inode and its target stay
            with open(first, "rb") as segment:
                assert segment.read(8) == (0).to_bytes(8, "big")
            assert os.readlink(first) == target
            time.sleep(1.1)
        assert os.readlink(part / "time" / "0") == "../offset/0"
        before = os.lstat(part / "time" / "0").st_ino
        assert (part / "time" / "0").read_bytes() == b"line 0000 of the log"
        assert log.read_text().count("opcode: READLINK ") == 2  # one per link
        with open(part.parent / "config", "a") as config:
            config.write("retention.bytes=20000\n")
        start = wait_for(
            lambda: json.loads((part / "state").read_text())["log_start_offset"],
            "retention moving the log start",
        )
        moved = part / "time" / "0"
        assert os.readlink(moved) == f"../offset/{start}"
        assert moved.read_bytes() == b"line %04d of the log" % start
        assert os.lstat(moved).st_ino != before
        assert os.readlink(moved) == f"../offset/{start}"
        assert log.read_text().count("opcode: READLINK ") == 3
    assert check(data) == []


def test_group_files_refuse_what_no_offset_is_and_take_what_the_docs_allow(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        (mnt / "g").mkdir()
        group = mnt / "g" / "0" / "groups" / "app"
        # several numbers: the last is committed
        assert sh(f"printf '5\\n6\\n' > {group}", check=False).returncode == 0
        assert group.read_text() == "6\n"
        # past an int64: EINVAL at close, nothing committed, no traceback in the log
        for too_large in ("9223372036854775808", "99999999999999999999999"):
            with pytest.raises(OSError) as refused, open(group, "w") as f:
                f.write(too_large + "\n")
            assert refused.value.errno == errno.EINVAL
        assert group.read_text() == "6\n"
        with open(group, "w") as f:
            f.write("9223372036854775807\n")
        assert group.read_text() == "9223372036854775807\n"
        assert "Traceback" not in (data.parent / "daemon.log").read_text()
        # `ls -a` lists the dots
        listed = sh(f"ls -a {mnt / 'g' / '0'}").stdout.split()
        assert listed[:2] == [".", ".."] and "groups" in listed


def test_a_segment_name_that_no_segment_has_is_enoent(tmp_path):
    store = Store(tmp_path / "data")
    fs = FS(store, partitions=1)
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"orders", 0o755, None)
    segments = fs.inode("orders/0/segments")
    for name in (b"00000000000000000000.log", b"00000000000000000000.index"):
        assert fs.call("lookup", segments, name, None).st_ino
    for name in (b"00000000000000000001.log", b"00000000000000000000.snapshot", b"log"):
        with fuse_error(errno.ENOENT):
            fs.call("lookup", segments, name, None)
    store.close()


def test_internal_topics_are_no_topics_of_the_mount(tmp_path):
    store = Store(tmp_path / "data")
    fs = FS(store, partitions=1)
    root = pyfuse3.ROOT_INODE
    for _ in range(2):  # before and after the topic exists in DATA
        with fuse_error(errno.ENOENT):
            fs.call("lookup", root, b"__consumer_offsets", None)
        with fuse_error(errno.EINVAL):
            fs.call("mkdir", root, b"__consumer_offsets", 0o755, None)
        with fuse_error(errno.ENOENT):
            fs.call("rmdir", root, b"__consumer_offsets", None)
        if "__consumer_offsets" not in store.topics():
            store.create_topic("__consumer_offsets", 1)
    assert "__consumer_offsets" in store.topics()  # neither made nor deleted by the mount
    store.close()
