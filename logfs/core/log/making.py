"""New partitions made in three steps, so that a daemon makes their files off its
event loop (making 10,000 partitions takes seconds, most of it in fsync):

1. the store checks the request and takes the name and the partition count
   (`Store.begin_topic`, `Store.begin_partitions`, on the caller's thread): until
   step 3 nobody else creates, grows or deletes that topic, and a new topic is
   not listed yet;
2. `NewLogs.build` makes each partition's directory and empty first segment and
   fsyncs DATA (any thread: it touches nothing the store shares);
3. `Store.finish` adopts the built logs, or removes what a failed build made.

A crash while they are built leaves the partition directories made so far (with a
new topic's settings and owner files): the next open finds the topic with those
partitions, empty, as any partition directory in DATA is found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from ..config import TopicConfig
from ..errors import (
    InvalidConfigError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicError,
)
from ..storage import fsync_dir
from .deletion import delete_partitions
from .owners import Owner, TopicOwners
from .partition import Log
from .topics import Catalog, Limits, TopicSettings, validate_topic_name


class NewLogs:
    """Partitions ``partitions`` of ``topic`` being made in ``data``.

    Args:
        data: the data directory.
        topic: the topic's name.
        partitions: the partition numbers to make.
        config: the topic's configuration when the making began.
        new_topic: whether the topic itself is new (its settings go if building fails).
    """

    def __init__(
        self, data: Path, topic: str, partitions: range, config: TopicConfig, new_topic: bool
    ) -> None:
        self.data = data
        self.topic = topic
        self.partitions = partitions
        self.config = config
        self.new_topic = new_topic
        self.logs: list[Log] = []
        self.built = False

    def build(self) -> None:
        """Make the partitions' directories and first segments, durably; on an error
        the caller still calls `Store.finish`, which removes what was made."""
        for p in self.partitions:
            self.logs.append(Log(self.data / f"{self.topic}-{p}", self.topic, p, self.config))
        fsync_dir(self.data)
        self.built = True

    def discard(self) -> None:
        """Close what `build` made and remove its directories (nothing half-made)."""
        for log in self.logs:
            log.abandon()
        with contextlib.suppress(OSError):
            delete_partitions(self.data, self.topic, self.partitions)()


class MakingTopics:
    """A store's making of topics and partitions (`Store` is one: the attributes
    below, `partitions`, `checkpoint` and `_require_writable` are its)."""

    path: Path
    limits: Limits
    checkpoint_failure: str | None
    _catalog: Catalog
    _settings: TopicSettings
    _owners: TopicOwners
    _logs: dict
    _followed: dict[str, str]
    _making: dict[str, int]

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None,
        owner: Owner | None = None,
    ) -> None:  # fmt: skip
        """Create a topic with ``partitions`` empty partitions, owned by
        ``owner`` (None: it follows DATA's owner and mode, owners.py)."""
        self.make(self.begin_topic(name, partitions, config, owner))

    def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions."""
        self.make(self.begin_partitions(name, total))

    def make(self, new: NewLogs) -> None:
        """Build ``new`` here and adopt it (a daemon builds in a worker thread: making.py)."""
        try:
            new.build()
        finally:
            self.finish(new)

    def begin_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None,
        owner: Owner | None = None,
    ) -> NewLogs:  # fmt: skip
        """Check a new topic and take its name: step 1 of making.py."""
        self._require_writable()
        validate_topic_name(name)
        if partitions < 1:
            raise InvalidConfigError(f"a topic needs at least one partition, not {partitions}")
        if name in self._catalog or name in self._making:
            raise TopicExistsError(f"topic {name!r} already exists")
        # Kafka's metrics name a topic with '.' as '_', so it refuses a topic whose name
        # differs from an existing one's only there (a.b beside a_b).
        colliding = self._catalog.colliding(name)
        if colliding:
            raise InvalidTopicError(
                f"topic {name!r} collides with existing topic {colliding!r} "
                "('.' and '_' are the same in Kafka's metric names)"
            )
        self._catalog.check_limits(self.limits, name, partitions, self._making_count())
        self._owners.check_share(self.limits, owner, partitions, self._catalog.count)
        self._settings.set(name, config or {})
        self._owners.set(name, owner)
        return self._begin(name, range(partitions), new_topic=True)

    def begin_partitions(self, name: str, total: int) -> NewLogs:
        """Check growing a topic to ``total`` partitions and take them: step 1 of
        making.py."""
        self._require_writable(name)
        count = len(self.partitions(name))
        if name in self._making:
            raise InvalidConfigError(f"topic {name!r} is being given partitions already")
        if total <= count:
            raise InvalidConfigError(f"topic {name!r} already has {count} partitions")
        self._catalog.check_limits(self.limits, name, total, self._making_count())
        self._owners.check_share(
            self.limits, self._owners.of(name), total - count, self._catalog.count
        )
        last = self._catalog.last(name)
        return self._begin(name, range(last + 1, last + 1 + total - count), new_topic=False)

    def _begin(self, name: str, partitions: range, new_topic: bool) -> NewLogs:
        self._making[name] = len(partitions)
        return NewLogs(self.path, name, partitions, self._settings.config(name), new_topic)

    def _making_count(self) -> int:
        return sum(self._making.values())

    def being_made(self, name: str) -> bool:
        """Whether ``name`` is a new topic whose partitions are being made (not listed yet)."""
        return name in self._making and name not in self._catalog

    def finish(self, new: NewLogs) -> None:
        """Adopt ``new``'s logs once built (step 3 of making.py); if its build failed,
        remove what it made, and a new topic's settings."""
        del self._making[new.topic]
        gone = not new.new_topic and new.topic not in self._catalog  # deleted meanwhile
        if not new.built or gone:
            new.discard()
            if new.new_topic:
                self._settings.remove(new.topic)
                self._owners.remove(new.topic)
            if gone and new.built:
                raise UnknownTopicError(f"topic {new.topic!r} was deleted meanwhile")
            return
        config, source = self._settings.config(new.topic), self._followed.get(new.topic)
        for log in new.logs:  # the settings may have changed while it was built
            log.set_config(config)
            log.following.follow(source)
            self._logs[(new.topic, log.partition)] = log
            self._catalog.add(new.topic, log.partition)
        self._owners.carry(new.topic, new.partitions)
        # New partitions start at 0, as unlisted ones do: the checkpoints are rewritten
        # only if they may list a deleted topic of the same name (a failed write).
        if self.checkpoint_failure is not None:
            self.checkpoint()
