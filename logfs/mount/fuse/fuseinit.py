"""Loads `_fuseinit` (a small C library) before pyfuse3, so that the mount asks
the kernel for FUSE's ``handle_killpriv_v2`` and ``cache_symlinks``, turns its
``auto_inval_data`` off, can take one-line ``write()``s before pyfuse3 does (see
``_fuseinit.c``), can have the kernel keep a directory's listing
(`keep_listing`) and can take requests over io_uring (``-o io_uring``,
``_fusering.c``).

Without it the kernel asks for a file's ``security.capability`` attribute before
every ``write()`` through its page cache: a round trip per line in the buffered
mode (``-o acks=0``, docs/mount.md). Loaded with ``RTLD_GLOBAL`` ahead of
pyfuse3, the library's ``fuse_session_mount`` is the one pyfuse3 calls. It must
come first: once pyfuse3 is imported its calls are bound to libfuse, and the
mount works as before (`asked` then stays False, and the daemon says so).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

import trio

_library: ctypes.CDLL | None = None


def _load() -> ctypes.CDLL | None:
    if "pyfuse3" in sys.modules:
        return None
    spec = importlib.util.find_spec(f"{__package__}._fuseinit")
    if spec is None or spec.origin is None:
        return None  # not built (a source checkout without its build step)
    return ctypes.CDLL(spec.origin, mode=os.RTLD_GLOBAL)


def asked() -> bool:
    """Whether this process's mount asked the kernel for ``handle_killpriv_v2``."""
    if _library is None:
        return False
    return bool(ctypes.c_int.in_dll(_library, "logfs_killpriv_v2_asked").value)


# _fusering.h's `enum ring_state`.
RING_STATES = ("off", "asked", "not offered", "on", "failed")


def use_io_uring(on: bool, spin_us: int = 0) -> bool:
    """Before the mount: have it ask the kernel for FUSE over io_uring (``-o io_uring``),
    watching the ring ``spin_us`` for a writer's next line before it sleeps
    (``-o io_uring_spin_us``). False where the library is not in use (the mount then
    goes over /dev/fuse)."""
    if _library is None:
        return False
    ctypes.c_long.in_dll(_library, "logfs_ring_spin_ns").value = spin_us * 1000 if on else 0
    ctypes.c_int.in_dll(_library, "logfs_ring_state").value = RING_STATES.index(
        "asked" if on else "off"
    )
    return True


def io_uring() -> tuple[str, int]:
    """What became of FUSE over io_uring in this process's mount (one of `RING_STATES`)
    and the errno that made it fail (0: none)."""
    if _library is None:
        return "off", 0
    state = ctypes.c_int.in_dll(_library, "logfs_ring_state").value
    return RING_STATES[state], ctypes.c_int.in_dll(_library, "logfs_ring_errno").value


def set_write_hook(owner: object | None, hooks: object | None) -> bool:
    """Have ``owner`` (a `LineWrites`, mount/fuse/_lines.pyx) see each WRITE request whose
    data is exactly one line before pyfuse3 does, through ``hooks`` (its C functions in a
    capsule, `LineWrites.hooks`): its take answers -1 to leave the request to pyfuse3,
    0 once the line is in the log's file, or an errno; after an answer of 0 the
    request is answered and its books kept. Both run inside pyfuse3's receive, on
    the trio thread, and never raise or wait. None twice removes them. False where
    the library is not in use (the mount then works without it)."""
    if _library is None:
        return False
    module = importlib.import_module(f"{__package__}._fuseinit")  # the library loaded above
    module.set_write_hook(owner, hooks)
    return True


def keep_listing(fh: int, keep: bool) -> None:
    """Have the kernel keep the listing it reads through open directory ``fh``
    (FUSE's ``cache_readdir``) and, if ``keep``, answer from the one it kept
    (``keep_cache``; else it drops that one at this open). Called last in the
    OPENDIR handler, whose answer names ``fh`` (``_fuselisting.c``). Without the
    library the kernel keeps no listing."""
    if _library is not None:
        importlib.import_module(f"{__package__}._fuseinit").keep_listing(fh, keep)


def set_loop_fd(fd: int) -> None:
    """While one-line ``write()``s come one after the other, the library waits for
    the next one until ``fd`` is readable, which `loop_fd` is when the loop has
    work; -1: it waits briefly instead (``_fuseinit.c``, ``read_request``)."""
    if _library is not None:
        importlib.import_module(f"{__package__}._fuseinit").set_loop_fd(fd)


def loop_fd() -> int:
    """The running trio loop's epoll descriptor, readable when one of the loop's
    sockets, its signal wake-up or a thread's result is ready for it. It is
    private to trio (``Runner.io_manager._epoll`` from trio 0.22 to 0.35): -1
    where trio keeps it elsewhere."""
    try:
        epoll = trio._core._run.GLOBAL_RUN_CONTEXT.runner.io_manager._epoll
    except AttributeError:  # moved, or no loop running
        return -1
    return epoll.fileno()


_library = _load()
