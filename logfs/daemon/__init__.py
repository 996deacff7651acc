"""What starts and stops a daemon: the one place that wires the faces.

A `Daemon` builds the store, one group coordinator, the flusher and the log
cleaner (background tasks of the daemon, not of FUSE), and the faces asked
for: the FUSE mount (logfs/mount) and/or the Kafka listener (logfs/kafka),
and runs them together in one nursery until it is stopped; `mount`, `umount`
and `serve` are the commands ``logfs mount``, ``logfs umount`` and ``logfs
serve`` over it. The only room besides the command line that imports faces.
"""

from .cleaner_task import Cleaner
from .commands import (
    daemon_main,
    is_mounted,
    keep_freed_memory,
    mount,
    mount_type,
    run_daemon,
    serve,
    umount,
)
from .daemon import Daemon
from .flusher import Flusher
from .options import MountOptions, parse_options

__all__ = [
    "Cleaner",
    "Daemon",
    "Flusher",
    "MountOptions",
    "daemon_main",
    "is_mounted",
    "keep_freed_memory",
    "mount",
    "mount_type",
    "parse_options",
    "run_daemon",
    "serve",
    "umount",
]
