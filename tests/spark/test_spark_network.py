"""The Spark source and sink over Kafka's protocol (``kafka.bootstrap.servers`` instead of
``path``), and the `RemoteStore` under them.

The Spark tests talk to a ``logfs serve`` whose data directory Spark provably cannot see: the
listener runs in a private mount namespace on a tmpfs mounted over a directory that stays empty
from here. Records are produced and checked with kafka-python. The `RemoteStore` tests need no
Spark: they compare what it reads through a listener with the Store API on the same DATA.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka_helpers import Served, make_pki

from logfs import Store
from logfs.core.client import Producer, RemoteStore
from logfs.core.client import remote as remote_module
from logfs.core.client.wire import AuthenticationError, WireError
from logfs.core.config import CONSUMER_OFFSETS
from logfs.core.errors import OffsetOutOfRangeError, UnknownTopicError
from logfs.core.format import decode_records, read_header
from logfs.spark.options import parse_options
from logfs.spark.plan import subscribed

T0 = (int(time.time()) - 3600) * 1000  # record timestamps: recent, or retention.ms takes them
DEAD = "127.0.0.1:1"  # nothing listens there: a bootstrap list goes on to the next server
USER, PASSWORD = "spark", 'p "w" \\ d'  # quotes and a backslash, escaped in the JAAS line
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{USER}" password="p \\"w\\" \\\\ d";'
)
SASL_OPTIONS = {
    "kafka.security.protocol": "SASL_PLAINTEXT",
    "kafka.sasl.mechanism": "PLAIN",
    "kafka.sasl.jaas.config": JAAS,
}
KAFKA_SASL = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": USER,
    "sasl_plain_password": PASSWORD,
}


class Hidden(Served):
    """``logfs serve`` on a tmpfs mounted over ``root/hidden`` in a private mount namespace:
    DATA (``root/hidden/data``) exists for the listener only; here the directory is empty."""

    def __init__(self, root: Path, *options: str) -> None:
        self.hidden = root / "hidden"
        self.hidden.mkdir()
        super().__init__(self.hidden / "data", *options)
        self.log = root / "serve.log"

    def command(self) -> list[str]:
        hidden, data = shlex.quote(str(self.hidden)), shlex.quote(str(self.data))
        script = (
            f"mount -t tmpfs -o mode=0755 logfs-hidden {hidden} && mkdir -m 0777 {data} "
            f"&& exec {shlex.join(super().command())}"
        )
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]

    def partition_dirs(self) -> set[str]:
        """The listener's own view of DATA (its mount namespace, through /proc)."""
        return {p.name for p in Path(f"/proc/{self.proc.pid}/root{self.data}").iterdir()}


def consume(bootstrap: str, topic: str, partitions: int, **client) -> list[tuple]:
    """Every record of ``topic`` as kafka-python's consumer reads it with assign()."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **client)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    end = consumer.end_offsets(tps)
    rows: list[tuple] = []
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < end[tp] for tp in tps):
        assert time.monotonic() < deadline, "kafka-python did not read to the end"
        for messages in consumer.poll(timeout_ms=500).values():
            rows += [
                (m.topic, m.partition, m.offset, m.key, m.value, m.timestamp,
                 [(k, v) for k, v in m.headers] or None)
                for m in messages
            ]  # fmt: skip
    consumer.close()
    return sorted(rows)


def bag(rows) -> list:
    """``rows`` in an order that does not depend on theirs (keys may be None)."""
    return sorted(rows, key=repr)


def spark_rows(df) -> list[tuple]:
    """The rows in `consume`'s form."""
    cols = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp)"]
    with_headers = "headers" in df.columns
    out = []
    for r in df.selectExpr(*cols, *(["headers"] if with_headers else [])).collect():
        key = None if r[3] is None else bytes(r[3])
        headers = None
        if with_headers and r[6] is not None:
            headers = [(h["key"], bytes(h["value"])) for h in r[6]]
        out.append((r[0], r[1], r[2], key, bytes(r[4]), r[5], headers))
    return sorted(out)


