"""Finding the live mount of a data directory: the mount record.

While a writable mount runs, its daemon keeps one small JSON file in DATA,
``DATA/logfs-mount.json``, so that other writers on the same machine (the
`Producer`, the Spark sink) can hand their batches to the one writer of DATA
instead of waiting for its lock::

    {
      "version": 1,
      "mountpoint": "/mnt/logs",            the mount point, absolute, symlinks resolved
      "data": "/srv/logfs/data",             DATA, absolute (also the mount's fsname)
      "pid": 4242,                           the daemon's pid
      "pid_start_ticks": 1234567,            field 22 of /proc/<pid>/stat: when that pid started
      "boot_id": "0f6e...",                  /proc/sys/kernel/random/boot_id at mount time
      "started_ms": 1732230000000,           when the mount became ready, epoch ms
      "partitions": 1,                       partitions of a topic made by mkdir (-o partitions=N)
      "defaults": {"flush.ms": "500"},       the mount-wide topic defaults (-o key=value)
      "kafka": "127.0.0.1:9092"              the daemon's Kafka listener (docs/kafka.md), or null
    }

`logfs serve` (Kafka's protocol without FUSE) writes one too, with an empty
mount point: never live for writers, it tells where the listener is.

It is written atomically (a temporary file renamed over it) once the mount is
in the mount table, and removed first thing at a clean shutdown. A daemon that
is killed leaves it behind, so a reader never trusts it alone: the record is
*live* only if all of these hold, else it is *stale* and ignored (the next
mount replaces it; readers never delete it, since a new daemon may be writing
a fresh one at that moment):

1. it names this data directory (a copied data dir carries a copied record);
2. it was written since the last boot, and a process with its pid is alive
   and started at the recorded time (pids are reused);
3. ``/proc/self/mountinfo`` shows a ``fuse.logfs`` mount of DATA on its mount
   point (read from the file: stat'ing a dead or hung mount point fails or
   blocks forever);
4. the mount root's ``user.logfs.pid`` attribute is that pid. This is the
   one check that asks the mount itself, so it runs in a thread with a
   timeout: a hung daemon makes the record stale instead of hanging the
   caller.

Read-only mounts (``-o ro``) write no record: they cannot take appends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from typing import NamedTuple

from .names import PID_XATTR

RECORD_FILE = "logfs-mount.json"
VERSION = 1
FSTYPE = "fuse.logfs"
XATTR_TIMEOUT = 5.0  # seconds; a live daemon answers in well under a millisecond


class MountRecord(NamedTuple):
    """The contents of ``DATA/logfs-mount.json`` (see the module docstring)."""

    mountpoint: str
    data: str
    pid: int
    pid_start_ticks: int
    boot_id: str
    started_ms: int
    partitions: int = 1
    defaults: Mapping[str, str] = {}
    kafka: str | None = None  # HOST:PORT of the daemon's Kafka listener, if it has one


class MountEntry(NamedTuple):
    """One line of /proc/self/mountinfo, the fields logfs needs."""

    mountpoint: str
    fstype: str
    source: str


# ---------------------------------------------------------------- the process and the mount table


def process_start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
            fields = f.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22, starttime


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as \ooo octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mount_fields(target: str) -> list[str] | None:
    """The fields of /proc/self/mountinfo's line of the mount on ``target``; the
    topmost when several are stacked. Never touches the mount point itself."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if _unescape(fields[4]) == target:
                found = fields
    return found


def mount_entry(mountpoint: str) -> MountEntry | None:
    """The mount on ``mountpoint`` (absolute), from /proc/self/mountinfo; the
    topmost when several are stacked. Never touches the mount point itself."""
    target = os.path.abspath(mountpoint)
    fields = _mount_fields(target)
    if fields is None:
        return None
    rest = fields[fields.index("-") + 1 :]
    return MountEntry(target, rest[0], _unescape(rest[1]) if len(rest) > 1 else "")


def mount_device(mountpoint: str) -> str | None:
    """The ``major:minor`` of the mount on ``mountpoint`` (absolute), as
    `mount_entry` finds it; its name under /sys/class/bdi."""
    fields = _mount_fields(os.path.abspath(mountpoint))
    return None if fields is None else fields[2]


