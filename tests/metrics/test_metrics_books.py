"""The metrics' books (logfs/metrics/books.py, recorder.py) against an oracle, and
their rendering in Prometheus's text format read back by prometheus_client's parser."""

from __future__ import annotations

import errno

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from logfs.core.log import Store
from logfs.groups import Coordinator
from logfs.metrics import Metrics
from logfs.metrics.books import SECONDS, Histogram
from logfs.metrics.families import Families


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=200))
def test_a_histogram_counts_what_each_bound_holds(values):
    histogram = Histogram(SECONDS)
    for value in values:
        histogram.observe(value)
    cumulative = histogram.cumulative()
    assert [le for le, _ in cumulative] == [repr(float(b)) for b in SECONDS] + ["+Inf"]
    for (le, count), bound in zip(cumulative, [*SECONDS, float("inf")], strict=True):
        assert count == sum(1 for v in values if v <= bound), le  # Prometheus's le: at most
    assert histogram.count == len(values)
    assert abs(histogram.sum - sum(values)) < 1e-6 * max(1, len(values))


def samples(registry) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape, parsed by prometheus_client's own parser."""
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def registry_of(metrics, store, groups=None) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families(metrics, store, groups))
    return registry


def test_a_scrape_shows_the_books_and_the_logs_with_kafkas_names(tmp_path):
    metrics = Metrics()
    with Store(tmp_path / "data") as store:
        store.create_topic("orders", 2)
        store.log("orders", 0).append([b"a", b"bb", b"ccc"])
        store.log("orders", 1).append([b"d"])
        metrics.produced("orders", 3, 150)
        metrics.appended("orders", 1)
        metrics.written("orders", 2)
        metrics.line_written("orders", 4, 0.00003)
        metrics.fetched("orders", 99)
        metrics.request("Produce", 1.5)
        metrics.request("Produce", 700)
        metrics.fuse_request("lookup", "Topic", 0.001, errno.ENOENT)  # not a refusal
        metrics.fuse_request("write", "AppendFile", 0.002, errno.EINVAL)
        metrics.refused("kafka", "bad_request")
        metrics.mirror("backup:9092", "orders", 0, 7)
        found = samples(registry_of(metrics, store))
        topic = (("topic", "orders"),)
        assert found[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == 5
        assert found[("kafka_server_brokertopicmetrics_bytesin_total", topic)] == 156
        assert found[("kafka_server_brokertopicmetrics_bytesout_total", topic)] == 99
        produce = (("request", "Produce"),)
        assert found[("kafka_network_requestmetrics_requests_total", produce)] == 2
        assert found[("kafka_network_requestmetrics_totaltimems_count", produce)] == 2
        assert found[("kafka_network_requestmetrics_totaltimems_sum", produce)] == 701.5
        le = (("le", "1000.0"), ("request", "Produce"))
        assert found[("kafka_network_requestmetrics_totaltimems_bucket", le)] == 2
        le = (("le", "500.0"), ("request", "Produce"))
        assert found[("kafka_network_requestmetrics_totaltimems_bucket", le)] == 1
        write = (("file", "AppendFile"), ("operation", "write"))
        assert found[("logfs_fuse_request_seconds_count", write)] == 2  # general and line
        assert found[("logfs_mount_writes_total", (("path", "line"),))] == 1
        assert found[("logfs_mount_writes_total", (("path", "general"),))] == 1
        assert found[("logfs_rejected_requests_total", (("face", "mount"), ("reason", "EINVAL")))]
        assert ("logfs_rejected_requests_total", (("face", "mount"), ("reason", "ENOENT"))) not in (
            found
        )
        assert found[
            ("logfs_rejected_requests_total", (("face", "kafka"), ("reason", "bad_request")))
        ]
        p0, p1 = (
            (("partition", "0"), ("topic", "orders")),
            (("partition", "1"), ("topic", "orders")),
        )
        assert found[("kafka_log_log_logendoffset", p0)] == 3
        assert found[("kafka_log_log_logendoffset", p1)] == 1
        assert found[("kafka_log_log_logstartoffset", p0)] == 0
        assert found[("kafka_log_log_numlogsegments", p0)] == store.log("orders", 0).segment_count
        assert found[("kafka_log_log_size", p0)] == store.log("orders", 0).size_bytes > 0
        assert found[("logfs_log_last_stable_offset", p0)] == 3
        assert found[("logfs_log_unflushed_messages", p0)] == 3
        assert found[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
        mirror = (("partition", "0"), ("target", "backup:9092"), ("topic", "orders"))
        assert found[("logfs_mirror_lag_messages", mirror)] == 7
        store.flush()
        found = samples(registry_of(metrics, store))
        assert found[("logfs_log_unflushed_messages", p0)] == 0
        assert found[("logfs_log_unflushed_age_seconds", p0)] == 0
        metrics.forget_topic("orders")
        store.delete_topic("orders")
        found = samples(registry_of(metrics, store))
        assert ("kafka_server_brokertopicmetrics_messagesin_total", topic) not in found
        store.create_topic("orders", 1)  # a topic not written to yet: its counters at 0
        found = samples(registry_of(metrics, store))
        assert found[("kafka_server_brokertopicmetrics_messagesin_total", topic)] == 0
        assert found[("kafka_server_brokertopicmetrics_bytesout_total", topic)] == 0


def test_consumer_lag_is_the_end_offset_less_the_committed_offset(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("orders", 1)
        store.log("orders", 0).append([b"x"] * 10)
        groups = Coordinator(store)
        groups.commit_offset("readers", "orders", 0, 4)
        found = samples(registry_of(Metrics(), store, groups))
        labels = (("consumergroup", "readers"), ("partition", "0"), ("topic", "orders"))
        assert found[("kafka_consumergroup_current_offset", labels)] == 4
        assert found[("kafka_consumergroup_lag", labels)] == 6


def test_while_recovering_a_scrape_shows_the_books_alone(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("orders", 1)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Families(Metrics(), store, None, ready=lambda: False))
        found = samples(registry)
        assert found[("logfs_recovering", ())] == 1
        assert not any(name.startswith("kafka_log_") for name, _ in found)
