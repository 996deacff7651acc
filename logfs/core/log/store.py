"""A data directory: topics, partitions, checkpoints and topic configuration.

Layout (Kafka's, so a broker's log directory opens too)::

    DATA/
      <topic>-<partition>/                 one Log each (see partition.py)
      recovery-point-offset-checkpoint     per partition: offsets below are fsynced
      log-start-offset-checkpoint          per partition: first offset not deleted
      cleaner-offset-checkpoint            compacted partitions: first offset not cleaned
      config/<topic>.properties            the topic's own settings, key=value lines
      config/<topic>.owner                 the topic's owner, group and mode (owners.py)
      .lock                                the writer lock, with DATA's own (storage/lock.py)
      .deleting-<sha1>                     a topic being deleted, an empty file (deletion.py)
      logfs-reserve                        blocks kept for settings files on a full disk

The checkpoint files are Kafka's (checkpoints.py); a missing or garbled one only
costs time. In a partition directory ``partition.metadata`` holds the topic's id
(topic_ids.py) and ``leader-epoch-checkpoint`` its leader epochs (epochs.py).
Anything else (Kafka's meta.properties, .snapshot and .txnindex files, ``-future``
directories) is left alone; ``-delete`` ones are removed (deletion.py). The limits on
partitions (topics.py) are checked here, for every face; opening raises the open-file
limit (storage/descriptors.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from ..config import TopicConfig
from ..errors import (
    LogfsError,
    ReadOnlyError,
    UnknownTopicError,
)
from ..storage import Reserve, lock_data_dir, raise_nofile_limit
from .checkpoints import (
    CLEANER_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    Checkpoints,
    read_checkpoint,
)
from .deletion import delete_partitions, finish_deletions
from .making import MakingTopics
from .owners import OwnedTopics, TopicOwners
from .partition import Log
from .partitioner import Partitioner
from .topic_ids import TopicIds
from .topics import Catalog, Limits, TopicSettings

logger = logging.getLogger(__name__)

PARTITION_DIR = re.compile(r"(.+)-(0|[1-9][0-9]*)")


class Store(OwnedTopics, Checkpoints, MakingTopics):
    """A data directory of topic-partition logs.

    A writable store holds an exclusive lock on DATA and ``DATA/.lock``; a read-only
    store takes no lock, never writes, and treats a torn tail as the end of
    the log, so it can read beside a live writer.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        defaults: Mapping[str, str] | None = None,
        read_only: bool = False,
        lock_timeout: float = 0.0,
        recover: bool = True,
        limits: Limits | None = None,
        validate_all: bool = False,
    ) -> None:
        """``recover=False`` leaves a writer's partitions unopened until
        `recover` (the daemon mounts first and recovers in a worker thread); ``validate_all``
        (`check --repair`): every batch validated, no offset below a recovery point reused."""
        self.validate_all = validate_all
        raise_nofile_limit()
        self.path = Path(path)
        self.read_only = read_only
        self.limits = limits or Limits()
        self._catalog = Catalog()
        self.checkpoint_failure: str | None = None  # why the last checkpoint write failed
        self._first_dirty: dict[tuple[str, int], int] = {}  # the cleaner's, per partition
        self.reserve = Reserve(self.path)  # blocks for settings files on a full disk
        self._settings = TopicSettings(
            self.path, defaults or {}, self.limits.max_message_bytes, self.reserve
        )
        self.defaults = self._settings.defaults
        self._owners = TopicOwners(self.path, read_only=read_only)  # owners.py
        self._lock_fds: tuple[int, ...] = ()
        self._logs: dict[tuple[str, int], Log] = {}
        self.open_logs = MappingProxyType(self._logs)  # the partitions opened so far, read-only
        # partitions found on disk but not opened yet: (directory, recovery point, log start)
        self._unopened: dict[tuple[str, int], tuple[str, int, int]] = {}
        self._partitioner = Partitioner()
        self._followed: dict[str, str] = {}  # topics copied from a cluster: from where
        self._making: dict[str, int] = {}  # topic -> partitions being made (making.py)
        self.topic_ids = TopicIds(self.path, self._catalog, not read_only)  # topic_ids.py
        if read_only:
            if not self.path.is_dir():
                raise LogfsError(f"{self.path}: no such data directory")
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock_fds = lock_data_dir(self.path, lock_timeout)
            self.reserve.make()
        try:
            self._open_logs(recover)
        except BaseException:
            self.close()
            raise

    def _open_logs(self, recover: bool) -> None:
        recovery = read_checkpoint(self.path / RECOVERY_POINT_FILE)
        starts = read_checkpoint(self.path / LOG_START_FILE)
        self._first_dirty = read_checkpoint(self.path / CLEANER_FILE)
        if not self.read_only:
            finish_deletions(self.path)
        for entry in os.scandir(self.path):
            match = PARTITION_DIR.fullmatch(entry.name)
            if not match or not entry.is_dir():
                continue
            tp = (match.group(1), int(match.group(2)))
            self._unopened[tp] = (entry.path, recovery.get(tp, 0), starts.get(tp, 0))
            self._catalog.add(*tp)
        self._settings.load(self._catalog.counts())
        self._owners.load(self._catalog.counts())
        if not self.read_only and recover:
            # A writer recovers every partition now; a reader opens each on first use.
            self.recover()

    def has_unopened(self) -> bool:
        """Whether some partition is still to be opened (and recovered)."""
        return bool(self._unopened)

    def recover(self, progress: Callable[[int, int, str], None] | None = None) -> None:
        """Open, and so recover, every partition not open yet (``progress(done, total,
        name)`` after each), then checkpoint; nothing else may use the store meanwhile."""
        for done, tp in enumerate(unopened := list(self._unopened), 1):
            self._open_log(tp)
            if progress is not None:
                progress(done, len(unopened), f"{tp[0]}-{tp[1]}")
        self.checkpoint()

    def _open_log(self, tp: tuple[str, int]) -> Log:
        path, recovery_point, log_start_offset = self._unopened.pop(tp)
        started = time.monotonic()
        log = Log(
            path, tp[0], tp[1], self._settings.config(tp[0]),
            recovery_point=0 if self.validate_all else recovery_point,
            log_start_offset=log_start_offset, writable=not self.read_only,
            handed_out=recovery_point,
        )  # fmt: skip
        log.following.follow(self._followed.get(tp[0]))
        self._logs[tp] = log
        self._owners.carry(tp[0], [tp[1]])  # whatever was done to DATA meanwhile
        validated = sum(segment.validated_bytes for segment in log.segments)
        if validated:  # after an unclean shutdown: one line per partition, with its rate
            seconds = time.monotonic() - started
            logger.info(
                "recovered %s-%d from offset %d: %.1f MB validated in %.2f s (%.0f MB/s)%s",
                tp[0], tp[1], recovery_point, validated / 1e6, seconds,
                validated / 1e6 / max(seconds, 1e-6),
                f", {log.truncated_bytes} bytes truncated" if log.truncated_bytes else "",
            )  # fmt: skip
        return log

    def _require_writable(self, topic: str | None = None) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is open read-only")
        if topic in self._followed:
            raise ReadOnlyError(f"{topic} follows {self._followed[topic]}: read-only")

    def follow(self, topic: str, source: str | None) -> None:
        """Mark the topic a copy of ``source``'s (None: unmark): only its follower changes it."""
        parts = self.partitions(topic)
        self._followed.pop(topic, None)
        self._followed.update({topic: source} if source is not None else {})
        for log in filter(None, (self._logs.get((topic, p)) for p in parts)):  # others: at open
            log.following.follow(source)

    # ------------------------------------------------------------ topics

    def topics(self) -> Mapping[str, int]:
        """Topic name -> number of partitions, sorted by name (read-only)."""
        return self._catalog.counts()

    def partitions(self, topic: str) -> list[int]:
        parts = self._catalog.partitions(topic)
        if not parts:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return parts

    def _forget(self, name: str, partitions: Sequence[int]) -> None:
        for p in partitions:
            log = self._logs.pop((name, p), None)
            if log is not None:
                log.abandon()
            self._unopened.pop((name, p), None)
            self._first_dirty.pop((name, p), None)
            self._catalog.discard(name, p)
        self.topic_ids.forget(name)

    def delete_topic(self, name: str) -> None:
        """Delete a topic: every partition directory is renamed aside first
        (all or none: a topic that fails to delete stays whole), then the
        topic is forgotten and the directories removed (deletion.py)."""
        self.begin_deletion(name)()

    def begin_deletion(self, name: str) -> Callable[[], None]:
        """Delete a topic but for its directories' removal, returned: a daemon
        runs that in a worker thread (the directories are no topic's by then)."""
        self._require_writable(name)
        parts = self.partitions(name)

        def forget() -> None:
            self._forget(name, parts)
            self._settings.remove(name)
            self._owners.remove(name)
            with contextlib.suppress(OSError):  # logged; a stale entry is ignored at open
                self.checkpoint()

        return delete_partitions(self.path, name, parts, forget)

    def topic_config(self, name: str) -> TopicConfig:
        self.partitions(name)
        return self._settings.config(name)

    def topic_overrides(self, name: str) -> dict[str, str]:
        self.partitions(name)
        return self._settings.overrides(name)

    def set_defaults(self, defaults: Mapping[str, str]) -> None:
        """Replace the topics' defaults (validated first); open logs take them at once."""
        self.defaults = self._settings.set_defaults(defaults)
        for (topic, _), log in self._logs.items():
            log.set_config(self._settings.config(topic))

    def set_topic_config(self, name: str, overrides: Mapping[str, str]) -> None:
        """Replace the topic's own settings; validated before anything changes."""
        self._require_writable(name)
        parts = self.partitions(name)
        config = self._settings.set(name, overrides)
        for p in parts:
            self.log(name, p).set_config(config)

    # ------------------------------------------------------------ logs

    def log(self, topic: str, partition: int) -> Log:
        try:
            tp = (topic, int(partition))
        except ValueError:
            tp = None
        if tp in self._logs:
            return self._logs[tp]
        if tp in self._unopened:
            return self._open_log(tp)
        raise UnknownTopicError(f"unknown topic-partition {topic}-{partition}")

    def append_to_topic(
        self, topic: str, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None
    ) -> list[tuple[int, int, int]]:
        """Append records to a topic, choosing partitions as Kafka's default
        partitioner does (see partitioner.py). Each partition's share is one
        `Log.append`; returns ``(partition, first offset, count)`` for each."""
        count = len(self.partitions(topic))
        keys = keys if keys is not None and any(k is not None for k in keys) else None
        offline = self._offline(topic)
        if keys is None:
            shares = {self._partitioner.sticky(count, offline): None}
        else:
            shares = self._partitioner.split(keys, count, offline)
        out = []
        for p, rows in sorted(shares.items()):
            part_values = values if rows is None else [values[i] for i in rows]
            part_keys = None if rows is None else [keys[i] for i in rows]
            if part_keys is not None and all(k is None for k in part_keys):
                part_keys = None
            first = self.log(topic, p).append(part_values, keys=part_keys)
            out.append((p, first, len(part_values)))
        return out

    def append_packed_to_topic(self, topic: str, packed, lengths, head=b"") -> tuple[int, int, int]:
        """`Log.append_packed` on the topic's sticky partition for this append."""
        p = self._partitioner.sticky(len(self.partitions(topic)), self._offline(topic))
        return p, self.log(topic, p).append_packed(packed, lengths, head), len(lengths)

    def append_lines_to_topic(
        self, topic: str, text, head: bytes = b"", *, limit: int
    ) -> tuple[int, int, int]:
        """`Log.append_lines` on the topic's sticky partition for this append:
        the partition, the first offset and the number of records."""
        p = self._partitioner.sticky(len(self.partitions(topic)), self._offline(topic))
        log = self.log(topic, p)
        first = log.append_lines(text, head, limit=limit)
        return p, first, log.next_offset - first

    def _offline(self, topic: str) -> set[int]:
        logs = (self._logs.get((topic, p)) for p in self._catalog.partitions(topic))
        return {log.partition for log in logs if log is not None and log.failure}

    def logs(self) -> list[Log]:
        return [self.log(*tp) for tp in self._catalog.pairs()]

    def flush(self) -> None:
        """fsync every online partition (offline ones cannot be: see `Log.fail`)."""
        for log in self._logs.values():
            if log.failure is None:
                log.flush()

    def failures(self) -> dict[str, str]:
        """Offline partitions (``topic-partition``) and why."""
        return {f"{t}-{p}": log.failure for (t, p), log in self._logs.items() if log.failure}

    def flush_failures(self) -> dict[str, str]:
        """Online partitions whose last flush could not run, and why."""
        failing = ((t, p, log) for (t, p), log in self._logs.items() if log.flush_failure)
        return {f"{t}-{p}": f"flush cannot run: {log.flush_failure}" for t, p, log in failing}

    def close(self) -> None:
        """Flush, checkpoint and release the lock (idempotent)."""
        try:
            if not self.read_only and self._lock_fds:
                self.flush()
                self.checkpoint()
                for name, failure in self.failures().items():
                    logger.warning(
                        "%s stays offline (%s): recovered from its recovery point when "
                        "DATA is next opened", name, failure,
                    )  # fmt: skip
        finally:
            for log in self._logs.values():
                log.close()
            self._logs.clear()
            self._unopened.clear()
            for fd in self._lock_fds:
                os.close(fd)
            self._lock_fds = ()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
