"""What partial lines may cost the daemon: each topic's max.message.bytes under
the data directory's ceiling, which a topic's owner cannot pass through any
face, and one budget per mount for the partial lines all open append files
hold together (ENOBUFS past it, nothing appended or held)."""

from __future__ import annotations

import errno
import os

import pyfuse3
import pytest
from test_operations import FS, fuse_error

from logfs import Store
from logfs.core.errors import PolicyViolationError
from logfs.core.log import Limits
from logfs.core.tools.offline import check

CEILING = 2 << 20  # over the default max.message.bytes (1048588)


@pytest.fixture
def fs(tmp_path):
    store = Store(tmp_path / "data", limits=Limits(max_message_bytes=CEILING))
    fs = FS(store, partitions=1)
    fs.call("mkdir", pyfuse3.ROOT_INODE, b"t", 0o755, None)
    yield fs
    store.close()
    assert check(tmp_path / "data") == []


def test_max_message_bytes_stops_at_the_ceiling_on_every_path(fs, tmp_path):
    store = fs.store
    store.set_topic_config("t", {"max.message.bytes": str(CEILING)})  # up to it: fine
    with pytest.raises(PolicyViolationError, match="logfs.max.message.bytes.ceiling=2097152"):
        store.set_topic_config("t", {"max.message.bytes": str(CEILING + 1)})
    assert store.topic_overrides("t") == {"max.message.bytes": str(CEILING)}
    with pytest.raises(PolicyViolationError):
        store.create_topic("big", 1, {"max.message.bytes": str(2**31 - 1)})
    assert "big" not in store.topics()
    with pytest.raises(PolicyViolationError):
        store.set_defaults({"max.message.bytes": str(CEILING * 2)})
    # the mount's config file: EPERM, the configuration as it was
    with fuse_error(errno.EPERM):
        fs.write("t/config", b"max.message.bytes=2147483647\n", flags=os.O_WRONLY)
    assert store.topic_config("t").max_message_bytes == CEILING
    with pytest.raises(PolicyViolationError):  # nor can a daemon start with such a default
        Store(tmp_path / "other", defaults={"max.message.bytes": str(CEILING + 1)},
              limits=Limits(max_message_bytes=CEILING))  # fmt: skip


def test_partial_lines_of_all_open_files_share_one_budget(fs):
    budget = fs.ops.view.partial_lines
    budget.capacity = 1000  # the mount's budget, small
    a, b = fs.open("t/0/append", os.O_WRONLY), fs.open("t/0/append", os.O_WRONLY)
    assert fs.call("write", a, 0, b"x" * 600) == 600  # held: a partial line
    with fuse_error(errno.ENOBUFS):
        fs.call("write", b, 0, b"whole line\n" + b"y" * 600)  # would hold 1200 in all
    assert fs.values("t") == []  # nothing of the refused write() appended
    assert fs.call("write", b, 0, b"y" * 300) == 300  # what is left is lent
    with fuse_error(errno.ENOBUFS):
        fs.call("write", a, 0, b"x" * 200)  # nor may a file grow its own past it
    assert fs.call("write", a, 0, b"x\n") == 2  # a's line ends: its share goes back
    assert budget.used == 300
    assert fs.call("write", b, 0, b"y" * 600) == 600
    fs.close(b)  # close: b's partial line is a record, its share back
    fs.close(a)
    assert budget.used == 0
    assert fs.values("t") == [b"x" * 601, b"y" * 900]


def test_a_deleted_topic_s_files_give_their_share_back(fs):
    budget = fs.ops.view.partial_lines
    fh = fs.open("t/0/append", os.O_WRONLY)
    fs.call("write", fh, 0, b"partial")
    assert budget.used == len(b"partial")
    fs.call("rmdir", pyfuse3.ROOT_INODE, b"t", None)
    with fuse_error(errno.ESTALE):
        fs.call("flush", fh)
    fs.call("release", fh)
    assert budget.used == 0
