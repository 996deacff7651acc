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


class Families:
    """The collector registered with `prometheus_client`: every family, made at each scrape.

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
        yield from self._books()
        ready = self.ready()
        yield GaugeMetricFamily(
            "logfs_recovering", "1 while the partitions are being recovered", value=int(not ready)
        )
        if ready:
            yield from self._logs()
            yield from self._lag()

    def describe(self) -> list[Metric]:
        return []  # made at each scrape: nothing to check at registration

    # ------------------------------------------------------------ kept by the faces

    def _books(self) -> Iterator[Metric]:
        m = self.metrics
        yield counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended per topic, by the Kafka listener and the mount",
            TOPIC,
            m.messages_in,
        )
        yield counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes received for appends per topic (Produce record bytes, append write()s)",
            TOPIC,
            m.bytes_in,
        )
        yield counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent to Kafka consumers per topic (Fetch)",
            TOPIC,
            m.bytes_out,
        )
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Kafka requests answered, per request type",
            labels=["request"],
        )
        for labels, books in m.requests:
            requests.add_metric(labels, books.count)
        yield requests
        yield histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Kafka request time in milliseconds, from the whole request read to the answer sent",
            ["request"],
            m.requests,
        )
        yield histogram(
            "logfs_fuse_request_seconds",
            "FUSE requests answered, by operation and kind of file, in seconds",
            ["operation", "file"],
            m.fuse,
        )
        yield counter(
            "logfs_mount_writes",
            "write()s to append files: by the one-line path or the general path",
            ["path"],
            m.writes,
        )
        yield counter(
            "logfs_rejected_requests",
            "Requests refused, by face and reason (an errno's name, or the listener's reason)",
            ["face", "reason"],
            m.rejected,
        )
        lag = GaugeMetricFamily(
            "logfs_mirror_lag_messages",
            "Records a mirror has not copied yet, per target and partition",
            labels=["target", *PARTITION],
        )
        for (target, topic, partition), value in sorted(m.mirror_lag.items()):
            lag.add_metric([target, topic, str(partition)], value)
        yield lag

    # ------------------------------------------------------------ kept by the logs

    def _logs(self) -> Iterator[Metric]:
        gauges = {
            name: GaugeMetricFamily(name, text, labels=PARTITION)
            for name, text in (
                ("kafka_log_log_size", "Bytes of a partition's segments"),
                ("kafka_log_log_numlogsegments", "Segments of a partition"),
                ("kafka_log_log_logstartoffset", "A partition's log start offset"),
                ("kafka_log_log_logendoffset", "A partition's log end offset"),
                ("logfs_log_last_stable_offset", "A partition's last stable offset (LSO)"),
                ("logfs_log_open_transactions", "Transactions open on a partition"),
                ("logfs_log_unflushed_messages", "Records appended and not fsynced yet"),
                (
                    "logfs_log_unflushed_age_seconds",
                    "Age of a partition's oldest record not fsynced yet (0: none)",
                ),
            )
        }
        offline = 0
        for (topic, partition), log in sorted(self.store.open_logs.items()):
            labels = [topic, str(partition)]
            if log.failure is not None:
                offline += 1
            unflushed = log.unflushed_messages
            age = max(0, log.clock() - log.last_flush_ms) / 1000 if unflushed else 0.0
            for name, value in (
                ("kafka_log_log_size", log.size_bytes),
                ("kafka_log_log_numlogsegments", log.segment_count),
                ("kafka_log_log_logstartoffset", log.log_start_offset),
                ("kafka_log_log_logendoffset", log.next_offset),
                ("logfs_log_last_stable_offset", log.last_stable_offset),
                ("logfs_log_open_transactions", len(log.open_transactions())),
                ("logfs_log_unflushed_messages", unflushed),
                ("logfs_log_unflushed_age_seconds", age),
            ):
                gauges[name].add_metric(labels, value)
        yield from gauges.values()
        yield GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions offline after an I/O error",
            value=offline,
        )

    def _lag(self) -> Iterator[Metric]:
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
        logs = self.store.open_logs
        for group in [] if self.groups is None else self.groups.all_groups():
            for (topic, partition), committed in sorted(group.offsets.items()):
                labels = [group.group_id, topic, str(partition)]
                current.add_metric(labels, committed.offset)
                log = logs.get((topic, partition))
                if log is not None:
                    lag.add_metric(labels, max(0, log.next_offset - committed.offset))
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
