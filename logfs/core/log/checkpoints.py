"""Kafka's offset checkpoint files: per partition, one offset.

A checkpoint file is a version line (0), a count line, then one
``<topic> <partition> <offset>`` line per partition. It is replaced
atomically (write, fsync, rename, fsync the directory), so a crash leaves
the old one or the new one. A missing or garbled checkpoint only costs time:
every partition is then recovered from offset 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import describe
from ..storage import Reserve, fsync_dir

logger = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"  # compacted partitions: first dirty offset


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint file; {} (and a warning) if missing or garbled."""
    try:
        lines = path.read_text().splitlines()
        if lines[0].strip() != "0":
            raise ValueError(f"version {lines[0]!r}")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, header says {count}")
        return entries
    except FileNotFoundError:
        return {}
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        logger.warning("%s is garbled (%s); recovering every partition", path, e)
        return {}


def write_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    """Replace the checkpoint file ``path`` by ``entries``."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    replace_file(path, "\n".join(lines) + "\n")


def entries(logs: Mapping, unopened: Mapping, first_dirty: Mapping) -> tuple:
    """What `write_checkpoints` writes for a store: each open log's recovery point and
    log start offset, what the files said for partitions not opened (recovered) yet,
    and the cleaner's first dirty offsets of known partitions (None if none was cleaned)."""
    points = {tp: entry[1] for tp, entry in unopened.items()}
    starts = {tp: entry[2] for tp, entry in unopened.items()}
    points |= {tp: log.recovery_point for tp, log in logs.items()}
    starts |= {tp: log.log_start_offset for tp, log in logs.items()}
    dirty = {tp: o for tp, o in first_dirty.items() if tp in logs or tp in unopened}
    return points, starts, dirty if first_dirty else None


def write_checkpoints(
    data: Path,
    points: dict[tuple[str, int], int],
    starts: dict[tuple[str, int], int],
    first_dirty: dict[tuple[str, int], int] | None,
) -> None:
    """Write DATA's recovery points, log start offsets and (unless None) the
    cleaner's first dirty offsets, each file replaced atomically."""
    write_checkpoint(data / RECOVERY_POINT_FILE, points)
    write_checkpoint(data / LOG_START_FILE, starts)
    if first_dirty is not None:
        write_checkpoint(data / CLEANER_FILE, first_dirty)


def replace_file(path: Path, text: str) -> None:
    """Replace ``path``'s contents by ``text`` atomically and durably; if that
    fails (a full disk), ``path`` is as it was and no ``.tmp`` is left."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


class Checkpoints:
    """A store's writing of DATA's checkpoint files (`Store` is one)."""

    path: Path
    read_only: bool
    checkpoint_failure: str | None
    reserve: Reserve
    _logs: dict
    _unopened: dict
    _first_dirty: dict

    def checkpoint(self) -> None:
        """Write the checkpoint files from the logs' current state: recovery points, log
        start offsets and, once a partition was cleaned, the cleaner's first dirty offsets.

        A failure leaves the previous files in place (each is replaced atomically): they
        only make recovery start earlier. It is logged when it starts, kept in
        `checkpoint_failure` until a write succeeds, and raised."""
        if self.read_only:
            return
        self.reserve.make()  # given back on a full disk: made again once there is room
        try:
            write_checkpoints(self.path, *entries(self._logs, self._unopened, self._first_dirty))
        except OSError as e:
            if self.checkpoint_failure is None:
                logger.error("writing the checkpoints in %s failed: %s", self.path, e)
            self.checkpoint_failure = describe(e)
            raise
        if self.checkpoint_failure is not None:
            logger.info("writing the checkpoints in %s works again", self.path)
            self.checkpoint_failure = None

    def first_dirty(self, topic: str, partition: int) -> int:
        """Where the partition's dirty part starts: the log cleaner's (cleaner.py)."""
        return self._first_dirty.get((topic, partition), 0)

    def cleaned_below(self, topic: str, partition: int, offset: int) -> None:
        """A cleaning ended at ``offset``: the dirty part starts there (next `checkpoint`)."""
        self._first_dirty[(topic, partition)] = offset
