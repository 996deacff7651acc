"""The listener's protocol: unadvertised APIs, per-partition produce errors,
idempotent producers (also across a restart), topic administration with
librdkafka's admin client, long-poll fetches and fetch sizing, and record
bytes sent with sendfile."""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import threading
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka_helpers import Served, call, closed, connect, encode_request, receive_frame, stored
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from logfs.core.log import Store

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 22
LIST_TRANSACTIONS, WRITE_TXN_MARKERS = 66, 27


def batch(values, *, producer_id=-1, epoch=-1, sequence=-1, timestamp=None) -> bytes:
    """A RecordBatch v2 as kafka-python's producer builds it."""
    builder = DefaultRecordBatchBuilder(2, 0, False, producer_id, epoch, sequence, 1 << 20)
    stamp = int(time.time() * 1000) if timestamp is None else timestamp
    for i, value in enumerate(values):
        builder.append(i, timestamp=stamp, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(topic: str, partitions: dict[int, bytes], version: int = 9, acks: int = -1):
    t = load_request_schema(PRODUCE, version)
    module = __import__(t.__module__, fromlist=["x"])
    return t(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            module.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    module.PartitionProduceData(index=p, records=r) for p, r in partitions.items()
                ),
            ),
        ),
    )


def produce(address, topic, partitions, **kw):
    response = call(address, PRODUCE, 9, produce_request(topic, partitions, **kw))
    [topic_response] = response.responses
    return {p.index: (p.error_code, p.base_offset) for p in topic_response.partition_responses}


