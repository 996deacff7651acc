"""Bad input, property-tested against the Operations layer, and a smaller set
through a real mount: every input gets a clear errno (or does exactly what a
valid input does) and leaves the log and the data directory unchanged.

The invariant checked after each example is a fingerprint of DATA: every
file's name, size and content, so nothing a hostile caller sends can create
a file outside a partition, change a segment or write a stray file.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import types

import pyfuse3
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mount_helpers import Daemon, sh
from stress import report, scale, tally

from logfs import Store
from logfs.core.errors import InvalidTopicError
from logfs.core.log.topics import validate_topic_name
from logfs.core.tools.offline import check
from logfs.mount import Operations

EXAMPLES = scale(150, 3000)
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TRIED = tally("bad input")
# The errnos the mount documents (docs/mount.md); anything else is a bug.
DOCUMENTED = {
    errno.ENOENT, errno.EINVAL, errno.EEXIST, errno.EMSGSIZE, errno.EACCES, errno.EPERM,
    errno.EISDIR, errno.ENOTDIR, errno.ENOTSUP, errno.EROFS, pyfuse3.ENOATTR,
}  # fmt: skip


def tried(kind: str) -> None:
    TRIED[kind] += 1
    TRIED["inputs_tried"] += 1  # every input also had to leave DATA unchanged


def fingerprint(path) -> dict[str, str]:
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if name == "logfs.log":
                continue
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha1(f.read()).hexdigest()
    return out


class Mount:
    def __init__(self, store) -> None:
        self.store = store
        self.ops = Operations(store, partitions=2)

    def call(self, method, *args):
        """(result, None) or (None, errno); anything but FUSEError fails the test."""
        try:
            return trio.run(getattr(self.ops, method), *args), None
        except pyfuse3.FUSEError as e:
            assert e.errno in DOCUMENTED, f"{method}{args!r}: undocumented errno {e.errno}"
            return None, e.errno

    def inode(self, *names: bytes) -> int:
        inode = pyfuse3.ROOT_INODE
        for name in names:
            attrs, err = self.call("lookup", inode, name, None)
            assert err is None, (names, err)
            inode = attrs.st_ino
        return inode


@pytest.fixture(scope="module")
def fs(tmp_path_factory):
    data = tmp_path_factory.mktemp("bad") / "data"
    store = Store(data, defaults={"max.message.bytes": "2000"})
    mount = Mount(store)
    mount.call("mkdir", pyfuse3.ROOT_INODE, b"t", 0o755, None)
    mount.store.log("t", 0).append([b"zero", b"one", b"two"])
    mount.data = data
    yield mount
    store.close()
    assert check(data) == []


names = st.one_of(
    st.binary(min_size=1, max_size=300),
    st.text(min_size=1, max_size=260).map(os.fsencode),
    st.sampled_from(
        [b".", b"..", b"../..", b"../../etc", b"a/b", b"..%2F..%2Fetc", b"%2e%2e", b"\x00",
         b"t-0", b"config", b"recovery-point-offset-checkpoint", b".lock", b"-1", b"x" * 250]
    ),
)  # fmt: skip


@SETTINGS
@given(name=names)
def test_topic_and_partition_names(fs, name):
    before = fingerprint(fs.data)
    text = os.fsdecode(name)
    try:
        validate_topic_name(text)
        valid = text not in fs.store.topics()
    except InvalidTopicError:
        valid = False
    _, err = fs.call("mkdir", pyfuse3.ROOT_INODE, name, 0o755, None)
    tried("topic names")
    if valid:
        assert err is None and text in fs.store.topics()
        fs.call("rmdir", pyfuse3.ROOT_INODE, name, None)
        assert text not in fs.store.topics()
        return
    assert err in (errno.EINVAL, errno.EEXIST), (name, err)
    # partitions: only the next canonical number would be created; try everything else
    topic = fs.inode(b"t")
    _, err = fs.call("mkdir", topic, name, 0o755, None)
    tried("partition names")
    assert err in (errno.EINVAL, errno.EEXIST), (name, err)
    # lookups of the same names anywhere: ENOENT, or the one legitimate node
    for parent in (
        pyfuse3.ROOT_INODE,
        topic,
        fs.inode(b"t", b"0"),
        fs.inode(b"t", b"0", b"segments"),
    ):
        attrs, err = fs.call("lookup", parent, name, None)
        tried("lookups")
        if err is None:
            assert name in (b".", b"..", b"t", b"config") or name.isdigit(), name
    assert fs.store.topics() == {"t": 2}
    assert fingerprint(fs.data) == before


offsets = st.one_of(
    st.integers(-(2**70), 2**70).map(lambda n: str(n).encode()),
    st.sampled_from([b"007", b"1e3", b"0x10", b" 1", b"1 ", b"+1", b"\xd9\xa1", b"1.0", b"", b"."]),
    st.binary(min_size=1, max_size=30),
)


@SETTINGS
@given(name=offsets)
def test_odd_offsets_and_times(fs, name):
    before = fingerprint(fs.data)
    for directory in (b"offset", b"time"):
        parent = fs.inode(b"t", b"0", directory)
        attrs, err = fs.call("lookup", parent, name, None)
        tried("offsets and times")
        if err is None:
            if name in (b".", b".."):
                continue
            # only canonical, in-range numbers exist
            assert name.isdigit() and name == str(int(name)).encode(), name
            if directory == b"offset":
                assert int(name) < 3
                fh, _ = fs.call("open", attrs.st_ino, os.O_RDONLY, None)
                value, _ = fs.call("read", fh.fh, 0, 100)
                assert value == [b"zero", b"one", b"two"][int(name)]
                fs.call("release", fh.fh)
        else:
            assert err in (errno.ENOENT, errno.EINVAL), (name, err)
    assert fingerprint(fs.data) == before


@SETTINGS
@given(chunks=st.lists(st.binary(max_size=3000), min_size=1, max_size=5))
def test_random_bytes_into_append(fs, chunks):
    """Each write() appends exactly its complete lines, or fails whole (EMSGSIZE)."""
    log = fs.store.log("t", 1)
    fh, _ = fs.call("open", fs.inode(b"t", b"1", b"append"), os.O_WRONLY, None)
    expected = [r.value for r in log.scan()]
    pending = b""
    for chunk in chunks:
        _, err = fs.call("write", fh.fh, 0, chunk)
        tried("append writes")
        lines = (pending + chunk).split(b"\n")
        if err is None:
            expected += lines[:-1]
            pending = lines[-1]
        else:
            assert err == errno.EMSGSIZE
            assert any(len(line) > 2000 - 100 for line in lines), "refused a fitting write"
        assert [r.value for r in log.scan()] == expected
    _, err = fs.call("flush", fh.fh)  # close(): the partial line becomes a record
    fs.call("release", fh.fh)
    if pending and err is None:
        expected.append(pending)
    assert [r.value for r in log.scan()] == expected


@SETTINGS
@given(key=st.text(max_size=40), value=st.text(max_size=40), merge=st.booleans())
def test_random_config_lines(fs, key, value, merge):
    config = fs.inode(b"t", b"config")
    before = fs.store.topic_overrides("t")
    flags = os.O_WRONLY | (os.O_APPEND if merge else 0)
    fh, _ = fs.call("open", config, flags, None)
    line = f"{key}={value}\n".encode("utf-8", "surrogateescape")
    _, err = fs.call("write", fh.fh, 0, line)
    tried("config lines")
    fs.call("release", fh.fh)
    if err is not None:
        assert err == errno.EINVAL
        assert fs.store.topic_overrides("t") == before
    fs.store.set_topic_config("t", {"max.message.bytes": "2000"} if "max" in before else {})


def test_config_values_with_any_character(fs):
    """Regression: a config line with a character outside Latin-1 (or an
    unknown escape) escaped the handler as UnicodeError and answered EIO."""
    config = fs.inode(b"t", b"config")
    fh, _ = fs.call("open", config, os.O_WRONLY | os.O_APPEND, None)
    assert fs.call("write", fh.fh, 0, "key.separator=→\n".encode()) == (18, None)
    assert fs.store.topic_config("t").key_separator == "→"
    # an escape naming no character, and bytes that are not UTF-8, are refused, not replaced
    for bad in (b"key.separator=\\8\\ud800\n", b"key.separator=\xff\n"):
        assert fs.call("write", fh.fh, 0, bad) == (None, errno.EINVAL)
        assert fs.store.topic_config("t").key_separator == "→"
    fs.call("release", fh.fh)
    fs.store.set_topic_config("t", {"max.message.bytes": "2000"})
    with Store(fs.data, read_only=True) as reopened:  # and it reads back from disk
        assert reopened.topic_overrides("t") == {"max.message.bytes": "2000"}


def test_read_only_files_and_refused_operations(fs):
    before = fingerprint(fs.data)
    p0 = (b"t", b"0")
    read_only = [
        (*p0, b"offset", b"0"), (*p0, b"stream"), (*p0, b"state"),
        (*p0, b"segments", b"00000000000000000000.log"), (*p0, b"time", b"0"),
    ]  # fmt: skip
    directories = [(), (b"t",), p0, (*p0, b"offset"), (*p0, b"segments"), (*p0, b"time")]
    for path in read_only:
        inode = fs.inode(*path)
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
            _, err = fs.call("open", inode, flags, None)
            tried("writes to read-only files")
            assert err in (errno.EACCES, errno.EPERM), (path, err)
        attr = pyfuse3.EntryAttributes()
        attr.st_size = 0
        fields = types.SimpleNamespace(
            update_mode=False, update_uid=False, update_gid=False, update_size=True
        )
        _, err = fs.call("setattr", inode, attr, fields, None, None)
        tried("writes to read-only files")
        assert err == errno.EACCES
    for path in directories:
        _, err = fs.call("open", fs.inode(*path), os.O_RDONLY, None)
        assert err == errno.EISDIR
    append = fs.inode(*p0, b"append")
    for parent in [fs.inode(*d) for d in directories]:
        for method, args in [
            ("create", (parent, b"new", 0o644, os.O_WRONLY, None)),
            ("mknod", (parent, b"node", stat.S_IFREG | 0o644, 0, None)),
            ("symlink", (parent, b"link", b"/etc/passwd", None)),
            ("link", (append, parent, b"hard", None)),
            ("rename", (parent, b"append", parent, b"moved", 0, None)),
            ("rename", (parent, b"t", parent, b"u", 0, None)),
            ("unlink", (parent, b"append", None)),
            ("setxattr", (parent, b"user.x", b"1", None)),
        ]:
            _, err = fs.call(method, *args)
            tried("refused operations")
            assert err in (errno.EPERM, errno.ENOTSUP), (method, err)
    assert fingerprint(fs.data) == before


@pytest.mark.mount
@pytest.mark.timeout(120)
def test_bad_input_through_the_mount(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "max.message.bytes=1000") as daemon:
        os.mkdir(mnt / "t")
        (mnt / "t/0/append").write_bytes(b"ok\n")
        before = fingerprint(data)
        env = {
            **os.environ,
            "M": str(mnt),
            "LONG_LINE": 'import os; os.write(1, b"x" * 5000 + b"\\n")',
        }
        expectations = {
            'cat "$M/t/0/offset/-1"': "No such file",
            'cat "$M/t/0/offset/99999999999999999999999"': "No such file",
            'cat "$M/t/0/offset/abc"': "No such file",
            'cat "$M/t/0/time/x"': "No such file",
            'echo x > "$M/t/0/offset/0"': "Permission denied",
            'echo x > "$M/t/0/stream"': "Permission denied",
            'echo x > "$M/t/0/state"': "Permission denied",
            'mv "$M/t/0/append" "$M/t/0/x"': "Operation not permitted",
            'ln "$M/t/0/append" "$M/t/0/x"': "Operation not permitted",
            'ln -s /etc/passwd "$M/t/0/x"': "Operation not permitted",
            'rm "$M/t/0/append"': "Operation not permitted",
            'mv "$M/t" "$M/u"': "Operation not permitted",
            'touch "$M/t/0/segments/evil"': "Operation not permitted",
            'mkdir "$M/a b"': "Invalid argument",
            'mkdir "$M/a%2Fb"': "Invalid argument",
            'echo bogus=1 >> "$M/t/config"': "Invalid argument",
            'python3 -c "$LONG_LINE" >> "$M/t/0/append"': "too long",
            'cat "$M/t/0/segments/../../../../etc/passwd"': "No such file",
        }
        for script, message in expectations.items():
            done = sh(script, env=env, check=False)
            assert done.returncode != 0 and message in done.stderr, (script, done.stderr)
        # NUL and invalid UTF-8 are just bytes of a value
        (mnt / "t/0/append").write_bytes(b"nul\x00byte\n\xff\xfe invalid utf-8\n")
        assert (mnt / "t/0/offset/1").read_bytes() == b"nul\x00byte"
        assert (mnt / "t/0/offset/2").read_bytes() == b"\xff\xfe invalid utf-8"
        assert set(fingerprint(data)) == set(before)
    assert "Traceback" not in daemon.output()
    report("bad input via mount", inputs_tried=len(expectations) + 1, log_changed=0)
