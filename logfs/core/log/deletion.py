"""Deleting partition directories: all of a topic's or none, and finished
after a crash.

A topic is deleted as Kafka deletes a partition: each directory is renamed
aside to ``<topic>-<partition>.<uuid>-delete`` (the topic shortened so that
the name fits 255 bytes, as Kafka shortens it), then removed. Every rename
comes first: if one fails, those done are renamed back and the topic stays
whole. While a deletion is under way its topic is listed in
``DATA/.deleting``, so that a crash in between is finished when a writer
next opens DATA (`finish_deletions`): the topic's remaining directories and
its settings file are removed, and so are all ``-delete`` directories.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from .checkpoints import replace_file
from .topics import CONFIG_DIR, NAME_MAX, settings_file_name

logger = logging.getLogger(__name__)

DELETING_FILE = ".deleting"
DELETE_DIR = re.compile(r".*-(0|[1-9][0-9]*)\.[0-9a-f]{32}-delete")


def delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-delete``, the topic cut to fit 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: NAME_MAX - len(suffix)] + suffix


def delete_partitions(
    data: Path, topic: str, partitions: Iterable[int], forget: Callable[[], None] | None = None
) -> None:
    """Remove ``topic``'s directories of ``partitions``: all renamed aside, then
    ``forget`` called (the caller drops the topic), then removed. If a rename
    fails, the ones done are renamed back and the error raised.

    ``forget`` given: the whole topic goes, and is listed in ``.deleting``
    until its directories are gone.
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
    for _, aside in asides:
        shutil.rmtree(aside, ignore_errors=True)
    if forget is not None:
        with contextlib.suppress(OSError):  # if so, the next open finishes it
            _mark(data, topic, False)


def finish_deletions(data: Path) -> None:
    """Finish what an interrupted deletion left (a writer's open)."""
    for topic in _marked(data):
        logger.info("finishing the deletion of topic %r", topic)
        for entry in os.scandir(data):
            name, _, p = entry.name.rpartition("-")
            if name == topic and p.isdigit() and entry.is_dir():
                os.rename(entry.path, data / delete_dir_name(topic, int(p)))
        (data / CONFIG_DIR / settings_file_name(topic)).unlink(missing_ok=True)
    for entry in os.scandir(data):
        if DELETE_DIR.fullmatch(entry.name) and entry.is_dir():
            shutil.rmtree(entry.path, ignore_errors=True)
    (data / DELETING_FILE).unlink(missing_ok=True)


def _marked(data: Path) -> list[str]:
    try:
        return [t for t in (data / DELETING_FILE).read_text().splitlines() if t]
    except FileNotFoundError:
        return []


def _mark(data: Path, topic: str, deleting: bool) -> None:
    topics = [t for t in _marked(data) if t != topic] + ([topic] if deleting else [])
    if topics:
        replace_file(data / DELETING_FILE, "".join(t + "\n" for t in topics))
    else:
        (data / DELETING_FILE).unlink(missing_ok=True)
