"""Waiting on a condition with a deadline, never for a fixed time."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, timeout: float = 10, poll: float = 0.02) -> T:
    """The first true value of ``condition()``.

    Raises:
        AssertionError: naming ``what``, if it is not true within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(poll)
    return value


def holds_open(pid: int, path: os.PathLike | str) -> bool:
    """Whether process ``pid`` has ``path`` open (the same inode, not a similar name)."""
    target = os.stat(path)
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        try:
            st = os.stat(f"{fds}/{fd}")
        except OSError:  # closed meanwhile, or a socket or pipe of another namespace
            continue
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            return True
    return False
