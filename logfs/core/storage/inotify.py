"""Changes to directories' entries as the kernel reports them (Linux inotify,
called through libc: the standard library has no binding).

An event, as ``read(2)`` returns it from the inotify descriptor: a fixed
header and the name, NUL-padded::

    int32   wd       the watch it belongs to (what `DirectoryWatch.add` returned)
    uint32  mask     what happened (the IN_* bits below)
    uint32  cookie   pairs IN_MOVED_FROM with IN_MOVED_TO (unused here)
    uint32  len      bytes of name that follow, padding included
    char    name[len]

The kernel queues events until they are read, up to
``/proc/sys/fs/inotify/max_queued_events`` per descriptor; past that it drops
them and queues one IN_Q_OVERFLOW, so a reader that falls behind learns that it
did and must look at everything again. Each watched directory takes one of the
user's ``max_user_watches``; `add` fails with ENOSPC once they are used up.
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import NamedTuple

IN_ATTRIB = 0x00000004  # metadata, the link count among them, changed
IN_MOVED_FROM = 0x00000040  # an entry renamed away from the directory (or within it)
IN_MOVED_TO = 0x00000080  # an entry renamed into the directory, over any file of that name
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200  # an entry unlinked
IN_DELETE_SELF = 0x00000400  # the watched directory itself removed
IN_MOVE_SELF = 0x00000800  # the watched directory itself renamed
IN_Q_OVERFLOW = 0x00004000  # events were dropped
IN_IGNORED = 0x00008000  # the watch is gone (its directory was removed, or `remove`)
IN_ONLYDIR = 0x01000000  # for `add`: only if the path is a directory
IN_ISDIR = 0x40000000  # the entry is a directory

EVENT = struct.Struct("=iIII")  # wd, mask, cookie, len; the name follows
READ_BYTES = 64 * 1024  # one read: about a thousand events with segment-sized names

_libc = ctypes.CDLL(None, use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]


class Event(NamedTuple):
    """One event: its watch, what happened (IN_* bits) and the entry's name
    (empty for events of the watched directory itself)."""

    wd: int
    mask: int
    name: str


def _checked(result: int, what: str, path: str | None = None) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}", path)
    return result


class DirectoryWatch:
    """One inotify descriptor, non-blocking: watches added and removed by
    path, events read in batches of at most `READ_BYTES`.

    Raises:
        OSError: the kernel refused a new descriptor (``max_user_instances``).
    """

    def __init__(self) -> None:
        self.fd = _checked(_libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC), "inotify_init1")

    def fileno(self) -> int:
        return self.fd

    def add(self, path: str | os.PathLike, mask: int) -> int:
        """Watch the directory ``path`` for ``mask``'s events; its watch number.

        Raises:
            OSError: ENOENT (gone), ENOTDIR, ENOSPC (``max_user_watches`` used up).
        """
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask | IN_ONLYDIR)
        return _checked(wd, "inotify_add_watch", str(path))

    def remove(self, wd: int) -> None:
        """Stop the watch ``wd`` (its IN_IGNORED event follows); one already gone is fine."""
        _libc.inotify_rm_watch(self.fd, wd)

    def read(self) -> list[Event]:
        """The events queued now, at most one read's worth (none: nothing queued)."""
        try:
            data = os.read(self.fd, READ_BYTES)
        except BlockingIOError:
            return []
        events, at = [], 0
        while at + EVENT.size <= len(data):
            wd, mask, _cookie, length = EVENT.unpack_from(data, at)
            at += EVENT.size
            name = data[at : at + length].rstrip(b"\0")
            at += length
            events.append(Event(wd, mask, os.fsdecode(name)))
        return events

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> DirectoryWatch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
