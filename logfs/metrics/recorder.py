"""`Metrics`: what the faces tell the daemon's metrics as they work.

The daemon builds one and hands it to the faces it builds (the listener's
broker, the mount's `Operations`), which call its methods at the places
they already pass: the listener's request loop and its Produce and Fetch
handlers, the mount's request wrapper, its one-line ``write()`` and its append
files' receipts. Each call adds to a counter or a histogram kept in memory
(books.py); nothing is computed from DATA when Prometheus scrapes.

Labels are bounded: per topic, per partition, per request type, per FUSE
operation and kind of file, per reason of a refusal (a fixed set); never per
record, client id, connection or path. A deleted topic's series go with it
(`forget_topic`).
"""

from __future__ import annotations

import errno

from .books import MILLISECONDS, SECONDS, Counters, Histogram, Histograms

# Answers that are not refusals: a lookup of a name that is not there, an
# extended attribute a file does not have (asked before every write by some kernels).
NOT_REJECTED = {errno.ENOENT, 61}  # 61: ENODATA, pyfuse3's ENOATTR


class Metrics:
    """The daemon's books for its metrics (families.py renders them)."""

    def __init__(self) -> None:
        self.messages_in = Counters()  # (topic,) -> records appended, by any face
        self.bytes_in = Counters()  # (topic,) -> bytes received for appends
        self.bytes_out = Counters()  # (topic,) -> record bytes sent to Kafka consumers
        self.requests = Histograms(MILLISECONDS)  # (request,) -> Kafka request times, ms
        self.fuse = Histograms(SECONDS)  # (operation, file kind) -> FUSE request times, s
        self.writes = Counters()  # (path,) -> append write()s: "line" or "general"
        self.rejected = Counters()  # (face, reason) -> refused requests
        self.mirror_lag: dict[tuple[str, str, int], int] = {}  # (target, topic, p) -> records
        # (source, topic, p) -> (records behind the cluster's high watermark, ms behind it)
        self.follower_lag: dict[tuple[str, str, int], tuple[int, int]] = {}
        # The one-line write()s, kept apart because they are the hot path: per topic
        # [write()s, bytes], and their times; added to the rest at a scrape (families.py).
        self.lines: dict[str, list[int]] = {}
        self.line_times = Histogram(SECONDS)

    # ------------------------------------------------------------ Kafka's listener

    def request(self, name: str, milliseconds: float) -> None:
        """A Kafka request of type ``name`` (Kafka's: Produce, Fetch...) was answered."""
        self.requests.observe((name,), milliseconds)

    def produced(self, topic: str, records: int, size: int) -> None:
        """``records`` records of ``size`` bytes were appended to ``topic`` over Kafka."""
        self.messages_in.add((topic,), records)
        self.bytes_in.add((topic,), size)

    def fetched(self, topic: str, size: int) -> None:
        """``size`` bytes of ``topic``'s records were sent to a Kafka consumer."""
        self.bytes_out.add((topic,), size)

    def refused(self, face: str, reason: str) -> None:
        """A request or connection refused: ``reason`` is one of a fixed set per face."""
        self.rejected.add((face, reason))

    # ------------------------------------------------------------ the mount

    def fuse_request(self, operation: str, kind: str, seconds: float, code: int = 0) -> None:
        """A FUSE request answered in ``seconds``: ``kind`` is the kind of file or
        directory it was about, ``code`` the errno it was answered with (0: none)."""
        self.fuse.observe((operation, kind), seconds)
        if code and code not in NOT_REJECTED:
            self.rejected.add(("mount", errno.errorcode.get(code, "E?")))

    def written(self, topic: str, size: int, general: bool = True) -> None:
        """A ``write()`` of ``size`` bytes to one of ``topic``'s append files was
        taken, by the general path or the one-line path (`line_written`)."""
        self.bytes_in.add((topic,), size)
        self.writes.add(("general" if general else "line",))

    def line_written(self, topic: str, size: int, seconds: float) -> None:
        """A one-line ``write()``, taken before pyfuse3's dispatch, in ``seconds``:
        its record, bytes and time. Called for every line a logger writes, so it
        does the least it can: two additions and one observation."""
        books = self.lines.get(topic)
        if books is None:
            books = self.lines[topic] = [0, 0]
        books[0] += 1
        books[1] += size
        self.line_times.observe(seconds)

    def appended(self, topic: str, records: int) -> None:
        """``records`` records were appended to ``topic`` through the mount."""
        self.messages_in.add((topic,), records)

    # ------------------------------------------------------------ the rest

    def mirror(self, target: str, topic: str, partition: int, lag: int) -> None:
        """How many records a mirror to ``target`` is behind on one partition."""
        self.mirror_lag[(target, topic, partition)] = lag

    def follower(self, source: str, topic: str, partition: int, lag: int, lag_ms: int) -> None:
        """How many records, and for how long, a follower of ``source`` is behind the
        cluster's high watermark on one partition."""
        self.follower_lag[(source, topic, partition)] = (lag, lag_ms)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series end."""
        for counters in (self.messages_in, self.bytes_in, self.bytes_out):
            counters.forget(topic)
        self.lines.pop(topic, None)
        for key in [k for k in self.mirror_lag if k[1] == topic]:
            del self.mirror_lag[key]
        for key in [k for k in self.follower_lag if k[1] == topic]:
            del self.follower_lag[key]
