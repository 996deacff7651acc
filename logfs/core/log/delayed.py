"""``file.delete.delay.ms``: a segment deleted (retention, DeleteRecords) leaves
the log at once, and its files go from the disk that long after, as Kafka's
do, so that a reader still holding them (a fetch answered from the file)
finishes first.

Its files are renamed ``<name>.deleted.<due>``, ``due`` the wall-clock time in
milliseconds when they may go: the name keeps the delay across a restart,
and neither the segment loader nor the cleaner's crash protocol (which owns
plain ``.deleted`` names, storage/swap.py) takes them for anything of theirs.
They are removed at the log's first retention check at or after ``due``
(`remove_due`), or at the next open. A delay of 0 removes them at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

logger = logging.getLogger(__name__)

DELAYED = re.compile(r".+\.deleted\.([0-9]+)")


class DelayedRemoval:
    """The files of one partition directory waiting for their time to go."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._due: list[tuple[int, str]] = []

    def found(self, now_ms: int) -> None:
        """Take up what a previous run left (a writer's open), and remove what is due."""
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.directory):
                if m := DELAYED.fullmatch(entry.name):
                    self._due.append((int(m.group(1)), entry.path))
        self.remove_due(now_ms)

    def remove(self, segment, delay_ms: int, now_ms: int) -> None:
        """Close ``segment`` and take its files out of the log, to go after ``delay_ms``.

        Raises:
            OSError: a file could not be renamed or removed.
        """
        segment.close(write=False)
        due = now_ms + delay_ms
        for path in (segment.log_path, segment.index_path, segment.timeindex_path):
            aside = f"{path}.deleted.{due}"
            try:
                os.rename(path, aside)  # the .log first: from now on the segment is gone
            except FileNotFoundError:
                continue
            self._due.append((due, aside))
        if delay_ms <= 0:
            self.remove_due(now_ms)

    def remove_due(self, now_ms: int) -> int:
        """Remove the files whose time has come; how many."""
        keep, gone = [], 0
        for due, path in self._due:
            if due > now_ms:
                keep.append((due, path))
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:  # garbage left for the next try: the log is fine
                logger.warning("cannot remove %s: %s", path, e)
                keep.append((due, path))
                continue
            gone += 1
        self._due = keep
        return gone

    @property
    def pending(self) -> int:
        return len(self._due)
