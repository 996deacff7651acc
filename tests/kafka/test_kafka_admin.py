"""Kafka 4's admin surface with real clients: topics provisioned with every topic
setting of Kafka 4 (kafka-python's and confluent-kafka's admin clients), refused
values, list settings' APPEND and SUBTRACT, the broker's settings described and
altered, DeleteRecords through kafka-python, confluent-kafka and KafkaJS,
OffsetForLeaderEpoch and the leader-epoch-checkpoint, DescribeLogDirs,
DescribeCluster, DescribeProducers, min.insync.replicas, timestamp bounds and
LogAppendTime in produce answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka_helpers import Served, call
from kio.index import load_request_schema

from logfs.core.log import Store

# Every topic-level setting of Kafka 4's documentation, none at its default.
KAFKA4 = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "5",
    "compression.lz4.level": "10",
    "compression.type": "zstd",
    "compression.zstd.level": "4",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "0",
    "flush.messages": "10",
    "flush.ms": "500",
    "follower.replication.throttled.replicas": "0:0,1:0",
    "index.interval.bytes": "1000",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "1000000",
    "local.retention.ms": "100000",
    "max.compaction.lag.ms": "100000",
    "max.message.bytes": "100000",
    "message.downconversion.enable": "false",
    "message.timestamp.after.max.ms": "60000",
    "message.timestamp.before.max.ms": "100000000",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.3",
    "min.compaction.lag.ms": "10",
    "min.insync.replicas": "1",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "false",
    "retention.bytes": "100000000",
    "retention.ms": "86400000",
    "segment.bytes": "1048576",
    "segment.index.bytes": "1048576",
    "segment.jitter.ms": "100",
    "segment.ms": "3600000",
    "unclean.leader.election.enable": "true",
}
BAD = [
    ("compression.gzip.level", "0"),
    ("compression.lz4.level", "18"),
    ("min.insync.replicas", "0"),
    ("segment.jitter.ms", "-1"),
    ("message.timestamp.after.max.ms", "-5"),
    ("local.retention.ms", "-3"),
    ("remote.storage.enable", "true"),  # no tiered storage here
    ("follower.replication.throttled.replicas", "0:x"),
    ("preallocate", "yes"),
    ("message.format.version", "3.0"),  # gone in Kafka 4
]
TOPIC_SOURCE, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 3, 4, 5


@pytest.fixture
def served(tmp_path):
    with Served(tmp_path / "data", "partitions=1", "retention.bytes=5000000") as s:
        yield s


def test_topics_provisioned_with_every_kafka_4_setting_through_two_admin_clients(served):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    admin.create_topics([NewTopic("by-confluent", 2, 1, config=KAFKA4)])["by-confluent"].result(30)
    kp = KafkaAdminClient(bootstrap_servers=served.bootstrap)
    kp.create_topics([KNewTopic("by-kafka-python", 1, 1, topic_configs=KAFKA4)])
    for topic in ("by-confluent", "by-kafka-python"):
        resource = ConfigResource(ResourceType.TOPIC, topic)
        described = admin.describe_configs([resource])[resource].result(30)
        for key, value in KAFKA4.items():
            assert (described[key].value, described[key].source) == (value, TOPIC_SOURCE), key
        assert described["retention.bytes"].value == KAFKA4["retention.bytes"]
    # each refused as Kafka refuses it, and no topic made
    for n, (key, value) in enumerate(BAD):
        future = admin.create_topics([NewTopic(f"bad{n}", 1, 1, config={key: value})])[f"bad{n}"]
        with pytest.raises(ck.KafkaException) as e:
            future.result(30)
        assert e.value.args[0].code() == ck.KafkaError.INVALID_CONFIG, key
    lag = {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}
    with pytest.raises(ck.KafkaException, match="conflict topic config"):
        admin.create_topics([NewTopic("lags", 1, 1, config=lag)])["lags"].result(30)
    kp.close()
    with Store(served.data, read_only=True) as store:
        assert not any(t.startswith(("bad", "lags")) for t in store.topics())
        config = store.topic_config("by-kafka-python")
        assert (config.min_insync_replicas, config.segment_jitter_ms) == (1, 100)
        assert config.preallocate and config.file_delete_delay_ms == 0
    # the mount's config file shows the kept-but-unused ones after a note (checked offline)
    from logfs.mount.files import config_text

    text = config_text(config).decode()
    used, _, kept = text.partition("# kept and shown, not used by logfs")
    assert "unclean.leader.election.enable=true" in kept and "segment.jitter.ms=100" in used


def test_list_settings_take_append_and_subtract_and_others_refuse_them(served):
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    admin.create_topics([NewTopic("lists", 1, 1)])["lists"].result(30)

    def change(key, value, op):
        entry = ConfigEntry(key, value, incremental_operation=op)
        resource = ConfigResource(ResourceType.TOPIC, "lists", incremental_configs=[entry])
        return admin.incremental_alter_configs([resource])[resource].result(30)

    def value(key):
        resource = ConfigResource(ResourceType.TOPIC, "lists")
        return admin.describe_configs([resource])[resource].result(30)[key].value

    change("cleanup.policy", "compact", AlterConfigOpType.APPEND)
    assert value("cleanup.policy") == "compact,delete"
    change("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)
    assert value("cleanup.policy") == "compact"
    change("leader.replication.throttled.replicas", "0:0", AlterConfigOpType.APPEND)
    change("leader.replication.throttled.replicas", "1:0", AlterConfigOpType.APPEND)
    assert value("leader.replication.throttled.replicas") == "0:0,1:0"
    with pytest.raises(ck.KafkaException, match="append is not allowed"):
        change("retention.ms", "5", AlterConfigOpType.APPEND)


def test_the_brokers_settings_are_described_and_the_dynamic_ones_altered(tmp_path):
    data = tmp_path / "data"
    with Served(data, "retention.ms=100000", "log.cleaner.backoff.ms=2000") as served:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        broker = ConfigResource(ResourceType.BROKER, "0")
        described = admin.describe_configs([broker])[broker].result(30)
        assert described["log.dirs"].value == str(data) and described["log.dirs"].is_read_only
        assert (described["log.retention.ms"].value, described["log.retention.ms"].source) == (
            "100000",
            STATIC,
        )
        assert described["log.cleaner.backoff.ms"].value == "2000"
        assert described["log.segment.bytes"].source == DEFAULT
        assert described["group.consumer.heartbeat.interval.ms"].value == "5000"
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        entry = ConfigEntry(
            "log.segment.bytes", "2000000", incremental_operation=AlterConfigOpType.SET
        )
        altered = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
        admin.incremental_alter_configs([altered])[altered].result(30)
        topic = ConfigResource(ResourceType.TOPIC, "t")
        seen = admin.describe_configs([topic])[topic].result(30)["segment.bytes"]
        assert (seen.value, seen.source) == ("2000000", DYNAMIC_DEFAULT)
        read_only = ConfigEntry(
            "log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET
        )
        refused = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[read_only])
        with pytest.raises(ck.KafkaException, match="dynamically"):
            admin.incremental_alter_configs([refused])[refused].result(30)
        t = load_request_schema(DESCRIBE_CONFIGS, 4)
        m = sys.modules[t.__module__]
        other = m.DescribeConfigsResource(
            resource_type=4, resource_name="7", configuration_keys=None
        )  # another broker's id (librdkafka would send it to that broker)
        body = t(resources=(other,), include_synonyms=False, include_documentation=False)
        [result] = call(served.address, DESCRIBE_CONFIGS, 4, body).results
        assert result.error_code.name == "invalid_request"
        assert "Unexpected broker id" in result.error_message
    with Served(data) as served:  # the dynamic value is kept across a restart
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        topic = ConfigResource(ResourceType.TOPIC, "t")
        assert admin.describe_configs([topic])[topic].result(30)["segment.bytes"].value == "2000000"
    with Store(data, read_only=True) as store:
        assert store.topic_overrides("t") == {}  # a default, not the topic's own


def _produce(bootstrap, topic, count, **conf):
    p = ck.Producer({"bootstrap.servers": bootstrap, **conf})
    for i in range(count):
        p.produce(topic, b"value-%d" % i)
    assert p.flush(30) == 0


def low_high(bootstrap, topic):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
    finally:
        c.close()


def test_delete_records_through_three_clients_moves_the_low_watermark(tmp_path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient

    data = tmp_path / "data"
    with Served(data, "segment.bytes=2000", "file.delete.delay.ms=0") as served:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic("dr", 1, 1)])["dr"].result(30)
        _produce(served.bootstrap, "dr", 300, **{"batch.num.messages": 10})
        segments = len(list((data / "dr-0").glob("*.log")))
        # confluent-kafka
        result = admin.delete_records([ck.TopicPartition("dr", 0, 50)])
        assert next(iter(result.values())).result(30).low_watermark == 50
        assert low_high(served.bootstrap, "dr") == (50, 300)
        # kafka-python
        kp = KafkaAdminClient(bootstrap_servers=served.bootstrap)
        kp.delete_records({TopicPartition("dr", 0): 120})
        kp.close()
        assert low_high(served.bootstrap, "dr") == (120, 300)
        # KafkaJS
        node_modules = Path(sys.prefix) / "node" / "node_modules"
        script = Path(__file__).resolve().parents[1] / "helpers" / "kafkajs" / "delete_records.js"
        done = subprocess.run(
            ["node", str(script), served.bootstrap, "dr", "200"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "NODE_PATH": str(node_modules)},
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == [[0, "200", "300"]]
        assert low_high(served.bootstrap, "dr") == (200, 300)
        # the whole segments below went; consumers start at 200
        assert len(list((data / "dr-0").glob("*.log"))) < segments
        consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, consumer_timeout_ms=3000)
        consumer.assign([TopicPartition("dr", 0)])
        consumer.seek_to_beginning()
        offsets = [m.offset for m in consumer]
        consumer.close()
        assert offsets == list(range(200, 300))
        # in Kafka's checkpoint, before the answer
        lines = (data / "log-start-offset-checkpoint").read_text().splitlines()
        assert "dr 0 200" in lines
        assert (data / "dr-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 200\n"
        # past the end and a compacted topic are refused, as by Kafka
        result = admin.delete_records([ck.TopicPartition("dr", 0, 400)])
        with pytest.raises(ck.KafkaException, match="OFFSET_OUT_OF_RANGE"):
            next(iter(result.values())).result(30)
        admin.create_topics([NewTopic("kept", 1, 1, config={"cleanup.policy": "compact"})])[
            "kept"
        ].result(30)
        result = admin.delete_records([ck.TopicPartition("kept", 0, 0)])
        with pytest.raises(ck.KafkaException, match="POLICY_VIOLATION"):
            next(iter(result.values())).result(30)
        served.kill()  # a kill after the answer: the new start was checkpointed
    with Served(data) as served:
        assert low_high(served.bootstrap, "dr") == (200, 300)


OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, DESCRIBE_PRODUCERS = 23, 32, 61


def test_offset_for_leader_epoch_log_dirs_cluster_and_producers(served):
    from kafka.admin import KafkaAdminClient

    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    admin.create_topics([NewTopic("e", 1, 1)])["e"].result(30)
    _produce(served.bootstrap, "e", 25, **{"enable.idempotence": True})
    t = load_request_schema(OFFSET_FOR_LEADER_EPOCH, 4)
    m = sys.modules[t.__module__]

    def ask(current, epoch):
        part = m.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=current, leader_epoch=epoch
        )
        body = t(replica_id=-1, topics=(m.OffsetForLeaderTopic(topic="e", partitions=(part,)),))
        [answer] = call(served.address, OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions
        return answer.error_code.name, answer.leader_epoch, answer.end_offset

    assert ask(-1, 0) == ("none", 0, 25) and ask(0, 0) == ("none", 0, 25)
    assert ask(-1, 3) == ("none", -1, -1)  # past the latest epoch: undefined
    assert ask(4, 0)[0] == "unknown_leader_epoch"
    assert (served.data / "e-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    kp = KafkaAdminClient(bootstrap_servers=served.bootstrap)
    [broker] = kp.describe_log_dirs()
    kp.close()
    [log_dir] = broker["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(served.data)
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    size = sum(f.stat().st_size for f in (served.data / "e-0").glob("*.log"))
    [topic] = [t for t in log_dir["topics"] if t["name"] == "e"]
    assert [(p["partition_index"], p["partition_size"]) for p in topic["partitions"]] == [(0, size)]
    cluster = admin.describe_cluster().result(30)
    assert cluster.cluster_id == "logfs" and [n.id for n in cluster.nodes] == [0]
    t = load_request_schema(DESCRIBE_PRODUCERS, 0)
    m = sys.modules[t.__module__]
    body = t(topics=(m.TopicRequest(name="e", partition_indexes=(0,)),))
    [part] = call(served.address, DESCRIBE_PRODUCERS, 0, body).topics[0].partitions
    [state] = part.active_producers
    assert state.producer_id >= 0 and state.producer_epoch == 0 and state.last_sequence == 24
    assert abs(state.last_timestamp - time.time() * 1000) < 120_000


def test_min_insync_replicas_timestamps_and_log_append_time(served):
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    topics = {
        "isr2": {"min.insync.replicas": "2"},
        "soon": {
            "message.timestamp.after.max.ms": "60000",
            "message.timestamp.before.max.ms": "60000",
        },
        "stamped": {"message.timestamp.type": "LogAppendTime"},
    }
    for name, config in topics.items():
        admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)

    def deliver(topic, acks, timestamp=0):
        got = []
        p = ck.Producer(
            {"bootstrap.servers": served.bootstrap, "acks": acks, "retries": 0,
             "message.timeout.ms": 10000}
        )  # fmt: skip
        p.produce(topic, b"v", timestamp=timestamp, on_delivery=lambda e, m: got.append((e, m)))
        p.flush(30)
        return got[0]

    error, _ = deliver("isr2", "all")
    assert error.code() == ck.KafkaError.NOT_ENOUGH_REPLICAS  # one replica in sync, two wanted
    assert deliver("isr2", "1")[0] is None
    now = int(time.time() * 1000)
    assert deliver("soon", "1", now + 10 * 60000)[0].code() == ck.KafkaError.INVALID_TIMESTAMP
    assert deliver("soon", "1", now - 10 * 60000)[0].code() == ck.KafkaError.INVALID_TIMESTAMP
    assert deliver("soon", "1", now)[0] is None
    error, message = deliver("stamped", "1", now - 3600_000)
    kind, stamp = message.timestamp()
    assert error is None and kind == ck.TIMESTAMP_LOG_APPEND_TIME
    with Store(served.data, read_only=True) as store:
        [record] = store.log("stamped", 0).scan()
    assert stamp == record.timestamp and abs(stamp - now) < 60_000
