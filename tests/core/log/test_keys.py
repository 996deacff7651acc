"""The ``keys/`` view of compacted topics: key names, the live-key index, and
a real mount driven by shell tools and file IO, checked against a dictionary
before cleaning, after it and after a remount."""

from __future__ import annotations

import errno
import json
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mount_helpers import Daemon, sh
from stress import scale

from logfs import Store
from logfs.core.log.keys import key_name, name_key
from logfs.core.log.partitioner import partition_for_key
from logfs.core.tools.offline import check

# ---------------------------------------------------------------- names


@settings(max_examples=scale(500, 5000))
@given(st.binary(max_size=400))
def test_every_key_has_one_valid_file_name(key):
    name = key_name(key)
    raw = os.fsencode(name)
    assert raw and len(raw) <= 255 and b"/" not in raw and b"\0" not in raw
    assert not raw.startswith(b".")
    if len(raw) < 200:
        assert name_key(name) == key  # short names decode back
    else:
        assert name_key(name) in (key, None)  # long ones may be hashed


@pytest.mark.parametrize(
    "key, name",
    [
        (b"plain", "plain"),
        (b"a/b", "a%2Fb"),
        (b"100%", "100%25"),
        (b"nul\0", "nul%00"),
        (b".hidden", "%2Ehidden"),
        (b"..", "%2E."),
        (b"", "%"),
        ("é".encode(), "é"),
    ],
)
def test_key_names(key, name):
    assert key_name(key) == name and name_key(name) == key


def test_names_no_key_has():
    for name in ("%zz", "%2f", "a%2", ".x", "%~" + "0" * 32):
        assert name_key(name) is None


