"""Permissions: with allow_other the mount honours DATA's owner and modes.

The daemon runs as root; another user (uid/gid 65534, via ``setpriv``) tries
to read, append, create topics and follow ``segments/`` links. The mount
shows DATA's owner, group and permission bits, and ``allow_other`` turns on
the kernel's checks (``default_permissions``), so that user can do through
the mount exactly what DATA's modes let them do.
"""

from __future__ import annotations

import os

import pytest
from mount_helpers import Daemon, sh
from stress import report

from logfs import Store
from logfs.daemon import parse_options

pytestmark = [pytest.mark.mount, pytest.mark.timeout(120)]

NOBODY = 65534
TRIED = {"operations": 0}


def as_nobody(script: str, **env) -> tuple[int, str]:
    """Run ``script`` as uid/gid 65534; (exit status, stderr)."""
    done = sh(
        f"setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups bash -c {script!r}",
        check=False,
        env={**os.environ, **env},
    )
    TRIED["operations"] += 1
    return done.returncode, done.stderr


def test_allow_other_turns_on_permission_checks():
    assert "default_permissions" in parse_options({"allow_other": None}).fuse


def test_other_users_get_what_data_allows(shared):
    data, mnt = shared / "data", shared / "mnt"
    with Store(data) as store:
        store.create_topic("t")
        store.log("t", 0).append([b"secret"])
    env = {"M": str(mnt)}
    seg = "$M/t/0/segments/00000000000000000000.log"

    data.chmod(0o755)  # world-readable, writable by root only
    with Daemon(data, mnt, "allow_other", log=shared / "daemon.log"):
        assert as_nobody('cat "$M/t/0/offset/0"', **env) == (0, "")
        assert as_nobody(f'cat "{seg}" > /dev/null', **env)[0] == 0  # through the symlink
        for script in (
            'echo x >> "$M/t/0/append"',
            'mkdir "$M/u"',
            'echo flush.ms=5 >> "$M/t/config"',
        ):
            status, err = as_nobody(script, **env)
            assert status != 0 and "Permission denied" in err, script
        # every link in segments/ points at a file inside DATA, nothing else
        links = os.listdir(mnt / "t/0/segments")
        assert links  # not vacuously true
        for name in links:
            target = os.readlink(mnt / "t/0/segments" / name)
            assert os.path.realpath(target).startswith(str(data.resolve()) + "/")

    data.chmod(0o700)  # root's alone
    with Daemon(data, mnt, "allow_other", log=shared / "daemon.log"):
        for script in (
            'ls "$M"',
            'cat "$M/t/0/offset/0"',
            f'cat "{seg}"',
            'echo x >> "$M/t/0/append"',
        ):
            status, err = as_nobody(script, **env)
            assert status != 0 and "Permission denied" in err, script
        assert (mnt / "t/0/offset/0").read_bytes() == b"secret"  # the owner still can

    for path in [data, *data.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)  # handed over to the other user
    with Daemon(data, mnt, "allow_other", log=shared / "daemon.log"):
        assert as_nobody('echo from-nobody >> "$M/t/0/append"', **env) == (0, "")
        assert as_nobody('mkdir "$M/u" && echo y >> "$M/u/0/append"', **env) == (0, "")
        assert as_nobody('cat "$M/t/0/offset/1"', **env)[0] == 0
        assert (mnt / "t/0/stream").read_bytes() == b"secret\nfrom-nobody\n"
    report("permissions", operations_as_other_user=TRIED["operations"], escapes=0)
