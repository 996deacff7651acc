"""Mirror in: a follower, a Kafka cluster's partitions copied into the data directory
as a Kafka replica copies its leader's (``-o mirror.from=kafka://...``).

A round, repeated until `MirrorIn.stop`:

1. every `REFRESH_MS` (and after a failure): the cluster's topics matching
   ``mirror.topics`` (internal ones never) are read (Metadata); a topic missing here
   is created with the same partition count and the settings the cluster describes
   that differ from the defaults (``segment.bytes`` above all: the segment files come
   out as the leader's), one with fewer partitions here grows. Every local topic
   matching ``mirror.topics`` is marked followed (`Store.follow`): only this follower
   changes it, every other change answers EROFS on the mount and
   TOPIC_AUTHORIZATION_FAILED on the listener. A local topic with more partitions
   than the cluster's, or none there, is not copied and says why;
2. one Fetch at ``read_uncommitted`` per leader (source.py: a multi-broker cluster's
   routes) of the followed partitions it leads, from their local log ends, at most
   ``mirror.fetch.max.bytes``; each leader's answer is applied before the next
   leader is asked. Each partition's batches are appended as they are, offsets and
   bytes unchanged (core/log/following.py), and the log start follows the cluster's
   (the one the Fetch answer gives, or ListOffsets earliest). A partition whose local
   log end is below the cluster's log start (OFFSET_OUT_OF_RANGE) starts again at the
   cluster's log start, as Kafka truncates a replica; one whose log end is past the
   cluster's high watermark (the cluster lost records, or DATA held other ones) is not
   copied and says so.

The position is the local log end, nothing else: after a ``kill -9`` and recovery
the follower fetches from whatever the log holds, so nothing is skipped or doubled.

Threads: the rounds run in a worker thread (the network blocks); every read or change
of the store goes through ``apply(fn)``, which runs ``fn(store)`` in the thread that
owns the store (the daemon's loop) and returns its result; the files of a followed
topic's new partitions are made in the worker thread between two of them
(core/log/making.py), so a cluster's thousands of partitions never hold up the
loop, and the topic is read-only from its first moment. Failures are logged, kept
in `status` (and the status file, status.py) and in each partition's books (the
mount's ``state``: `Log.following`), and the next round, after a back-off of up to
`MAX_BACKOFF` seconds, begins again at step 1.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

from ..core.config import INTERNAL_TOPICS, now_ms
from ..core.errors import InvalidConfigError, LogfsError
from ..core.log import Store
from .cluster import TargetError, code_name
from .settings import FollowerSettings
from .source import EARLIEST, LATEST, OFFSET_OUT_OF_RANGE, Fetched, Source
from .status import StatusFile, status_path

logger = logging.getLogger("logfs")

REFRESH_MS = 5000  # how often the cluster's topics are read again
BACKOFF, MAX_BACKOFF = 0.1, 5.0
Apply = Callable[[Callable[[Store], object]], object]


class MirrorIn:
    """Copies ``settings.source``'s partitions into the store ``apply`` reaches
    (module docstring). `run` blocks until `stop`; `round` is one round, for tests;
    `status` and `partitions` may be read from any thread.

    Args:
        data: the data directory (for the status file).
        settings: where from, what and how (settings.py).
        apply: runs a function of the store in the store's thread, returning its result.
        clock: milliseconds now.
    """

    def __init__(
        self, data: str, settings: FollowerSettings, apply: Apply,
        clock: Callable[[], int] = now_ms,
    ) -> None:  # fmt: skip
        self.data = data
        self.settings = settings
        self.apply = apply
        self.clock = clock
        self.source = Source(
            settings.source, settings.id, settings.security, settings.timeout,
            settings.fetch_max_bytes, settings.partition_max_bytes,
        )  # fmt: skip
        self.topics = re.compile(settings.topics)
        self.followed: list[tuple[str, int]] = []
        self.topic_errors: dict[str, str] = {}
        self.books: dict[tuple[str, int], dict] = {}  # per partition: as `partitions` shows
        self.error: str | None = None
        self.copied = 0  # records appended since start
        self._refreshed = -REFRESH_MS
        self._stopped = threading.Event()
        self.status_file = StatusFile(status_path(data, settings.id), "follower", self.clock)

    # ------------------------------------------------------------ the books

    def matches(self, topic: str) -> bool:
        return topic not in INTERNAL_TOPICS and bool(self.topics.fullmatch(topic))

    def mark(self, store: Store) -> None:
        """Mark the local topics ``mirror.topics`` matches as followed (the daemon does
        before its faces answer, so no write slips in before the first round)."""
        for topic in store.topics():
            if self.matches(topic):
                store.follow(topic, self.settings.source)

    def partitions(self) -> dict[str, dict]:
        """Each followed partition's position (the local log end), end (the cluster's
        high watermark), lag and error, by ``topic-partition``."""
        now = self.clock()
        out = {}
        for (t, p), b in sorted(list(self.books.items())):
            behind = b["behind_since"]
            out[f"{t}-{p}"] = {
                "position": b["position"],
                "end": b["end"],
                "lag_records": max(0, b["end"] - b["position"]),
                "lag_ms": 0 if behind is None else max(0, now - behind),
                "error": b["error"],
            }
        return out

    def status(self) -> dict:
        """What ``logfs describe --mirrors`` shows of the follower."""
        partitions = self.partitions()
        return {
            "from": self.settings.source,
            "id": self.settings.id,
            "error": self.error,
            "topic_errors": dict(self.topic_errors),
            "copied": self.copied,
            "lag_records": sum(p["lag_records"] for p in partitions.values()),
            "lag_ms": max((p["lag_ms"] for p in partitions.values()), default=0),
            "partitions": partitions,
        }

    # ------------------------------------------------------------ running

    def run(self) -> None:
        """Rounds until `stop`; failures are kept and logged, never raised."""
        backoff = BACKOFF
        while not self._stopped.is_set():
            try:
                self.round()
            except (TargetError, LogfsError, OSError) as e:
                self._failed(str(e))
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            backoff = BACKOFF
            self._write_status()
        self._write_status(force=True)
        self.source.close()

    def stop(self) -> None:
        self._stopped.set()

    def close(self) -> None:
        self.source.close()

    def _failed(self, message: str) -> None:
        if message != self.error:
            logger.warning("follower of %s: %s", self.settings.source, message)
        self.error = message
        self.source.close()
        self._refreshed = -REFRESH_MS  # the topics are read again with the next connection
        self._write_status()

    def _write_status(self, force: bool = False) -> None:
        self.status_file.write(self.status, self.error, force)

    def round(self) -> int:
        """One round; returns the records appended.

        Raises:
            TargetError: the cluster failed or refused.
            LogfsError, OSError: the store refused or failed.
        """
        if self.clock() - self._refreshed >= REFRESH_MS:
            self._refresh()
        stopped = {tp for tp, b in self.books.items() if b["stopped"]}
        positions = self.apply(
            lambda store: {
                tp: store.log(*tp).next_offset for tp in self.followed if tp not in stopped
            }
        )
        if not positions:
            self._stopped.wait(0.5)  # nothing to fetch: as long as a Fetch would wait
            return 0
        copied, asked = 0, False
        for node, answer in self.source.fetch(positions):  # one leader's answer at a time
            asked = asked or node is not None
            out_of_range = [tp for tp, f in answer.items() if f.error_code == OFFSET_OUT_OF_RANGE]
            bounds = {
                tp: (self.source.offsets([tp], EARLIEST)[tp], self.source.offsets([tp], LATEST)[tp])
                for tp in out_of_range
            }
            now = self.apply(lambda store, a=answer, b=bounds: self._apply(store, a, b))
            self.copied += now
            copied += now
        if not asked:  # no partition has a leader now: as long as a Fetch would wait
            self._stopped.wait(0.5)
        self.error = None
        return copied

    def _refresh(self) -> None:
        """Step 1 of a round: the topics, made and marked here."""
        counts = {t: n for t, n in self.source.partition_counts(None).items() if self.matches(t)}
        configs = {}
        for topic in counts:
            if topic not in self.topic_errors and (topic, 0) not in self.books:
                configs[topic] = self.source.topic_settings(topic)
        for topic, count in counts.items():  # each made here, off the store's thread
            config = configs.get(topic) or {}
            new = self.apply(lambda store, t=topic, n=count, c=config: self._begin(store, t, n, c))
            if new is not None:
                try:
                    new.build()
                finally:
                    self.apply(lambda store, new=new: self._adopt(store, new))
        self.topic_errors = self.apply(lambda store: self._mark_topics(store, counts))
        self.followed = [
            (t, p)
            for t, n in sorted(counts.items())
            if t not in self.topic_errors
            for p in range(n)
        ]
        for gone in set(self.books) - set(self.followed):
            del self.books[gone]
        for tp in self.followed:
            self.books.setdefault(
                tp, {"position": 0, "end": 0, "behind_since": None, "error": None, "stopped": False}
            )
        self._refreshed = self.clock()

    def _begin(self, store: Store, topic: str, count: int, config: dict):
        """In the store's thread: step 1 of making a followed topic, or more of its
        partitions (core/log/making.py); None if there is nothing to make."""
        local = store.topics().get(topic)
        if local is None:
            try:
                return store.begin_topic(topic, count, config)
            except InvalidConfigError as e:  # a setting beyond this node's limits
                logger.warning("follower of %s: %s: %s; local defaults", self.settings.source,
                               topic, e)  # fmt: skip
                return store.begin_topic(topic, count)
        if local >= count:
            return None
        store.follow(topic, None)  # the follower's own change, read-only again at once
        try:
            return store.begin_partitions(topic, count)
        finally:
            store.follow(topic, self.settings.source)

    def _adopt(self, store: Store, new) -> None:
        """In the store's thread: the partitions made, followed from the first moment."""
        store.finish(new)
        if new.built:
            store.follow(new.topic, self.settings.source)

    def _mark_topics(self, store: Store, counts: dict) -> dict[str, str]:
        """In the store's thread: mark the followed topics; the errors of those that
        cannot be followed."""
        errors, source = {}, self.settings.source
        for topic, count in counts.items():
            local = store.topics().get(topic)
            if local is not None and local > count:
                errors[topic] = f"{local} partitions here, {count} on {source}: not copied"
        for topic in store.topics():
            if self.matches(topic):
                store.follow(topic, source)
                if topic not in counts:
                    errors[topic] = f"not on {source}: not copied"
        for topic in set(errors) - set(self.topic_errors):
            logger.warning("follower of %s: %s", source, errors[topic])
        return errors

    def _apply(self, store: Store, answer: dict[tuple[str, int], Fetched], bounds) -> int:
        """In the store's thread: append what a Fetch brought, follow the log starts."""
        copied, now = 0, self.clock()
        for tp, fetched in answer.items():
            if tp not in self.books:
                continue
            log, books = store.log(*tp), self.books[tp]
            try:
                copied += self._apply_one(log, books, fetched, bounds.get(tp), now)
            except (LogfsError, OSError) as e:  # this partition's: the others go on
                books["error"] = f"{log.topic}-{log.partition}: {e}"
                log.following.copied(-1, books["error"])
        return copied

    def _apply_one(self, log, books: dict, fetched: Fetched, bounds, now: int) -> int:
        """One partition of `_apply`: the records it appended."""
        copied, end, error = 0, fetched.high_watermark, None
        if bounds is not None:
            earliest, latest = bounds
            end = latest if isinstance(latest, int) else books["end"]
            if isinstance(earliest, int) and log.next_offset < earliest:
                log.following.start_at(earliest)  # as Kafka truncates a replica
            elif isinstance(latest, int) and log.next_offset > latest:
                error = (
                    f"log end {log.next_offset} is past the end {latest} on "
                    f"{self.settings.source}: not copied"
                )
                books["stopped"] = True
            else:
                error = f"offset {log.next_offset} out of range on {self.settings.source}"
        elif fetched.error_code:
            error, end = code_name(fetched.error_code), books["end"]
        else:
            before = log.next_offset
            log.following.append(fetched.records)
            copied += log.next_offset - before
            if 0 <= fetched.log_start_offset <= log.next_offset:
                log.following.start_at(fetched.log_start_offset)
        log.following.copied(end, error)
        if error is not None and error != books["error"]:
            logger.warning("follower of %s: %s: %s", self.settings.source, log, error)
        books.update(position=log.next_offset, end=end, error=error)
        if log.next_offset >= end:
            books["behind_since"] = None
        elif books["behind_since"] is None:
            books["behind_since"] = now
        return copied
