"""Deleting partition directories: all of a topic's or none, and finished
after a crash.

A topic is deleted as Kafka deletes a partition: each directory is renamed
aside to ``<topic>-<partition>.<uuid>-delete`` (the topic shortened so that
the name fits 255 bytes, as Kafka shortens it), then removed. Every rename
comes first: if one fails, those done are renamed back and the topic stays
whole. While a deletion is under way its topic is marked by an empty file,
``DATA/.deleting-<sha1 of the topic name>``, so that a crash in between is
finished when a writer next opens DATA (`finish_deletions`): the marked
topics' remaining directories and settings files are removed (found by
hashing the names of the partition directories and settings files), and so
are all ``-delete`` directories. An empty file takes no data block, so a
topic can be deleted on a full disk, the way to make room. (``DATA/.deleting``,
a topic a line, as earlier versions marked them, is read and finished too.)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from ..storage import fsync_dir
from .topics import CONFIG_DIR, NAME_MAX, PROPERTIES

logger = logging.getLogger(__name__)

DELETING_FILE = ".deleting"  # + "-<sha1 of the topic>"; alone: the earlier list of topics
DELETE_DIR = re.compile(r".*-(0|[1-9][0-9]*)\.[0-9a-f]{32}-delete")


def delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-delete``, the topic cut to fit 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: NAME_MAX - len(suffix)] + suffix


def delete_partitions(
    data: Path, topic: str, partitions: Iterable[int], forget: Callable[[], None] | None = None
) -> Callable[[], None]:
    """Remove ``topic``'s directories of ``partitions``: all renamed aside, then
    ``forget`` called (the caller drops the topic); returns their removal, which
    the caller runs in any thread (a daemon: off its loop). If a rename fails,
    the ones done are renamed back and the error raised.

    ``forget`` given: the whole topic goes, and is marked as being deleted until
    it is forgotten; a crash after that leaves only ``-delete`` directories, which
    the next open removes.
    """
    if forget is not None:
        _mark(data, topic, True)
    asides: list[tuple[Path, Path]] = []
    try:
        for p in partitions:
            source = data / f"{topic}-{p}"
            aside = data / delete_dir_name(topic, p)
            try:
                os.rename(source, aside)
            except FileNotFoundError:
                continue  # never made (a creation that failed): nothing to remove
            asides.append((source, aside))
    except OSError:
        for source, aside in reversed(asides):
            with contextlib.suppress(OSError):
                os.rename(aside, source)
        if forget is not None:
            with contextlib.suppress(OSError):
                _mark(data, topic, False)
        raise
    if forget is not None:
        forget()
        with contextlib.suppress(OSError):  # if so, the next open finishes it
            _mark(data, topic, False)
    return functools.partial(_remove, [aside for _, aside in asides])


def _remove(asides: list[Path]) -> None:
    for aside in asides:
        shutil.rmtree(aside, ignore_errors=True)


def finish_deletions(data: Path) -> None:
    """Finish what an interrupted deletion left (a writer's open)."""
    marked = {e.name[len(DELETING_FILE) + 1 :] for e in os.scandir(data) if _is_marker(e.name)}
    marked |= {_digest(t) for t in _listed(data)}
    if marked:
        for entry in os.scandir(data):
            name, _, p = entry.name.rpartition("-")
            if p.isdigit() and _digest(name) in marked and entry.is_dir():
                logger.info("finishing the deletion of topic %r", name)
                os.rename(entry.path, data / delete_dir_name(name, int(p)))
        config = data / CONFIG_DIR
        for entry in os.scandir(config) if config.is_dir() else ():
            stem = entry.name.removesuffix(PROPERTIES)
            # `settings_file_name`: <topic>.properties, or <190 chars>.<sha1>.properties
            if stem != entry.name and (_digest(stem) in marked or stem[-40:] in marked):
                os.unlink(entry.path)
    for entry in os.scandir(data):
        if DELETE_DIR.fullmatch(entry.name) and entry.is_dir():
            shutil.rmtree(entry.path, ignore_errors=True)
    for entry in os.scandir(data):
        if _is_marker(entry.name) or entry.name == DELETING_FILE:
            os.unlink(entry.path)


def _digest(topic: str) -> str:
    return hashlib.sha1(topic.encode()).hexdigest()


def _is_marker(name: str) -> bool:
    return name.startswith(DELETING_FILE + "-") and len(name) == len(DELETING_FILE) + 41


def _listed(data: Path) -> list[str]:
    try:
        return [t for t in (data / DELETING_FILE).read_text().splitlines() if t]
    except FileNotFoundError:
        return []


def _mark(data: Path, topic: str, deleting: bool) -> None:
    """Mark ``topic`` as being deleted, durably, or unmark it: an empty file
    made or removed, no data block written."""
    marker = data / f"{DELETING_FILE}-{_digest(topic)}"
    if deleting:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644))
    else:
        marker.unlink(missing_ok=True)
    fsync_dir(data)
