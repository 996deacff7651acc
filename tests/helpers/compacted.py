"""What a consumer of a compacted topic keeps, the model the cleaner's tests
check the log against (core/log/test_cleaner.py, mount/test_cleaner_mount.py)."""

from __future__ import annotations


def latest(log) -> dict[bytes, bytes]:
    """What a consumer reading the whole log keeps: the last value per key,
    a tombstone deleting it."""
    view: dict[bytes, bytes] = {}
    for record in log.scan():
        if record.value is None:
            view.pop(record.key, None)
        else:
            view[record.key] = record.value
    return view
