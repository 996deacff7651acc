"""What the parts of one partition log share, declared in one place.

`Log` (partition.py) is built of parts, each given this state when the log is
built, none reaching into another: its reads (`LogReads`, reads.py), its
appends (`LogAppends`, appends.py, and the compiled line path, `LineWriter`
in _line.pyx), its flushes (`LogFlushing`, flushing.py) and its transactions
(`LogTransactions`, transactions.py). The collaborators it holds keep their own
books: `Unflushed` (what the next flush syncs), `Failure` (the offline state),
`LiveKeys` (a compacted partition's keys), `ProducerState` (its producers and
open transactions, producer_state.py; loaded when first needed), `DelayedRemoval`
(deleted segments' files, gone after file.delete.delay.ms), `LeaderEpochs` (the
leader-epoch-checkpoint).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from pathlib import Path

from ..config import TopicConfig
from ..errors import ReadOnlyError
from ..storage import LogSegment, preallocate
from .delayed import DelayedRemoval
from .epochs import LeaderEpochs
from .failure import Failure
from .keys import LiveKeys
from .producer_state import PRODUCER_ID_EXPIRATION_MS, ProducerState
from .unflushed import Unflushed


class PartitionState:
    """One topic-partition's shared state: its names and settings, its segments
    in offset order (the last is the active one: appends go there), its offset
    range and recovery point, and its collaborators."""

    __slots__ = (
        "bases",
        "clock",
        "config",
        "dir",
        "epochs",
        "failure",
        "follows",
        "held_at_open",
        "held_from",
        "keys",
        "log_start_offset",
        "name",
        "partition",
        "producer_id_expiration_ms",
        "producers",
        "recovery_point",
        "removal",
        "rewrites",
        "segments",
        "topic",
        "truncated_bytes",
        "unflushed",
        "writable",
    )

    def __init__(
        self,
        directory: str | Path,
        topic: str,
        partition: int,
        config: TopicConfig,
        *,
        writable: bool,
        clock: Callable[[], int],
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = Path(directory)
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"
        self.config = config
        self.writable = writable
        self.clock = clock  # the log's clock, in ms
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []  # the segments' base offsets, to bisect
        self.log_start_offset = 0
        self.recovery_point = 0  # everything below it is durable
        self.truncated_bytes = 0  # what recovery cut when the log was opened
        self.rewrites = 0  # cleanings swapped in: stream positions before them are stale
        self.unflushed = Unflushed(clock())
        self.failure = Failure(self.name)
        self.keys = LiveKeys()
        self.removal = DelayedRemoval(self.dir)  # file.delete.delay.ms (delayed.py)
        self.epochs = LeaderEpochs(self.dir)  # leader-epoch-checkpoint (epochs.py)
        self.producers: ProducerState | None = None  # loaded when first needed
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # The first offset whose stream bytes wait for their transactions to be decided
        # (the last stable offset while a transaction is open), -1 for none; and what
        # it was when the log was opened (the loaded part's count stops there).
        self.held_from = -1
        self.held_at_open = -1
        # The cluster a followed partition copies (following.py): only its follower appends.
        self.follows: str | None = None

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets (Kafka's log end offset)."""
        return self.segments[-1].next_offset if self.segments else self.log_start_offset

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def require_appendable(self, *, follower: bool = False) -> None:
        """The guards every change of the log passes first, in this order;
        ``follower``: the change is the follower's own (following.py).

        Raises:
            ReadOnlyError: the log was opened read-only, or it follows a cluster.
            LogFailedError: the partition is offline.
        """
        if not self.writable:
            raise ReadOnlyError(f"{self.name} is read-only")
        if self.follows is not None and not follower:
            raise ReadOnlyError(f"{self.name} follows {self.follows}: read-only")
        self.failure.require_online()

    def fail(self, action: str, error: OSError) -> None:
        """Take the partition offline after ``error`` while ``action`` (failure.py)."""
        self.failure.fail(action, error, self.recovery_point)

    # ------------------------------------------------------------ the segment list

    def new_segment(self, base_offset: int) -> LogSegment:
        """A new active segment at ``base_offset``, its space reserved whole with
        ``preallocate``."""
        segment = LogSegment(
            str(self.dir), base_offset, self.config, writable=True, created_ms=self.clock()
        )
        if self.config.preallocate and segment.size == 0:
            preallocate.reserve(segment.fileno(), self.config.segment_bytes)
        return segment

    def add_segment(self, segment: LogSegment) -> None:
        """``segment`` follows the others (the new active one)."""
        self.segments.append(segment)
        self.bases.append(segment.base_offset)

    def segment_index(self, offset: int) -> int:
        """The index of the segment whose range starts at or before ``offset``
        (-1 before the first)."""
        return bisect.bisect_right(self.bases, offset) - 1

    def replace_segments(self, old: list[LogSegment], new: LogSegment | None) -> None:
        """``new`` (or nothing) where the consecutive segments ``old`` were."""
        i = self.segments.index(old[0])
        if self.segments[i : i + len(old)] != old:
            raise ValueError("the segments to replace are not consecutive in the log")
        self.segments[i : i + len(old)] = [] if new is None else [new]
        self.bases = [s.base_offset for s in self.segments]
        for segment in old:
            self.unflushed.forget(segment)

    def remove_oldest(self) -> LogSegment:
        """Take the oldest segment out of the log (retention deletes its files)."""
        oldest = self.segments.pop(0)
        self.bases.pop(0)
        self.unflushed.forget(oldest)
        return oldest

    def clear_segments(self) -> None:
        self.segments.clear()
        self.bases.clear()
