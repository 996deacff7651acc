"""The books the daemon keeps as it works, for its metrics: plain counters and
histograms kept on the event loop, where the hooks of the faces call them, and
read on the same loop when the endpoint renders them (endpoint.py). Nothing
here locks: the loop runs one thing at a time, and a scrape is one more thing.

They are cheaper than `prometheus_client`'s own metric objects (a lock and a
loop over the buckets per observation): the one-line ``write()`` observes a
latency per line, so a histogram's observation is one bisection and two
additions. `prometheus_client` only renders them (families.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

# Latencies in seconds, from a FUSE request answered in the page cache's time
# (tens of microseconds) to a fsync that waits for a disk (seconds).
SECONDS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
# Kafka's request times are in milliseconds (its TotalTimeMs), long polls up to a fetch's
# max.wait.ms and beyond.
MILLISECONDS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class Histogram:
    """Observations counted in buckets by upper bound (Prometheus's ``le``),
    with their count and sum.

    Args:
        bounds: the buckets' upper bounds, increasing; +Inf is implied.
    """

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def plus(self, other: Histogram | None) -> Histogram:
        """This histogram and ``other`` (the same bounds) added, as a new one."""
        total = Histogram(self.bounds)
        total.counts = list(self.counts)
        total.sum, total.count = self.sum, self.count
        if other is not None:
            total.counts = [a + b for a, b in zip(total.counts, other.counts, strict=True)]
            total.sum += other.sum
            total.count += other.count
        return total

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, observations at or below it)`` per bucket, +Inf last: Prometheus's form."""
        found, total = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            found.append(("+Inf" if bound == float("inf") else repr(float(bound)), total))
        return found


class Histograms:
    """Histograms by label values, made on first use."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.by_labels: dict[tuple[str, ...], Histogram] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        histogram = self.by_labels.get(labels)
        if histogram is None:
            histogram = self.by_labels[labels] = Histogram(self.bounds)
        histogram.observe(value)

    def copy(self) -> Histograms:
        """A copy, which observations made here later do not change."""
        total = Histograms(self.bounds)
        total.by_labels = {labels: h.plus(None) for labels, h in self.by_labels.items()}
        return total

    def plus(self, labels: tuple[str, ...], more: Histogram) -> Histograms:
        """These histograms with ``more`` added to the one of ``labels``, as new ones."""
        total = self.copy()
        if more.count:
            total.by_labels[labels] = more.plus(self.by_labels.get(labels))
        return total

    def __iter__(self) -> Iterator[tuple[tuple[str, ...], Histogram]]:
        return iter(list(self.by_labels.items()))


class Counters:
    """Counts by label values, made on first use; `forget` drops those whose first
    label is gone (a deleted topic's)."""

    def __init__(self) -> None:
        self.by_labels: dict[tuple[str, ...], float] = {}

    def add(self, labels: tuple[str, ...], amount: float = 1) -> None:
        self.by_labels[labels] = self.by_labels.get(labels, 0) + amount

    def get(self, labels: tuple[str, ...]) -> float:
        return self.by_labels.get(labels, 0)

    def plus(self, more: dict[tuple[str, ...], float]) -> Counters:
        """These counts and ``more`` added, as a new `Counters`."""
        total = Counters()
        total.by_labels = dict(self.by_labels)
        for labels, amount in more.items():
            total.add(labels, amount)
        return total

    def forget(self, first: str) -> None:
        for labels in [k for k in self.by_labels if k and k[0] == first]:
            del self.by_labels[labels]

    def __iter__(self) -> Iterator[tuple[tuple[str, ...], float]]:
        return iter(list(self.by_labels.items()))
