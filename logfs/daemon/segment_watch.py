"""Segment files removed or replaced from outside the daemon, seen as the kernel
reports it (inotify, core/storage/inotify.py), not at the next fsync.

One inotify descriptor watches DATA (partition directories created, renamed or
removed: the watches follow the store's partitions) and each partition
directory for entries unlinked (IN_DELETE), renamed away (IN_MOVED_FROM) or over
(IN_MOVED_TO), and for the directory itself going (IN_DELETE_SELF,
IN_MOVE_SELF). An event naming a ``.log`` file, or the
directory itself, has the partition's log check its active segment
(`Log.check_files`: two ``stat`` calls): if that file is no longer the one the
log writes through, the partition goes offline at once with the reason, and an
empty segment file at its next offset keeps every later open from handing out
those offsets again. The daemon's own removals (retention, a cleaning's swap, a
topic deleted) never touch an active segment's file, so they pass the check.

Nothing runs on the append path: the check costs nothing until a segment file
changes. What remains is a window, not a hole: appends the loop runs between
the removal and this task's turn (the events are read at the loop's next I/O
check, well under a millisecond on an idle loop, longer under load) land in the
lost file and are acknowledged; their offsets are never handed out again. A
watch the kernel refuses (``max_user_watches`` used up, no inotify) leaves its
partitions to the flusher's check before each fsync, as without this task;
that is logged once. A queue overflow has every open log checked.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import trio

from ..core.storage import inotify

if TYPE_CHECKING:
    from ..core.log import Store

logger = logging.getLogger(__name__)

# A partition directory's events that may mean a segment file was lost.
# Only events on the directory's entries: an event on its files' inodes (IN_ATTRIB,
# IN_MODIFY) would have the kernel look at the watch on every write() to a segment
# (measured: about 0.3 µs more per write), while unlinking or renaming a name is
# reported on the directory itself.
SEGMENT_EVENTS = (
    inotify.IN_DELETE | inotify.IN_MOVED_FROM | inotify.IN_MOVED_TO
    | inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF
)  # fmt: skip
# DATA's events that change which partition directories there are.
DATA_EVENTS = inotify.IN_CREATE | inotify.IN_DELETE | inotify.IN_MOVED_FROM | inotify.IN_MOVED_TO


class SegmentWatch:
    """Watches the store's partition directories; `run` in the daemon's nursery."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.watch: inotify.DirectoryWatch | None = None
        self.partitions: dict[int, tuple[str, int]] = {}  # watch -> (topic, partition)
        self.watched: dict[tuple[str, int], int] = {}
        self.data_wd = -1
        self.refused = False  # a watch was refused: logged once
        self.checks = 0  # logs checked, for tests and statistics

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            self.watch = inotify.DirectoryWatch()
            self.data_wd = self.watch.add(self.store.path, DATA_EVENTS)
        except OSError as e:
            logger.warning("segment files are checked at fsync only: %s", e)
            if self.watch is not None:
                self.watch.close()
            task_status.started()
            return
        with self.watch:
            self.follow_partitions()
            task_status.started()
            while True:
                await trio.lowlevel.wait_readable(self.watch.fileno())
                self.handle(self.watch.read())

    def follow_partitions(self) -> None:
        """Watch every partition directory of the store, and no other."""
        now = {(t, p) for t in self.store.topics() for p in self.store.partitions(t)}
        for tp in set(self.watched) - now:
            wd = self.watched.pop(tp)
            self.partitions.pop(wd, None)
            self.watch.remove(wd)
        for tp in now - set(self.watched):
            path = os.path.join(self.store.path, f"{tp[0]}-{tp[1]}")
            try:
                wd = self.watch.add(path, SEGMENT_EVENTS)
            except FileNotFoundError:
                continue  # not made yet: its IN_CREATE follows
            except OSError as e:
                if not self.refused:
                    logger.warning("%s: segment files checked at fsync only: %s", path, e)
                    self.refused = True
                continue
            self.watched[tp] = wd
            self.partitions[wd] = tp

    def handle(self, events: list[inotify.Event]) -> None:
        """Check the logs whose segment files the events may have changed."""
        suspects: set[tuple[str, int]] = set()
        follow = False
        for event in events:
            if event.mask & inotify.IN_Q_OVERFLOW:
                suspects.update(self.partitions.values())
                follow = True
            elif event.wd == self.data_wd:
                follow = follow or bool(event.mask & inotify.IN_ISDIR)
            elif event.mask & inotify.IN_IGNORED:  # its directory is gone
                tp = self.partitions.pop(event.wd, None)
                if tp is not None and self.watched.get(tp) == event.wd:
                    del self.watched[tp]
                follow = True
            elif event.wd in self.partitions and (not event.name or event.name.endswith(".log")):
                suspects.add(self.partitions[event.wd])
        for tp in suspects:
            log = self.store.open_logs.get(tp)  # one not opened yet has nothing to lose
            if log is not None:
                self.checks += 1
                log.check_files()
        if follow:
            self.follow_partitions()
