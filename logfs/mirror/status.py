"""A mirror's status file, for ``logfs describe --mirrors`` and anyone who reads it:
``DATA/logfs-mirror.<id>.json`` (the id with characters other than letters, digits,
``.``, ``_`` and ``-`` as ``_``), written whole through a temporary file and a rename,
at most once a second and whenever the error changes. Its fields:

- ``to``, ``id``: where and as whom the mirror forwards; a follower (inbound.py) has
  ``from`` instead, and ``copied`` (records appended since it started) for ``forwarded``;
- ``topics``, ``retention_wait``: a forwarding mirror's ``mirror.topics`` and
  ``mirror.retention.wait``;
- ``pid``, ``updated_ms``: the process that wrote it and when (a status whose process is
  gone is shown as stale);
- ``error``: the last round's failure, or null; ``topic_errors``: topics not mirrored;
- ``forwarded``: records forwarded since the process started;
- ``lag_records``, ``lag_ms``: records not forwarded yet, and how old the oldest is;
- ``partitions``: per ``topic-partition``, ``position`` (the next local offset to
  forward), ``end`` (the last stable offset), ``lag_records``, ``lag_ms``,
  ``lost_to_retention`` and ``error``; a follower's ``position`` is the local log end,
  its ``end`` the cluster's high watermark, its ``lag_ms`` how long the partition has
  been behind it, and it has no ``lost_to_retention``.

A crash can leave the temporary file (``.tmp`` added); the next write replaces it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from pathlib import Path

from ..core.config import INTERNAL_TOPICS

logger = logging.getLogger("logfs")

PREFIX, SUFFIX = "logfs-mirror.", ".json"


def status_path(data: str | os.PathLike, mirror_id: str) -> Path:
    return Path(data) / f"{PREFIX}{re.sub(r'[^A-Za-z0-9._-]', '_', mirror_id)}{SUFFIX}"


def write_status(path: Path, status: dict) -> None:
    """Replace the file at ``path`` with ``status``.

    Raises:
        OSError: it could not be written (the caller logs it once).
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(status, indent=1) + "\n")
    os.replace(tmp, path)


class StatusFile:
    """A mirror's status file as it runs: written at most once a second and whenever
    the error changes; a write that fails is logged once until one succeeds."""

    def __init__(self, path: Path, what: str, clock) -> None:
        self.path, self.what, self.clock = path, what, clock  # what: "mirror", "follower"
        self._written: tuple[int, str | None] | None = None  # when, and the error then

    def write(self, status, error: str | None, force: bool = False) -> None:
        """``status()`` (its pid and time added) unless written with ``error`` less
        than a second ago and not ``force``."""
        now = self.clock()
        if not force and self._written is not None:
            when, last = self._written
            if last == error and now - when < 1000:
                return
        try:
            write_status(self.path, {**status(), "pid": os.getpid(), "updated_ms": now})
        except OSError as e:
            if self._written is None or self._written[0] >= 0:
                logger.warning("cannot write the %s status %s: %s", self.what, self.path, e)
            self._written = (-1, error)
            return
        self._written = (now, error)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_statuses(data: str | os.PathLike) -> list[dict]:
    """Every mirror status of DATA, sorted by id, each with ``stale``: its process is
    gone. Files that do not parse are left out."""
    out = []
    for path in sorted(Path(data).glob(f"{PREFIX}*{SUFFIX}")):
        with contextlib.suppress(OSError, ValueError):
            status = json.loads(path.read_text())
            if isinstance(status, dict) and isinstance(status.get("pid"), int):
                status["stale"] = not _alive(status["pid"])
                out.append(status)
    return out


class RetentionFloors:
    """What a daemon's retention keeps for the mirrors that run as processes of their
    own (``logfs mirror DATA ...``), read from their status files in DATA at most
    every ``every`` seconds: per partition, the lowest position of the mirrors with
    ``retention_wait`` whose ``topics`` match it, 0 for a partition such a mirror has
    not listed yet. A mirror whose process is gone still holds (it resumes from its
    position when started again): its status file removed, or the mirror run with
    ``mirror.retention.wait=false``, lets retention go on. ``own`` is the daemon's own
    mirror's id, whose floor the daemon asks of it directly."""

    def __init__(
        self, data: str | os.PathLike, own: str | None = None, every: float = 1.0,
        clock=time.monotonic,
    ) -> None:  # fmt: skip
        self.data, self.own, self.every, self.clock = data, own, every, clock
        self._read_at: float | None = None
        self._mirrors: list[tuple[re.Pattern, dict, dict]] = []

    def __call__(self, topic: str, partition: int) -> int | None:
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.every:
            self._read_at, self._mirrors = now, self._read()
        if topic in INTERNAL_TOPICS:  # never mirrored
            return None
        floors = [
            positions.get(f"{topic}-{partition}", 0)
            for topics, positions, refused in self._mirrors
            if topics.fullmatch(topic) and topic not in refused
        ]
        return min(floors, default=None)

    def _read(self) -> list[tuple[re.Pattern, dict, dict]]:
        mirrors = []
        for status in read_statuses(self.data):
            if (
                "to" not in status  # a follower's: it holds nothing here
                or status.get("id") == self.own
                or not status.get("retention_wait", True)
            ):
                continue
            with contextlib.suppress(re.error, TypeError, AttributeError):
                positions = {
                    name: p["position"]
                    for name, p in (status.get("partitions") or {}).items()
                    if isinstance(p.get("position"), int)
                }
                refused = status.get("topic_errors") or {}  # topics it does not mirror
                mirrors.append((re.compile(status.get("topics") or ".*"), positions, refused))
        return mirrors


def describe_lines(statuses: list[dict]) -> list[str]:
    """``logfs describe --mirrors``'s text, a line per mirror and one per partition."""
    lines = []
    for s in statuses:
        state = "stale (its process is gone)" if s.get("stale") else "running"
        where = f"From: {s.get('from')}" if "from" in s else f"To: {s.get('to')}"
        lines.append(
            f"Mirror: {s.get('id')}\t{where}\tState: {state}\t"
            f"LagRecords: {s.get('lag_records')}\tLagMs: {s.get('lag_ms')}\t"
            f"Error: {s.get('error') or '-'}"
        )
        for topic, why in sorted((s.get("topic_errors") or {}).items()):
            lines.append(f"\tTopic: {topic}\tError: {why}")
        for name, p in (s.get("partitions") or {}).items():
            lost = "" if "from" in s else f"LostToRetention: {p.get('lost_to_retention')}\t"
            lines.append(
                f"\tPartition: {name}\tPosition: {p.get('position')}\tEnd: {p.get('end')}\t"
                f"LagRecords: {p.get('lag_records')}\t{lost}Error: {p.get('error') or '-'}"
            )
    return lines
