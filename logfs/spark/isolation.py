"""``kafka.isolation.level``: what the source's consumers see, as Spark hands the
option to Kafka's consumers. ``read_uncommitted`` (the Kafka consumer's default,
so Spark's) reads every data record up to the log end; ``read_committed`` reads
what a ``read_committed`` consumer reads: ``latest`` is the last stable offset,
records of aborted transactions are left out (their offsets are gaps, as they are
in Kafka's answers), and so are control batches, always.

`Committed` wraps a store (a read-only `Store`, or a `RemoteStore` over a
listener, which fetches with isolation level 1) so that planning and reading,
which ask a log for ``next_offset``, ``raw_batches`` and ``offset_for_time``,
see the committed view without knowing of it.
"""

from __future__ import annotations

from .errors import SparkOptionError

OPTION = "kafka.isolation.level"
LEVELS = ("read_uncommitted", "read_committed")


def read_committed(options) -> bool:
    """Whether the (lower-cased) options ask for ``read_committed``.

    Raises:
        SparkOptionError: a value Kafka's consumer would refuse.
    """
    value = options.get(OPTION, "read_uncommitted").strip().lower()
    if value not in LEVELS:
        raise SparkOptionError(f'"{OPTION}" must be read_uncommitted or read_committed')
    return value == "read_committed"


class CommittedLog:
    """A log as a ``read_committed`` consumer sees it."""

    def __init__(self, log) -> None:
        self._log = log

    def __getattr__(self, name: str):
        return getattr(self._log, name)

    @property
    def next_offset(self) -> int:
        return self._log.last_stable_offset

    def raw_batches(self, start: int | None = None, end: int | None = None):
        view = self._log.visibility(start, end)
        end = view.end if end is None else min(end, view.end)
        return view.batches(self._log.raw_batches(start, end))

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        return self._log.offset_for_time(timestamp_ms, committed=True)


class Committed:
    """A store whose logs are `CommittedLog`s."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name: str):
        return getattr(self._store, name)

    def log(self, topic: str, partition: int) -> CommittedLog:
        return CommittedLog(self._store.log(topic, partition))

    def __enter__(self) -> Committed:
        self._store.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._store.__exit__(*exc)
