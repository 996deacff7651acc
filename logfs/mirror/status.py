"""A mirror's status file, for ``logfs describe --mirrors`` and anyone who reads it:
``DATA/logfs-mirror.<id>.json`` (the id with characters other than letters, digits,
``.``, ``_`` and ``-`` as ``_``), written whole through a temporary file and a rename,
at most once a second and whenever the error changes. Its fields:

- ``to``, ``id``: where and as whom the mirror forwards; a follower (inbound.py) has
  ``from`` instead, and ``copied`` (records appended since it started) for ``forwarded``;
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
import os
import re
from pathlib import Path

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
