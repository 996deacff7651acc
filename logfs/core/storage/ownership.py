"""What a topic's owner makes of its partition directories on disk, so that
reading DATA directly (``strings DATA/<topic>-0/*.log``) is allowed to exactly
those the topic lets read through the mount, and to no one else::

    DATA/<topic>-<p>/   owner: the daemon's user (root), rwx: only the daemon writes DATA
                        group: the topic's group; r-x when the topic's mode gives its
                               group both r and x (what reading its files takes), else none
                        others: r-x when the topic's mode gives others both, else none

The directory is the gate: a user without r-x on it reaches none of the files
in it, whatever their own bits, so every file the daemon makes there later (a
segment at a roll, the cleaner's swapped segments, indexes rebuilt by
recovery, producer snapshots) is covered from the moment it exists, and no
file needs its own owner. The directory stays the daemon's: a topic's owner
who owned it could chmod it, write into DATA and plant links the daemon would
follow. Its owner reads its records through the mount (or is in its group).
"""

from __future__ import annotations

import os
import stat

READ_SEARCH = 0o5


def directory_mode(mode: int) -> int:
    """A partition directory's bits for a topic with ``mode``."""
    bits = 0o700
    for shift in (3, 0):  # group, others: both r and x, or nothing
        if mode >> shift & READ_SEARCH == READ_SEARCH:
            bits |= READ_SEARCH << shift
    return bits


def own_directory(directory: str, gid: int, mode: int) -> bool:
    """Give a partition directory the group and bits of a topic of group
    ``gid`` and ``mode``; whether anything changed. The group is given only
    by a daemon running as root (another cannot chown)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        changed = False
        uid = os.geteuid()
        if uid == 0 and (st.st_uid, st.st_gid) != (0, gid):
            os.fchown(fd, 0, gid)
            changed = True
        if stat.S_IMODE(st.st_mode) != directory_mode(mode):
            os.fchmod(fd, directory_mode(mode))
            changed = True
        return changed
    finally:
        os.close(fd)


def disagreement(directory: str, gid: int, mode: int) -> str | None:
    """What of a partition directory does not carry its topic's group and
    ``mode`` (`logfs check`), or None."""
    st = os.stat(directory, follow_symlinks=False)
    have = (st.st_gid, stat.S_IMODE(st.st_mode))
    want = (gid if os.geteuid() == 0 else st.st_gid, directory_mode(mode))
    if have == want:
        return None
    return (
        f"{directory}: group {have[0]} mode {have[1]:04o} on disk, "
        f"its topic's owner implies group {want[0]} mode {want[1]:04o}"
    )
