"""Leader epochs: a partition's ``leader-epoch-checkpoint``, in Kafka's format,
and the answer to OffsetForLeaderEpoch from it::

    0               the format's version
    1               how many entries follow
    0 0             an epoch and the first offset appended in it

This node has led every partition since the partition was created and no
other node can take over, so the epoch never moves: one entry, epoch 0,
starting at the log start offset (which it follows when retention or
DeleteRecords moves it, as Kafka's ``truncateFromStart`` does). A consumer
that asks where epoch 0 ends learns the log end offset: nothing it fetched
was truncated behind its back. (logfs's own batches carry no leader epoch,
-1, as a producer sends them; Kafka's clients then skip the check.)

The file is written when a writable log opens without a readable one, and
when the log start moves; it is derived data (a missing or garbled file is
written again), so it is replaced atomically but not fsynced: opening many
partitions for the first time costs no fsync each.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

FILE = "leader-epoch-checkpoint"
VERSION = 0
LEADER_EPOCH = 0  # the one epoch of this node's leadership
UNDEFINED = -1  # Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET


class LeaderEpochs:
    """A partition's epochs: (epoch, start offset) entries, oldest first."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE
        self.entries: list[tuple[int, int]] = []

    def load(self, log_start_offset: int, writable: bool) -> None:
        """Read the file; a writer writes it when it is missing or unreadable."""
        try:
            lines = self.path.read_text().splitlines()
            if int(lines[0]) != VERSION or int(lines[1]) != len(lines) - 2:
                raise ValueError("a bad header")
            self.entries = [tuple(map(int, line.split(" "))) for line in lines[2:]]
        except FileNotFoundError:
            self.entries = []
        except (OSError, ValueError, IndexError, UnicodeDecodeError) as e:
            logger.warning("%s is unreadable (%s); written again", self.path, e)
            self.entries = []
        if not self.entries:
            self.entries = [(LEADER_EPOCH, log_start_offset)]
            if writable:
                self._write()

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else LEADER_EPOCH

    def start_moved(self, log_start_offset: int) -> None:
        """The log starts later: entries below it go, the first one starts there."""
        kept = [e for e in self.entries if e[1] >= log_start_offset]
        older = [e for e in self.entries if e[1] < log_start_offset]
        if older and (not kept or kept[0][1] > log_start_offset):
            kept.insert(0, (older[-1][0], log_start_offset))
        if kept != self.entries:
            self.entries = kept
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (the largest epoch at or below ``epoch``, the
        offset where the next one starts, or the log end for the latest);
        (-1, -1) for an undefined epoch or one past the latest."""
        if epoch == UNDEFINED or not self.entries:
            return UNDEFINED, UNDEFINED
        if epoch == self.latest:
            return epoch, log_end_offset
        higher = next((e for e in self.entries if e[0] > epoch), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = [e for e in self.entries if e[0] <= epoch]
        return (floor[-1][0] if floor else epoch), higher[1]

    def _write(self) -> None:
        lines = [str(VERSION), str(len(self.entries))]
        lines += [f"{epoch} {start}" for epoch, start in self.entries]
        aside = self.path.with_name(FILE + ".tmp")
        try:
            aside.write_text("\n".join(lines) + "\n")
            os.replace(aside, self.path)
        except OSError as e:  # written again at the next change or open
            logger.warning("cannot write %s: %s", self.path, e)