def mount_pid(mountpoint: str, timeout: float = XATTR_TIMEOUT) -> int | None:
    """The daemon's pid from the mount root's ``user.logfs.pid`` attribute, or
    None (no answer, not logfs, dead mount). Asked in a daemon thread, given up
    after ``timeout`` seconds: a hung mount must not hang the caller."""
    result: list[int] = []

    def ask() -> None:
        with contextlib.suppress(OSError, ValueError):
            result.append(int(os.getxattr(mountpoint, PID_XATTR)))

    thread = threading.Thread(target=ask, name="logfs-mount-pid", daemon=True)
    thread.start()
    thread.join(timeout)
    return result[0] if result else None


# ---------------------------------------------------------------- the record


def record_path(data: str | os.PathLike) -> str:
    return os.path.join(os.fspath(data), RECORD_FILE)


def write_record(
    data: str | os.PathLike,
    mountpoint: str,
    *,
    partitions: int = 1,
    defaults: Mapping[str, str] | None = None,
    kafka: str | None = None,
) -> MountRecord:
    """Write this process's record for a mount of ``data`` on ``mountpoint``.

    Call it once the mount is in the mount table and before any request can
    need it answered: it never touches the mount point. Not fsynced: after a
    power failure a missing record only sends writers to the store, and a
    stale one is recognised as such.
    """
    pid = os.getpid()
    record = MountRecord(
        mountpoint=os.path.abspath(mountpoint) if mountpoint else "",
        data=os.path.abspath(data),
        pid=pid,
        pid_start_ticks=process_start_ticks(pid) or 0,
        boot_id=boot_id(),
        started_ms=int(time.time() * 1000),
        partitions=partitions,
        defaults=dict(defaults or {}),
        kafka=kafka,
    )
    path = record_path(data)
    tmp = f"{path}.{pid}.tmp"
    with open(tmp, "w") as f:
        json.dump({"version": VERSION, **record._asdict()}, f, indent=2, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)
    return record


def remove_record(data: str | os.PathLike, pid: int | None = None) -> bool:
    """Remove the record if it is this process's (or ``pid``'s): the pid and its
    start time both the record's (a pid may be another process's now); True if
    removed. Another daemon's record is never removed."""
    pid = os.getpid() if pid is None else pid
    record = read_record(data)
    if record is None or record.pid != pid:
        return False
    if record.pid_start_ticks != (process_start_ticks(pid) or 0):
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record_path(data))
    return True


def read_record(data: str | os.PathLike) -> MountRecord | None:
    """The record as written, live or stale; None if missing or unreadable."""
    try:
        with open(record_path(data), "rb") as f:
            fields = json.loads(f.read())
        if fields.pop("version", None) != VERSION:
            return None
        record = MountRecord(**fields)
        if not (isinstance(record.pid, int) and isinstance(record.mountpoint, str)):
            return None
        return record
    except (OSError, ValueError, TypeError):
        return None


def stale_reason(
    data: str | os.PathLike, record: MountRecord, timeout: float = XATTR_TIMEOUT
) -> str | None:
    """Why ``record`` does not describe a live mount of ``data``, or None if it does."""
    try:
        if not os.path.samefile(record.data, data):
            return f"the record names another data directory, {record.data}"
    except OSError:
        return f"the record names {record.data}, which is gone"
    if record.boot_id != boot_id():
        return "the record was written before the last boot"
    started = process_start_ticks(record.pid)
    if started is None:
        return f"the daemon (pid {record.pid}) is not running"
    if started != record.pid_start_ticks:
        return f"pid {record.pid} is another process now"
    entry = mount_entry(record.mountpoint)
    if entry is None or entry.fstype != FSTYPE:
        return f"{record.mountpoint} is not a logfs mount any more"
    if entry.source != record.data:
        return f"{record.mountpoint} is a mount of {entry.source}"
    answered = mount_pid(record.mountpoint, timeout)
    if answered is None:
        return f"{record.mountpoint} does not answer (a dead or hung daemon)"
    if answered != record.pid:
        return f"{record.mountpoint} is served by pid {answered}, not {record.pid}"
    return None


def live_record(data: str | os.PathLike, timeout: float = XATTR_TIMEOUT) -> MountRecord | None:
    """The record of the live writable mount of ``data``, or None."""
    record = read_record(data)
    if record is None or stale_reason(data, record, timeout) is not None:
        return None
    return record


def live_mount(data: str | os.PathLike, timeout: float = XATTR_TIMEOUT) -> str | None:
    """The mount point of the live writable mount of ``data``, or None."""
    record = live_record(data, timeout)
    return None if record is None else record.mountpoint