def test_the_live_key_index_follows_appends_and_retention(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic(
            "c",
            1,
            {
                "cleanup.policy": "compact,delete",
                "segment.bytes": "1024",
                "retention.bytes": "2048",
            },
        )
        log = store.log("c", 0)
        log.append([b"1"], keys=[b"a"])
        assert log.live_keys() == {b"a": 0}
        log.append([b"2", None, b"3"], keys=[b"b", b"a", b"c"])
        assert log.live_keys() == {b"b": 1, b"c": 3}
        for i in range(100):
            log.append([b"x" * 30], keys=[b"k%d" % i])
        assert log.enforce_retention() > 0  # old keys' records deleted: rebuilt on use
        assert (
            set(log.live_keys()) == {r.key for r in log.scan() if r.value is not None}
            and b"b" not in log.live_keys()
        )


# ---------------------------------------------------------------- through a mount


@pytest.fixture
def mnt(tmp_path):
    data, mountpoint = tmp_path / "data", tmp_path / "mnt"
    mountpoint.mkdir()
    options = ("partitions=3", "log.cleaner.backoff.ms=50")
    with Daemon(data, mountpoint, *options) as daemon:
        (mountpoint / "c").mkdir()
        with open(mountpoint / "c" / "config", "a") as config:
            config.write(
                "cleanup.policy=compact\nparse.key=true\nsegment.bytes=1024\n"
                "min.cleanable.dirty.ratio=0.01\ndelete.retention.ms=0\n"
            )
        daemon.keys = mountpoint / "c" / "keys"
        yield daemon


def view(keys_dir) -> dict[bytes, bytes]:
    """keys/ as a dict: each file's key (its xattr: hashed names do not say it)
    and content."""
    out = {}
    for name in os.listdir(keys_dir):
        value = (keys_dir / name).read_bytes()
        # the kernel caches attributes for a second: the mount must have said when they changed
        assert os.stat(keys_dir / name).st_size == len(value), name
        out[os.getxattr(keys_dir / name, "user.logfs.key")] = value
    return out


@pytest.mark.mount
@pytest.mark.timeout(180)
def test_shell_tools_on_keys(mnt, tmp_path):
    keys = mnt.keys
    sh(f"printf 'alice\\tOslo\\nbob\\tLima\\nalice\\tBergen\\n' >> {mnt.mountpoint}/c/append")
    assert sorted(os.listdir(keys)) == ["alice", "bob"]
    assert sh(f"cat {keys}/alice").stdout == "Bergen"
    assert os.stat(keys / "alice").st_size == 6
    sh(f"printf 'alice\\tTrondheim\\n' >> {mnt.mountpoint}/c/append")  # another writer
    assert os.stat(keys / "alice").st_size == 9  # at once, though attributes are cached
    assert sh(f"cat {keys}/alice").stdout == "Trondheim"
    sh(f"echo Quito > {keys}/carol && cp /etc/hostname {keys}/host")
    assert (keys / "carol").read_bytes() == b"Quito\n"
    assert (keys / "host").read_bytes() == Path("/etc/hostname").read_bytes()
    offset = int(os.getxattr(keys / "carol", "user.logfs.offset"))
    partition = int(os.getxattr(keys / "carol", "user.logfs.partition"))
    assert partition == partition_for_key(b"carol", 3)  # Kafka's default partitioner
    offset_file = mnt.mountpoint / "c" / str(partition) / "offset" / str(offset)
    assert offset_file.read_bytes() == b"Quito\n"
    assert int(os.getxattr(keys / "carol", "user.logfs.timestamp")) > 0
    sh(f"rm {keys}/bob")
    assert "bob" not in os.listdir(keys)
    with pytest.raises(FileNotFoundError):
        (keys / "bob").read_bytes()
    with pytest.raises(OSError) as e:
        os.rename(keys / "alice", keys / "alicia")
    assert e.value.errno == errno.EPERM
    # an editor saving in place: open read-write, overwrite, truncate, close
    with open(keys / "alice", "r+b") as f:
        f.write(b"Tromso")
        f.truncate()
    assert (keys / "alice").read_bytes() == b"Tromso"
    for odd in (b"a/b", b".dot", b"100%", b""):
        (keys / key_name(odd)).write_bytes(b"v")
    assert view(keys)[b"a/b"] == b"v" and view(keys)[b""] == b"v"
    long_key = b"k" * 300  # its name is hashed: created by appending, then a file like any
    with pytest.raises(OSError) as e:
        (keys / key_name(long_key)).write_bytes(b"long")  # the name does not say the key
    assert e.value.errno == errno.EINVAL
    with open(mnt.mountpoint / "c" / "append", "ab") as append:
        append.write(long_key + b"\tlong\n")
    assert (keys / key_name(long_key)).read_bytes() == b"long"
    (keys / key_name(long_key)).write_bytes(b"longer")
    assert view(keys)[long_key] == b"longer"
    os.unlink(keys / key_name(long_key))
    assert long_key not in view(keys)


@pytest.mark.mount
@pytest.mark.timeout(300)
def test_keys_match_a_dictionary_before_and_after_cleaning_and_a_remount(mnt):
    rng = random.Random(int(os.environ.get("LOGFS_STRESS_SEED", "2")))
    keys = mnt.keys
    model: dict[bytes, bytes] = {}
    names = [b"k%d" % i for i in range(12)] + [b"x/y", b".z", b""]
    for step in range(scale(150, 1500)):
        key = rng.choice(names)
        how = rng.random()
        if how < 0.45:  # through keys/
            value = b"%d-%d" % (step, rng.randrange(10**6))
            (keys / key_name(key)).write_bytes(value)
            model[key] = value
        elif how < 0.75 and b"\t" not in key and b"\n" not in key and key:
            value = b"line-%d" % step  # through the topic's append, console-producer style
            with open(mnt.mountpoint / "c" / "append", "ab") as append:
                append.write(key + b"\t" + value + b"\n")
            model[key] = value
        elif key in model:
            os.unlink(keys / key_name(key))
            del model[key]
        if step % 25 == 0:
            assert view(keys) == model
    assert view(keys) == model
    deadline = time.monotonic() + 30
    while mnt.output().count("cleaned c-") < 3:  # the daemon cleans in the background
        assert time.monotonic() < deadline, mnt.output()
        time.sleep(0.1)
    assert view(keys) == model
    state = [json.loads((mnt.mountpoint / "c" / str(p) / "state").read_text()) for p in range(3)]
    mnt.stop()
    with Store(mnt.data, read_only=True) as store:
        stored = sum(1 for p in range(3) for _ in store.log("c", p).scan())
    assert stored < sum(s["next_offset"] for s in state)  # cleaning removed records
    mnt.start()
    assert view(keys) == model
    mnt.stop()
    assert check(mnt.data) == []
