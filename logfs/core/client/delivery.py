"""Handing whole batches to the one writer of a data directory.

A data directory has one writer at a time: the daemon of a live mount, or a
process holding ``DATA/.lock``. `open_writer` finds it the way a producer
must: the live mount if its record says there is one (mountinfo.py), else the
store opened for writing, waiting for the lock and switching to a mount that
becomes live meanwhile. Then:

- `append_through_mount` writes a partition's batches to
  ``MNT/<topic>/<p>/append.batches`` (opened read-write): whole batches, as
  many per ``write()`` as fit FUSE's 1 MiB ``max_write``, fsyncs, and reads
  back the receipt lines ``<partition> <first offset> <last offset>``, one
  per ``write()``;
- `append_to_store` is `Log.append_batches`; closing the store fsyncs.

Errors are the store's `LogfsError` classes either way: the mount's errno is
turned back into the class the store would have raised.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable, Sequence

from ..config import TopicConfig
from ..errors import DataDirBusyError, LogfsError, TopicExistsError
from ..log.store import Store
from . import mountinfo
from .names import APPEND_BATCHES, ERRORS, MAX_WRITE

# What a mount answers once its daemon is gone.
GONE = {errno.ENOTCONN, errno.ECONNABORTED}


class ProducerError(LogfsError):
    """Batches could not be delivered (a closed producer, a mount that went away)."""


class MountGone(Exception):
    """The mount went away before anything was written: try the next writer."""


def open_writer(
    data: str, lock_timeout: float, mount_timeout: float
) -> Store | mountinfo.MountRecord:
    """The live mount's record, else ``data`` opened for writing (the caller
    closes it). While the lock is busy, a mount that becomes live is taken.

    Raises:
        DataDirBusyError: after ``lock_timeout`` seconds.
        LogfsError: the store's error opening DATA.
    """
    deadline = time.monotonic() + lock_timeout
    while True:
        record = mountinfo.live_record(data, mount_timeout)
        if record is not None:
            return record
        try:
            return Store(data)
        except DataDirBusyError:
            if time.monotonic() >= deadline:
                raise
        time.sleep(0.05)


def read_topic(data: str, topic: str, mount_timeout: float) -> tuple[int, TopicConfig] | None:
    """``topic``'s partition count and effective configuration, read from DATA
    without a lock (the live mount's ``-o`` defaults count); None if it does
    not exist."""
    record = mountinfo.live_record(data, mount_timeout)
    if not os.path.isdir(data):
        return None
    defaults = record.defaults if record is not None else None
    with Store(data, read_only=True, defaults=defaults) as store:
        if topic not in store.topics():
            return None
        return len(store.partitions(topic)), store.topic_config(topic)


def create_topic(data: str, topic: str, lock_timeout: float, mount_timeout: float) -> None:
    """Create ``topic`` through the writer of DATA: ``mkdir`` on the live mount
    (its ``partitions=N``), else the store with one partition, as Kafka's
    ``auto.create.topics.enable``. A topic another writer just created is fine."""
    record = mountinfo.live_record(data, mount_timeout)
    if record is not None:
        try:
            os.mkdir(os.path.join(record.mountpoint, topic))
            return
        except FileExistsError:
            return
        except OSError as e:
            if e.errno not in GONE:
                raise mount_error(e, f"creating topic {topic!r} in {record.mountpoint}") from e
    store = open_writer(data, lock_timeout, mount_timeout)
    if isinstance(store, mountinfo.MountRecord):  # a mount started meanwhile
        return create_topic(data, topic, lock_timeout, mount_timeout)
    with store, contextlib.suppress(TopicExistsError):
        store.create_topic(topic, partitions=1)


def append_to_store(store: Store, topic: str, partition: int, batches: Sequence[bytes]) -> int:
    """`Log.append_batches`: the first offset assigned."""
    return store.log(topic, partition).append_batches(batches)


def append_through_mount(
    data: str,
    mountpoint: str,
    topic: str,
    partition: int,
    batches: Sequence[bytes],
    receipt: Callable[[int, int, int], None],
    mount_timeout: float = mountinfo.XATTR_TIMEOUT,
) -> int:
    """Write ``batches`` to the partition's ``append.batches`` and fsync it.

    ``receipt(partition, first, last)`` is called for each receipt read back,
    also those of the writes before a failure. Returns the records acknowledged.

    Raises:
        MountGone: the mount went away before anything was written.
        ProducerError: it went away during the writes (their fate is unknown).
        LogfsError: the class the store would have raised for what the mount refused.
    """
    path = os.path.join(mountpoint, topic, str(partition), APPEND_BATCHES)
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as e:
        if e.errno in GONE or mountinfo.live_record(data, mount_timeout) is None:
            raise MountGone(path) from e
        raise mount_error(e, f"opening {path}") from e
    error = None
    try:
        for chunk in chunks(batches, MAX_WRITE):
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as e:
        error = e
    try:
        appended = _read_receipts(fd, receipt)
    except OSError as e:
        error, appended = error or e, 0
    finally:
        try:
            os.close(fd)
        except OSError as e:
            error = error or e
    if error is None:
        return appended
    # A dying daemon's last answers are not all ENOTCONN: a request the kernel
    # was copying to it when it died ends with EIO.
    if error.errno in GONE or mountinfo.live_record(data, mount_timeout) is None:
        raise ProducerError(
            f"the mount went away while writing to {path}: of {len(batches)} batches, "
            f"those without a receipt may or may not have been appended"
        ) from error
    raise mount_error(error, f"writing to {path}") from error


def _read_receipts(fd: int, receipt: Callable[[int, int, int], None]) -> int:
    text = b""
    while chunk := os.read(fd, 65536):  # an empty read: no receipt pending
        text += chunk
    appended = 0
    for line in text.decode().splitlines():
        partition, first, last = map(int, line.split())
        receipt(partition, first, last)
        appended += last - first + 1
    return appended


def chunks(batches: Sequence[bytes], limit: int) -> Iterable[bytes]:
    """Whole batches joined into writes of at most ``limit`` bytes (a larger batch alone)."""
    group: list[bytes] = []
    size = 0
    for batch in batches:
        if group and size + len(batch) > limit:
            yield b"".join(group)
            group, size = [], 0
        group.append(batch)
        size += len(batch)
    if group:
        yield b"".join(group)


def mount_error(e: OSError, doing: str) -> LogfsError:
    """The store's error class for what the mount answered ``doing`` something."""
    return ERRORS.get(e.errno, ProducerError)(f"{doing}: {e.strerror}")