def produce_clicks(bootstrap: str, topic: str, count: int, **client) -> None:
    """``count`` records over three partitions with kafka-python, half gzip-compressed:
    record i has value ``v<i>``, a key unless i % 5 == 0, a header when i is odd and the
    timestamp T0 + i."""
    for codec, indexes in ((None, range(count // 2)), ("gzip", range(count // 2, count))):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20, **client
        )
        for i in indexes:
            producer.send(
                topic,
                value=b"v%d-" % i + b"x" * (i % 50),
                key=None if i % 5 == 0 else b"k%d" % (i % 7),
                headers=[("i", b"%d" % i)] if i % 2 else [],
                partition=i % 3,
                timestamp_ms=T0 + i,
            )
        producer.flush()
        producer.close()


# ---------------------------------------------------------------- RemoteStore, no Spark


@pytest.fixture
def served_data(tmp_path):
    """DATA with topics of several shapes (batches of 1..40 records, one of ~300 KiB, a
    gzip topic), and a loopback listener on it."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", 2)
        store.create_topic("z", 1, {"compression.type": "gzip"})
        for n in range(1, 41):
            store.log("t", 0).append([b"r%d" % n] * n, timestamp=T0 + n)
        store.log("t", 0).append([b"big" * 100_000], timestamp=T0 + 100)
        store.log("t", 0).append([b"after"], timestamp=T0 + 101)
        store.log("z", 0).append([b"zip%d" % i for i in range(500)])
    with Served(data) as served:
        yield data, served


def test_remote_store_reads_what_the_store_reads(served_data, monkeypatch):
    data, served = served_data
    monkeypatch.setattr(remote_module, "FETCH_BYTES", 4096)  # many Fetch requests a range
    with Store(data, read_only=True) as local, RemoteStore(f"kafka://{served.bootstrap}") as net:
        assert dict(net.topics()) == dict(local.topics()) == {"t": 2, "z": 1}
        for topic, partition, ranges in (
            ("t", 0, [(None, None), (0, 1), (7, 93), (400, 821), (820, 822), (821, 10**6)]),
            ("t", 1, [(None, None)]),
            ("z", 0, [(None, None), (250, 251)]),
        ):
            mine, theirs = local.log(topic, partition), net.log(topic, partition)
            assert (theirs.log_start_offset, theirs.next_offset) == (
                mine.log_start_offset,
                mine.next_offset,
            )
            for start, end in ranges:
                got = [(h, bytes(b)) for h, b in theirs.raw_batches(start, end)]
                assert got == [(h, bytes(b)) for h, b in mine.raw_batches(start, end)]
        log = net.log("t", 0)
        for ts in (0, T0 + 3, T0 + 40, T0 + 101):
            assert log.offset_for_time(ts) == local.log("t", 0).offset_for_time(ts)
        assert log.offset_for_time(T0 + 102) is None
        codecs = {h.codec for h, _ in net.log("z", 0).raw_batches()}
        assert codecs == {1}  # gzip, still encoded
        with pytest.raises(UnknownTopicError):
            net.log("t", 2)
        with pytest.raises(UnknownTopicError):
            net.log("nosuch", 0)


def test_a_batch_cut_at_the_end_of_a_fetch_answer_is_left_out(served_data):
    data, _ = served_data
    with Store(data, read_only=True) as store:
        batches = [bytes(b) for _, b in store.log("t", 0).raw_batches(0, 6)]
    answer = b"".join(batches)
    whole = remote_module.whole_batches
    assert [bytes(b) for _, b in whole(memoryview(answer))] == batches
    for cut in (1, 20, len(batches[-1]) - 1):
        got = [bytes(b) for _, b in whole(memoryview(answer[:-cut]))]
        assert got == batches[:-1]
    assert read_header(batches[0]).records_count == 1


def test_a_bootstrap_list_is_tried_in_order(served_data):
    data, served = served_data
    with RemoteStore(f"kafka://{DEAD},{served.bootstrap}") as net:
        assert net.log("t", 1).next_offset == 0
    with pytest.raises(WireError, match="no Kafka listener could be reached"):
        RemoteStore(f"kafka://{DEAD}").topics()


def test_offsets_deleted_while_they_are_read(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("short", 1, {"segment.bytes": "1024", "retention.bytes": "3000"})
    with Served(data, "log.retention.check.interval.ms=100") as served:
        address = f"kafka://{served.bootstrap}"
        with Producer(address, batch_size=0) as producer:
            for i in range(20):
                producer.send("short", b"%03d" % i + b"." * 60)
        with RemoteStore(address) as net:
            opened = net.log("short", 0)
            assert opened.log_start_offset == 0
            with Producer(address, batch_size=0) as producer:
                for i in range(20, 200):
                    producer.send("short", b"%03d" % i + b"." * 60)
            deadline = time.monotonic() + 30
            while (start := net.log("short", 0).log_start_offset) == 0:
                assert time.monotonic() < deadline, "retention did not run"
                time.sleep(0.05)
            with pytest.raises(OffsetOutOfRangeError, match="OFFSET_OUT_OF_RANGE"):
                list(opened.raw_batches(0, 10))
            batches = list(net.log("short", 0).raw_batches(start, 200))
            values = [decode_records(b, h)[0].value[:3] for h, b in batches]
            assert values == [b"%03d" % i for i in range(start, 200)]


def test_sasl_plain_for_the_producer_and_the_remote_store(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o777)
    data.chmod(0o777)  # "spark" is no local user: the modes for others apply
    users = tmp_path / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    with Served(data, f"kafka.sasl.users={users}") as served:
        address = f"kafka://{DEAD},{served.bootstrap}"
        credentials = {"sasl_plain_username": USER, "sasl_plain_password": PASSWORD}
        with Producer(address, **credentials) as producer:
            producer.send("secret", b"one", key=b"k")
            [receipt] = producer.flush()
        assert (receipt.topic, receipt.first_offset, receipt.last_offset) == ("secret", 0, 0)
        with RemoteStore(address, **credentials) as net:
            [(header, batch)] = net.log("secret", 0).raw_batches()
            assert [(r.key, r.value) for r in decode_records(batch, header)] == [(b"k", b"one")]
        wrong = {"sasl_plain_username": USER, "sasl_plain_password": "nope"}
        with pytest.raises(AuthenticationError, match="authentication as 'spark' failed"):
            RemoteStore(address, **wrong).topics()
        with pytest.raises(WireError, match="kafka.sasl.users"), Producer(address) as producer:
            producer.send("secret", b"anonymous")
        assert served.alive()
    with Store(data, read_only=True) as store:
        assert [r.value for r in store.log("secret", 0).scan()] == [b"one"]


def test_pattern_subscriptions_leave_internal_topics_out(served_data, tmp_path):
    """Kafka's exclude.internal.topics: a pattern never selects __consumer_offsets, through
    the network or with path; naming it still does."""
    data, served = served_data
    consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, group_id="g")
    consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "", -1)})
    consumer.close()
    pattern = parse_options({"path": "x", "subscribePattern": ".*"}, streaming=False)
    named = parse_options({"path": "x", "subscribe": f"t,{CONSUMER_OFFSETS}"}, streaming=False)
    with RemoteStore(f"kafka://{served.bootstrap}") as net:
        assert CONSUMER_OFFSETS in net.topics() and CONSUMER_OFFSETS in net.internal_topics
        assert {t for t, _ in subscribed(net, pattern)} == {"t", "z"}
        assert {t for t, _ in subscribed(net, named)} == {"t", CONSUMER_OFFSETS}
    local = tmp_path / "local"
    with Store(local) as store:
        store.create_topic(CONSUMER_OFFSETS, 1)
        store.create_topic("orders", 1)
        assert {t for t, _ in subscribed(store, pattern)} == {"orders"}
        assert {t for t, _ in subscribed(store, named)} == {CONSUMER_OFFSETS}


# ---------------------------------------------------------------- Spark, DATA out of reach


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """An anonymous loopback listener on a hidden DATA, with topic ``clicks`` (3 partitions,
    900 records from kafka-python) and a group commit (so __consumer_offsets exists)."""
    with Hidden(tmp_path_factory.mktemp("net"), "log.retention.check.interval.ms=100") as served:
        admin = KafkaAdminClient(bootstrap_servers=served.bootstrap)
        admin.create_topics([NewTopic("clicks", 3, 1), NewTopic("stream", 2, 1)])
        admin.create_topics(
            [NewTopic("short", 1, 1, topic_configs={"segment.bytes": "1024",
                                                     "retention.bytes": "3000"})]
        )  # fmt: skip
        admin.close()
        produce_clicks(served.bootstrap, "clicks", 900)
        consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, group_id="readers")
        consumer.commit({TopicPartition("clicks", 0): OffsetAndMetadata(1, "", -1)})
        consumer.close()
        assert {"clicks-0", "clicks-2", f"{CONSUMER_OFFSETS}-0"} <= served.partition_dirs()
        assert os.listdir(served.hidden) == []  # nothing of DATA out here
        yield served
        assert os.listdir(served.hidden) == []


@pytest.fixture(scope="module")
def clicks(hidden):
    rows = consume(hidden.bootstrap, "clicks", 3)
    assert len(rows) == 900
    for topic, p, _, key, value, ts, headers in rows:  # what was produced
        i = ts - T0
        assert (topic, p, key) == ("clicks", i % 3, None if i % 5 == 0 else b"k%d" % (i % 7))
        assert value == b"v%d-" % i + b"x" * (i % 50)
        assert headers == ([("i", b"%d" % i)] if i % 2 else None)
    return rows


def net_read(spark, served, **options):
    return (
        spark.read.format("logfs")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .options(**options)
        .load()
    )


@pytest.mark.spark
def test_batch_read_of_several_partitions(spark, hidden, clicks):
    df = (
        spark.read.format("logfs")
        .option("kafka.bootstrap.servers", f"{DEAD},{hidden.bootstrap}")
        .option("kafka.client.id", "spark-test")
        .option("kafka.group.id", "ignored")
        .option("subscribePattern", f"clicks|{CONSUMER_OFFSETS}")
        .option("includeHeaders", "true")
        .option("maxRecordsPerPartition", "70")  # ranges that start inside batches
        .option("minPartitions", "4")  # above 3 partitions: a batch query cuts its ranges
        .load()
    )
    assert df.rdd.getNumPartitions() == 15  # 300 records each: ceil(300 / 70) pieces
    assert spark_rows(df) == clicks
    assert os.listdir(hidden.hidden) == []


@pytest.mark.spark
def test_offsets_json_and_timestamps(spark, hidden, clicks):
    df = net_read(
        spark,
        hidden,
        assign='{"clicks": [0, 1, 2]}',
        startingOffsets='{"clicks": {"0": 10, "1": -2, "2": 250}}',
        endingOffsets='{"clicks": {"0": 20, "1": 5, "2": -1}}',
    )
    ranges = {0: range(10, 20), 1: range(0, 5), 2: range(250, 300)}
    expected = [r[:6] + (None,) for r in clicks if r[2] in ranges[r[1]]]
    assert spark_rows(df) == expected
    df = net_read(
        spark,
        hidden,
        subscribe="clicks",
        includeHeaders="true",
        startingOffsetsByTimestamp=f'{{"clicks": {{"0": {T0 + 600}, "1": {T0 + 2}, '
        f'"2": {T0 + 10**6}}}}}',
        startingOffsetsByTimestampStrategy="latest",
    )
    limits = {0: T0 + 600, 1: T0 + 2, 2: T0 + 10**6}
    assert spark_rows(df) == [r for r in clicks if r[5] >= limits[r[1]]]


class Collect:
    """A foreachBatch sink keeping (partition, offset, value) of each micro-batch."""

    def __init__(self) -> None:
        self.batches: list[list[tuple]] = []

    def __call__(self, df, batch_id) -> None:
        rows = df.select("partition", "offset", "value").collect()
        self.batches.append(sorted((r[0], r[1], bytes(r[2])) for r in rows))

    @property
    def rows(self) -> list[tuple]:
        return sorted(r for batch in self.batches for r in batch)


def available_now(spark, served, sink, checkpoint, **options):
    query = (
        spark.readStream.format("logfs")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None


@pytest.mark.spark
def test_streaming_read_goes_on_exactly_after_its_checkpoint(spark, hidden, tmp_path):
    producer = KafkaProducer(bootstrap_servers=hidden.bootstrap)

    def send(values):
        for i in values:
            producer.send("stream", value=b"s%d" % i, partition=i % 2)
        producer.flush()

    def sent(values):
        return sorted((i % 2, i // 2, b"s%d" % i) for i in values)

    send(range(50))
    options = {"subscribe": "stream", "startingOffsets": "earliest", "maxOffsetsPerTrigger": 30}
    first = Collect()
    available_now(spark, hidden, first, tmp_path / "ckpt", **options)
    assert first.rows == sent(range(50)) and len(first.batches) == 2
    send(range(50, 70))
    again = Collect()
    available_now(spark, hidden, again, tmp_path / "ckpt", **options)
    assert again.rows == sent(range(50, 70))
    producer.close()


@pytest.mark.spark
def test_batch_and_streaming_writes(spark, hidden, clicks, tmp_path):
    rows = [
        (b"k%d" % i if i % 3 else None, b"w%d" % i, [("n", b"%d" % i)] if i % 2 else None)
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows, "key binary, value binary, headers array<struct<key:string,value:binary>>"
    ).repartition(3)
    (
        df.write.format("logfs")
        .option("kafka.bootstrap.servers", hidden.bootstrap)
        .option("kafka.request.timeout.ms", "20000")
        .option("topic", "written")
        .mode("append")
        .save()
    )
    got = consume(hidden.bootstrap, "written", 1)
    assert bag((r[3], r[4], r[6]) for r in got) == bag(rows)
    query = (
        spark.readStream.format("logfs")
        .option("kafka.bootstrap.servers", hidden.bootstrap)
        .option("subscribe", "clicks")
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("logfs")
        .option("kafka.bootstrap.servers", hidden.bootstrap)
        .option("topic", "copied")
        .option("checkpointLocation", str(tmp_path / "copy"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = consume(hidden.bootstrap, "copied", 1)
    assert bag((r[3], r[4]) for r in copied) == bag((r[3], r[4]) for r in clicks)
    assert os.listdir(hidden.hidden) == []


@pytest.mark.spark
def test_fail_on_data_loss_when_retention_deleted_offsets(spark, hidden):
    producer = KafkaProducer(bootstrap_servers=hidden.bootstrap, batch_size=0)
    for i in range(200):
        producer.send("short", value=b"%03d" % i + b"." * 60)
    producer.flush()
    producer.close()
    with RemoteStore(f"kafka://{hidden.bootstrap}") as net:
        deadline = time.monotonic() + 30
        while net.log("short", 0).log_start_offset == 0:
            assert time.monotonic() < deadline, "retention did not run"
            time.sleep(0.05)
    options = {"subscribe": "short", "startingOffsets": '{"short": {"0": 0}}'}
    with pytest.raises(Exception, match="deleted by retention"):
        net_read(spark, hidden, **options).count()
    df = net_read(spark, hidden, failOnDataLoss="false", **options)
    remaining = consume(hidden.bootstrap, "short", 1)
    assert remaining[0][2] > 0 and remaining[-1][2] == 199
    assert [r[:6] for r in spark_rows(df)] == [r[:6] for r in remaining]


@pytest.fixture(scope="module")
def hidden_sasl(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl")
    users = root / "users"
    users.write_text(f"# who may connect\n{USER}:{PASSWORD}\n")
    users.chmod(0o600)
    with Hidden(root, f"kafka.sasl.users={users}") as served:
        yield served


@pytest.mark.spark
def test_sasl_plain_with_the_jaas_config(spark, hidden_sasl):
    rows = [(b"k%d" % i, b"secret-%d" % i) for i in range(40)]
    (
        spark.createDataFrame(rows, "key binary, value binary")
        .write.format("logfs")
        .option("kafka.bootstrap.servers", hidden_sasl.bootstrap)
        .options(**SASL_OPTIONS)
        .option("topic", "vault")
        .mode("append")
        .save()
    )
    read = net_read(spark, hidden_sasl, subscribe="vault", **SASL_OPTIONS)
    via_kafka = consume(hidden_sasl.bootstrap, "vault", 1, **KAFKA_SASL)
    assert spark_rows(read) == via_kafka
    assert sorted((r[3], r[4]) for r in via_kafka) == sorted(rows)
    wrong = {**SASL_OPTIONS, "kafka.sasl.jaas.config": JAAS.replace("\\\\ d", "x")}
    with pytest.raises(Exception, match="authentication as 'spark' failed"):
        net_read(spark, hidden_sasl, subscribe="vault", **wrong).count()
    with pytest.raises(Exception, match="kafka.sasl.users"):
        net_read(spark, hidden_sasl, subscribe="vault").count()
    assert os.listdir(hidden_sasl.hidden) == [] and hidden_sasl.alive()


SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="{USER}" password="p \\"w\\" \\\\ d";'
)


@pytest.fixture(scope="module")
def hidden_sasl_ssl(tmp_path_factory):
    """A TLS listener with SASL credentials on a hidden DATA, and the CA of its certificate."""
    root = tmp_path_factory.mktemp("sasl-ssl")
    pki = make_pki(root)
    users = root / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    users.chmod(0o600)
    options = (f"kafka.ssl.certfile={pki.cert}", f"kafka.ssl.keyfile={pki.key}",
               f"kafka.sasl.users={users}")  # fmt: skip
    with Hidden(root, *options) as served:
        yield served, pki


@pytest.mark.spark
def test_sasl_ssl_with_scram_sha_512(spark, hidden_sasl_ssl):
    """Spark's own kafka.* spelling of TLS and SCRAM, for a write and a read; kafka-python,
    with the same settings, reads the same records."""
    served, pki = hidden_sasl_ssl
    options = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS,
        "kafka.ssl.truststore.location": str(pki.ca),
        "kafka.ssl.truststore.type": "PEM",
    }
    rows = [(b"k%d" % i, b"sealed-%d" % i) for i in range(40)]
    (
        spark.createDataFrame(rows, "key binary, value binary")
        .write.format("logfs")
        .option("kafka.bootstrap.servers", served.bootstrap)
        .options(**options)
        .option("topic", "sealed")
        .mode("append")
        .save()
    )
    read = net_read(spark, served, subscribe="sealed", **options)
    via_kafka = consume(
        served.bootstrap, "sealed", 1, security_protocol="SASL_SSL", ssl_cafile=str(pki.ca),
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER, sasl_plain_password=PASSWORD,
    )  # fmt: skip
    assert spark_rows(read) == via_kafka
    assert sorted((r[3], r[4]) for r in via_kafka) == sorted(rows)
    assert os.listdir(served.hidden) == [] and served.alive()
