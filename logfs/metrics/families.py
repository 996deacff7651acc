"""The metric families a scrape shows, with Kafka's names where Kafka has them,
as Prometheus's JMX exporter renders Kafka's MBeans (its example rules for Kafka:
``kafka.server<type=BrokerTopicMetrics, name=MessagesInPerSec, topic=t><>Count``
becomes ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``,
``kafka.log<type=Log, name=Size, topic=t, partition=p><>Value`` becomes
``kafka_log_log_size{topic="t",partition="p"}``), the consumer lag with
kafka_exporter's names, and logfs's own under ``logfs_``. docs/operations.md
lists every family, its type and labels.

Two sources, both in memory: the books `Metrics` keeps as the faces work
(counters, histograms), and what the store's open partitions and the group
coordinator hold already (offsets, sizes, segment counts, committed offsets):
a scrape reads numbers the daemon keeps, it never opens or walks a file of DATA.
A scrape runs on the daemon's event loop (endpoint.py), so none of it changes
while it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from ..core.log import Store
from ..groups import Coordinator
from .books import Counters, Histograms
from .recorder import Metrics

TOPIC = ["topic"]
PARTITION = ["topic", "partition"]


class Reading(NamedTuple):
    """The numbers of one scrape, read on the event loop: copies, which the daemon
    goes on changing no more, for a worker thread to turn into families."""

    messages_in: Counters
    bytes_in: Counters
    bytes_out: Counters
    requests: Histograms
    fuse: Histograms
    writes: Counters
    rejected: Counters
    mirror_lag: dict[tuple[str, str, int], int]
    follower_lag: dict[tuple[str, str, int], tuple[int, int]]
    ready: bool
    logs: list[tuple]  # (topic, partition, *LOG_GAUGES' values, offline)
    lag: list[tuple[str, str, int, int, int | None]]  # group, topic, p, committed, end


# The partitions' gauges: name, help, and the value from a `Log` (and the clock's now).
LOG_GAUGES = (
    ("kafka_log_log_size", "Bytes of a partition's segments"),
    ("kafka_log_log_numlogsegments", "Segments of a partition"),
    ("kafka_log_log_logstartoffset", "A partition's log start offset"),
    ("kafka_log_log_logendoffset", "A partition's log end offset"),
    ("logfs_log_last_stable_offset", "A partition's last stable offset (LSO)"),
    ("logfs_log_open_transactions", "Transactions open on a partition"),
    ("logfs_log_unflushed_messages", "Records appended and not fsynced yet"),
    (
        "logfs_log_unflushed_age_seconds",
        "Age of a partition's oldest record not fsynced yet, at most (0: none)",
    ),
)


class Families:
    """The collector registered with `prometheus_client`: every family, made at each
    scrape in two steps, `read` on the loop and `families` anywhere.

    Args:
        metrics: the books the faces keep.
        store: the daemon's store (its open partitions).
        groups: the daemon's group coordinator (committed offsets), or None.
        ready: whether the store's partitions are recovered: until then a worker
            thread opens them, and a scrape shows the books alone.
    """

    def __init__(
        self,
        metrics: Metrics,
        store: Store,
        groups: Coordinator | None,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.groups = groups
        self.ready = ready

    def collect(self) -> Iterator[Metric]:
        yield from self.families(self.read())

    def describe(self) -> list[Metric]:
        return []  # made at each scrape: nothing to check at registration

    def read(self) -> Reading:
        """The numbers, copied: on the event loop, where nothing changes them meanwhile."""
        m = self.metrics
        # The one-line write()s are kept apart (the hot path): added to the rest here.
        lines = {(topic,): books for topic, books in m.lines.items()}
        ready = self.ready()
        logs, lag = [], []
        # Every topic's counters start at 0 (Prometheus's advice): a topic's first
        # records then show as an increase, not as a series that begins high.
        zeros = {(topic,): 0 for topic, _ in self.store.open_logs} if ready else {}
        if ready:
            for (topic, partition), log in sorted(self.store.open_logs.items()):
                unflushed = log.unflushed_messages
                age = max(0, log.clock() - log.last_flush_ms) / 1000 if unflushed else 0.0
                logs.append((
                    topic, partition, log.size_bytes, log.segment_count, log.log_start_offset,
                    log.next_offset, log.last_stable_offset, len(log.open_transactions()),
                    unflushed, age, log.failure is not None,
                ))  # fmt: skip
            opened = self.store.open_logs
            for group in [] if self.groups is None else self.groups.all_groups():
                for (topic, partition), committed in sorted(group.offsets.items()):
                    log = opened.get((topic, partition))
                    end = None if log is None else log.next_offset
                    lag.append((group.group_id, topic, partition, committed.offset, end))
        return Reading(
            m.messages_in.plus(zeros).plus({k: count for k, (count, _) in lines.items()}),
            m.bytes_in.plus(zeros).plus({k: size for k, (_, size) in lines.items()}),
            m.bytes_out.plus(zeros),
            m.requests.copy(),
            m.fuse.plus(("write", "AppendFile"), m.line_times),
            m.writes.plus({("line",): sum(count for count, _ in m.lines.values())}),
            m.rejected.plus({}),
            dict(m.mirror_lag),
            dict(m.follower_lag),
            ready,
            logs,
            lag,
        )

    def families(self, r: Reading) -> Iterator[Metric]:
        """The families of reading ``r``, with their names, help and labels."""
        yield counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended per topic, by the Kafka listener and the mount",
            TOPIC,
            r.messages_in,
        )
        yield counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes received for appends per topic (Produce record bytes, append write()s)",
            TOPIC,
            r.bytes_in,
        )
        yield counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent to Kafka consumers per topic (Fetch)",
            TOPIC,
            r.bytes_out,
        )
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Kafka requests answered, per request type",
            labels=["request"],
        )
        for labels, books in r.requests:
            requests.add_metric(labels, books.count)
        yield requests
        yield histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Kafka request time in milliseconds, from the whole request read to the answer sent",
            ["request"],
            r.requests,
        )
        yield histogram(
            "logfs_fuse_request_seconds",
            "FUSE requests answered, by operation and kind of file, in seconds",
            ["operation", "file"],
            r.fuse,
        )
        yield counter(
            "logfs_mount_writes",
            "write()s to append files: by the one-line path or the general path",
            ["path"],
            r.writes,
        )
        yield counter(
            "logfs_rejected_requests",
            "Requests refused, by face and reason (an errno's name, or the listener's reason)",
            ["face", "reason"],
            r.rejected,
        )
        mirror = GaugeMetricFamily(
            "logfs_mirror_lag_messages",
            "Records a mirror has not copied yet, per target and partition",
            labels=["target", *PARTITION],
        )
        for (target, topic, partition), value in sorted(r.mirror_lag.items()):
            mirror.add_metric([target, topic, str(partition)], value)
        yield mirror
        for i, (name, what) in enumerate(
            (("messages", "Records"), ("ms", "Milliseconds"))
        ):  # fmt: skip
            follower = GaugeMetricFamily(
                f"logfs_follower_lag_{name}",
                f"{what} a follower is behind its cluster's high watermark, per partition",
                labels=["source", *PARTITION],
            )
            for (source, topic, partition), lag in sorted(r.follower_lag.items()):
                follower.add_metric([source, topic, str(partition)], lag[i])
            yield follower
        yield GaugeMetricFamily(
            "logfs_recovering", "1 while the partitions are being recovered", value=int(not r.ready)
        )
        if r.ready:
            yield from self._logs(r)
            yield from self._lag(r)

    def _logs(self, r: Reading) -> Iterator[Metric]:
        gauges = [GaugeMetricFamily(name, text, labels=PARTITION) for name, text in LOG_GAUGES]
        for topic, partition, *values, _ in r.logs:
            labels = [topic, str(partition)]
            for gauge, value in zip(gauges, values, strict=True):
                gauge.add_metric(labels, value)
        yield from gauges
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions offline after an I/O error",
            value=sum(1 for *_, offline in r.logs if offline),
        )

    def _lag(self, r: Reading) -> Iterator[Metric]:
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "A consumer group's committed offset per partition",
            labels=["consumergroup", *PARTITION],
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Records between a group's committed offset and the partition's end (or its LSO "
            "for read_committed readers: see the LSO)",
            labels=["consumergroup", *PARTITION],
        )
        for group, topic, partition, committed, end in r.lag:
            labels = [group, topic, str(partition)]
            current.add_metric(labels, committed)
            if end is not None:
                lag.add_metric(labels, max(0, end - committed))
        yield current
        yield lag


def counter(name: str, text: str, labels: list[str], counters: Counters) -> Metric:
    family = CounterMetricFamily(name, text, labels=labels)
    for values, count in counters:
        family.add_metric(list(values), count)
    return family


def histogram(name: str, text: str, labels: list[str], histograms: Histograms) -> Metric:
    family = HistogramMetricFamily(name, text, labels=labels)
    for values, books in histograms:
        family.add_metric(list(values), books.cumulative(), books.sum)
    return family