def fetch_request(topic, offsets: dict[int, int], *, max_wait_ms=0, min_bytes=0,
                  max_bytes=50 << 20, partition_max_bytes=1 << 20, version=11):  # fmt: skip
    t = load_request_schema(FETCH, version)
    module = __import__(t.__module__, fromlist=["x"])
    return t(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=(
            module.FetchTopic(
                topic=topic,
                partitions=tuple(
                    module.FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


@pytest.fixture
def served(tmp_path):
    with Served(tmp_path / "data", "partitions=2") as s:
        yield s


def test_api_versions_lists_what_is_served_and_an_unadvertised_request_closes(served):
    with connect(served.address) as sock:
        versions = call(served.address, API_VERSIONS, 3, _api_versions_request(3), sock)
        served_keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served_keys[PRODUCE] == (3, 12) and served_keys[FETCH] == (4, 12)
        assert served_keys[LIST_TRANSACTIONS] == (0, 1)  # transactions are served
        assert WRITE_TXN_MARKERS not in served_keys  # between brokers only
        # An API that is not advertised closes the connection, as Kafka's broker does.
        t = load_request_schema(WRITE_TXN_MARKERS, 1)
        sock.sendall(encode_request(WRITE_TXN_MARKERS, 1, t(markers=())))
        assert closed(sock)
    with connect(served.address) as sock:
        # A served API at a version beyond the range, too.
        t = load_request_schema(METADATA, 13)
        body = t(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        sock.sendall(encode_request(METADATA, 13, body))
        assert closed(sock)
    with connect(served.address) as sock:  # the listener goes on
        again = call(served.address, API_VERSIONS, 3, _api_versions_request(3), sock)
        assert again.error_code == ErrorCode.none


def test_api_versions_at_an_unknown_version_says_which_are_served(served):
    # Kafka's rule: answered in version 0's layout, with the versions served.
    with connect(served.address) as sock:
        frame = encode_request(API_VERSIONS, 3, _api_versions_request(3))
        frame = frame[:6] + (99).to_bytes(2, "big") + frame[8:]  # claim version 99
        sock.sendall(frame)
        from kafka_helpers import decode_response

        _, answer = decode_response(API_VERSIONS, 0, receive_frame(sock))
        assert answer.error_code == ErrorCode.unsupported_version
        assert any(k.api_key == PRODUCE for k in answer.api_keys)


def _api_versions_request(version):
    t = load_request_schema(API_VERSIONS, version)
    return t(client_software_name="logfs-test", client_software_version="1")


def test_produce_errors_per_partition_and_nothing_appended(served):
    address = served.address
    good = batch([b"a", b"b"])
    assert produce(address, "items", {0: good}) == {0: (ErrorCode.none, 0)}
    corrupt = bytearray(batch([b"x"]))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    wrong_count = bytearray(batch([b"y", b"z"]))
    wrong_count[57:61] = (5).to_bytes(4, "big")  # records count 5, two records
    answer = produce(address, "items", {0: bytes(corrupt), 1: bytes(wrong_count)})
    assert answer[0] == (ErrorCode.corrupt_message, -1)
    assert answer[1] == (ErrorCode.corrupt_message, -1)
    assert produce(address, "nosuch", {0: good}) == {0: (ErrorCode.unknown_topic_or_partition, -1)}
    assert produce(address, "items", {7: good}) == {7: (ErrorCode.unknown_topic_or_partition, -1)}
    big = batch([b"v" * 2_000_000])  # over the default max.message.bytes (1 MiB)
    assert produce(address, "items", {0: big})[0][0] == ErrorCode.message_too_large
    assert [r.value for r in stored(served.data, "items", 0)] == [b"a", b"b"]
    assert stored(served.data, "items", 1) == []
    # A compacted topic takes keyed records only.
    assert produce(address, "compacted", {0: good}) == {0: (ErrorCode.invalid_record, -1)}
    assert stored(served.data, "compacted") == []
    # Only the group coordinator appends to its topic.
    answer = produce(address, "__consumer_offsets", {0: good})
    assert answer == {0: (ErrorCode.invalid_topic_exception, -1)}


@pytest.fixture(autouse=True)
def _topic(request, tmp_path):
    """The Store creates the topics these tests produce to, before the listener starts."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("items", partitions=2)
        store.create_topic("compacted", config={"cleanup.policy": "compact"})
    yield


def test_idempotent_retry_is_acknowledged_once_also_after_a_restart(tmp_path):
    data = tmp_path / "data"
    with Served(data) as served:
        t = load_request_schema(INIT_PRODUCER_ID, 4)
        body = t(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60))
        init = call(served.address, INIT_PRODUCER_ID, 4, body)
        assert init.error_code == ErrorCode.none and init.producer_id >= 0
        pid = init.producer_id
        first = batch([b"one", b"two"], producer_id=pid, epoch=0, sequence=0)
        assert produce(served.address, "items", {0: first}) == {0: (ErrorCode.none, 0)}
        assert produce(served.address, "items", {0: first}) == {0: (ErrorCode.none, 0)}  # a retry
        gap = batch([b"gap"], producer_id=pid, epoch=0, sequence=5)
        assert (
            produce(served.address, "items", {0: gap})[0][0]
            == ErrorCode.out_of_order_sequence_number
        )
        second = batch([b"three"], producer_id=pid, epoch=0, sequence=2)
        assert produce(served.address, "items", {0: second}) == {0: (ErrorCode.none, 2)}
        assert served.terminate() == 0
    with Served(data) as served:  # the producer state is read back from the log
        assert produce(served.address, "items", {0: second}) == {0: (ErrorCode.none, 2)}
        assert produce(served.address, "items", {0: first}) == {0: (ErrorCode.none, 0)}
        following = batch([b"four"], producer_id=pid, epoch=0, sequence=3)
        assert produce(served.address, "items", {0: following}) == {0: (ErrorCode.none, 3)}
        stale = batch([b"stale"], producer_id=pid, epoch=0, sequence=4)
        newer = batch([b"newer"], producer_id=pid, epoch=1, sequence=0)
        assert produce(served.address, "items", {0: newer}) == {0: (ErrorCode.none, 4)}
        assert (
            produce(served.address, "items", {0: stale})[0][0] == ErrorCode.invalid_producer_epoch
        )
    assert [r.value for r in stored(data, "items")] == [b"one", b"two", b"three", b"four", b"newer"]


def test_kafka_python_idempotent_producer_each_record_once(served):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=served.bootstrap, enable_idempotence=True, acks="all"
    )
    futures = [producer.send("items", value=f"r{i}".encode(), partition=i % 2) for i in range(400)]
    producer.flush(30)
    offsets = {(f.get(10).partition, f.get(10).offset) for f in futures}
    producer.close()
    assert len(offsets) == 400
    for p in (0, 1):
        assert [r.value for r in stored(served.data, "items", p)] == [
            f"r{i}".encode() for i in range(p, 400, 2)
        ]


def test_admin_client_manages_topics_and_settings(served):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    futures = admin.create_topics([NewTopic("admin", 2, 1, config={"retention.ms": "3600000"})])
    assert futures["admin"].result(10) is None
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("admin", 1, 1)])["admin"].result(10)
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR"):
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(10)
    assert admin.create_partitions([NewPartitions("admin", 4)])["admin"].result(10) is None
    with pytest.raises(Exception, match="INVALID_PARTITIONS"):  # fewer than it has
        admin.create_partitions([NewPartitions("admin", 3)])["admin"].result(10)
    with pytest.raises(Exception, match="val=17,"):  # INVALID_TOPIC_EXCEPTION: the coordinator's
        admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(10)
    resource = ConfigResource("topic", "admin")
    described = admin.describe_configs([resource])[resource].result(10)
    assert described["retention.ms"].value == "3600000"
    assert described["segment.bytes"].is_default
    change = ConfigResource(
        "topic",
        "admin",
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    assert admin.incremental_alter_configs([change])[change].result(10) is None
    bad = ConfigResource(
        "topic",
        "admin",
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([bad])[bad].result(10)
    with Store(served.data, read_only=True) as store:
        assert store.topics()["admin"] == 4
    assert (served.data / "admin-3").is_dir()
    properties = list(served.data.rglob("admin.properties"))
    assert len(properties) == 1
    text = properties[0].read_text()
    assert "retention.ms=7200000" in text and "cleanup.policy=compact" in text
    assert admin.delete_topics(["admin"])["admin"].result(10) is None
    assert not (served.data / "admin-0").exists()
    assert "admin" not in admin.list_topics(timeout=10).topics


def test_long_poll_answers_when_records_arrive(served):
    result = {}

    def poll():
        started = time.monotonic()
        answer = call(served.address, FETCH, 11,
                      fetch_request("items", {0: 0}, max_wait_ms=20_000, min_bytes=1))  # fmt: skip
        result["seconds"] = time.monotonic() - started
        result["answer"] = answer

    waiter = threading.Thread(target=poll)
    waiter.start()
    deadline = time.monotonic() + 10
    while not _connected(served):  # the fetch is waiting in the listener
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert produce(served.address, "items", {0: batch([b"wake"])}) == {0: (ErrorCode.none, 0)}
    waiter.join(30)
    assert result["seconds"] < 15
    [part] = result["answer"].responses[0].partitions
    assert part.high_watermark == 1 and part.last_stable_offset == 1 and part.log_start_offset == 0
    assert b"wake" in part.records
    # Nothing to fetch: answered once max_wait_ms has passed, with empty records.
    started = time.monotonic()
    answer = call(served.address, FETCH, 11,
                  fetch_request("items", {1: 0}, max_wait_ms=300, min_bytes=1))  # fmt: skip
    assert time.monotonic() - started >= 0.3
    assert answer.responses[0].partitions[0].records in (b"", None)


def _connected(served) -> bool:
    """Whether a client connection to the listener is established (/proc/net/tcp)."""
    port = f":{served.address[1]:04X} "
    with open("/proc/net/tcp") as f:
        return any(line.split()[1].endswith(port.strip()) and line.split()[3] == "01"
                   for line in f.readlines()[1:])  # fmt: skip


def test_fetch_sizes_as_kafka_and_reports_offset_errors(served):
    batches = [batch([f"{i}-{j}".encode() * 100 for j in range(10)]) for i in range(5)]
    for i, b in enumerate(batches):
        assert produce(served.address, "items", {0: b}) == {0: (ErrorCode.none, i * 10)}
    size = len(batches[0])
    # A limit below one batch still gets one whole batch (KIP-74).
    answer = call(served.address, FETCH, 11,
                  fetch_request("items", {0: 0}, partition_max_bytes=10))  # fmt: skip
    records = answer.responses[0].partitions[0].records
    assert len(records) == size
    assert records[12:] == batches[0][12:]  # all but the base offset, which the broker sets
    # From an offset inside the third batch: that batch on, two and a half batches' room,
    # cut where the room ends (Kafka's clients drop the partial batch).
    answer = call(served.address, FETCH, 11,
                  fetch_request("items", {0: 25}, partition_max_bytes=int(size * 2.5)))  # fmt: skip
    records = answer.responses[0].partitions[0].records
    assert len(records) == int(size * 2.5) and records[12:size] == batches[2][12:]
    # max_bytes over two partitions: the second gets nothing once the first used it up.
    answer = call(served.address, FETCH, 11,
                  fetch_request("items", {0: 0, 1: 0}, max_bytes=size))  # fmt: skip
    first, second = answer.responses[0].partitions
    assert len(first.records) == size and second.records in (b"", None)
    answer = call(served.address, FETCH, 11, fetch_request("items", {0: 51}))
    assert answer.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    answer = call(served.address, FETCH, 11, fetch_request("nosuch", {0: 0}))
    assert answer.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_record_bytes_go_out_by_sendfile(served):
    from kafka import KafkaConsumer, TopicPartition

    assert shutil.which("strace"), "strace is not installed (mount_scripts/install.sh installs it)"
    values = [bytes([i % 256]) * 4000 for i in range(500)]
    for i in range(0, 500, 50):
        produce(served.address, "items", {0: batch(values[i : i + 50])})
    segment = sum(f.stat().st_size for f in (served.data / "items-0").glob("*.log"))
    trace = served.data.parent / "strace.out"
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=sendfile", "-o", str(trace),
                               "-p", str(served.proc.pid)], stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not _traced(served.proc.pid):
            assert time.monotonic() < deadline, "strace did not attach"
            time.sleep(0.05)
        consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=3000)  # fmt: skip
        consumer.assign([TopicPartition("items", 0)])
        consumer.seek_to_beginning()
        assert [m.value for m in consumer] == values
        consumer.close()
    finally:
        tracer.terminate()
        tracer.wait(10)
    sent = sum(int(n) for n in re.findall(r"sendfile\(.*\) = (\d+)", trace.read_text()))
    assert sent >= segment


def _traced(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        return re.search(r"^TracerPid:\s*[1-9]", f.read(), re.M) is not None
