"""The Spark data source without a JVM: options, offset planning, stream offsets, Arrow reads."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from logfs import Store
from logfs.core.client import producer
from logfs.core.errors import CorruptRecordError, OffsetOutOfRangeError
from logfs.core.format import compression
from logfs.core.format.decoding import decode_records
from logfs.core.format.record import (
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    encode_batch,
    read_header,
)
from logfs.spark import LogfsDataSource
from logfs.spark.arrow import decode_columns, read_range
from logfs.spark.options import (
    DataLossError,
    Listener,
    OffsetRange,
    SparkOptionError,
    TopicPartition,
    parse_options,
)
from logfs.spark.plan import batch_ranges, rate_limit, resolve, subscribed
from logfs.spark.read import LogfsStreamReader
from logfs.spark.write import produce, write_options

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
TYPES = {"binary": BinaryType(), "string": StringType(), "int": IntegerType()}


def columns(ddl):
    """A flat StructType from "name type, ..." (StructType.fromDDL needs a JVM)."""
    schema = StructType()
    for column in ddl.split(", "):
        name, kind = column.split()
        schema.add(name, TYPES[kind])
    return schema


class FakeStore:
    """topics() and log(t, p) with chosen log start and next offsets."""

    def __init__(self, offsets):  # {(topic, partition): (log_start_offset, next_offset)}
        self.offsets = offsets

    def topics(self):
        topics = {}
        for t, p in sorted(self.offsets):
            topics[t] = max(topics.get(t, 0), p + 1)
        return topics

    def log(self, topic, partition):
        start, end = self.offsets[(topic, partition)]
        return SimpleNamespace(
            topic=topic,
            partition=partition,
            log_start_offset=start,
            next_offset=end,
            offset_for_time=lambda ts: start + ts if start + ts < end else None,
        )


def opts(streaming=False, **options):
    return parse_options({"path": "/data", **options}, streaming=streaming)


# ---------------------------------------------------------------- options


def test_defaults_are_the_kafka_sources():
    batch = opts(subscribe="t")
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert opts(streaming=True, subscribe="t").starting == "latest"
    assert opts(streaming=True, subscribe="t").max_offsets_per_trigger is None


def test_options_are_case_insensitive_and_parsed():
    o = opts(
        SUBSCRIBE="a, b",
        startingoffsets='{"a": {"0": -2, "1": 7}}',
        FAILONDATALOSS="False",
        includeHeaders="TRUE",
        maxOffsetsPerTrigger="100",
    )
    assert o.subscribe == ("a", "b")
    assert o.starting == {TopicPartition("a", 0): -2, TopicPartition("a", 1): 7}
    assert (o.fail_on_data_loss, o.include_headers, o.max_offsets_per_trigger) == (False, True, 100)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of"),
        ({"subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of"),
        ({"assign": '{"t": "0"}'}, "lists of partition numbers"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"subscribe": "t", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"subscribe": "t", "startingOffsets": "latest"}, "can't be latest"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "can't be latest"),
        ({"subscribe": "t", "endingOffsets": "earliest"}, "can't be earliest"),
        ({"subscribe": "t", "failOnDataLoss": "maybe"}, "true or false"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "below 1"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(SparkOptionError, match=message):
        opts(**options)


def test_ending_offsets_are_refused_in_streaming():
    with pytest.raises(SparkOptionError, match="not valid in streaming"):
        opts(streaming=True, subscribe="t", endingOffsets="latest")


def test_path_is_required():
    with pytest.raises(SparkOptionError, match="path"):
        parse_options({"subscribe": "t"}, streaming=False)


PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_exactly_one_of_path_and_bootstrap_servers():
    for options in ({}, {"path": "/d", "kafka.bootstrap.servers": "h:1"}):
        with pytest.raises(SparkOptionError, match="exactly one of .*path.*kafka.bootstrap"):
            parse_options({"subscribe": "t", **options}, streaming=False)
        with pytest.raises(SparkOptionError, match="exactly one of .*path.*kafka.bootstrap"):
            write_options({"topic": "t", **options}, columns("value binary"))
    o = parse_options(
        {"subscribe": "t", "Kafka.Bootstrap.Servers": "a:1, b:2", "kafka.client.id": "me",
         "kafka.request.timeout.ms": "1500", "kafka.group.id": "ignored"},
        streaming=False,
    )  # fmt: skip
    assert o.path is None and o.listener == Listener("a:1, b:2", None, None, 1.5, "me")
    assert o.listener.address == "kafka://a:1, b:2"
    w = write_options({"kafka.bootstrap.servers": "a:1", "topic": "t"}, columns("value binary"))
    assert w.path is None and w.listener == Listener("a:1")
    with pytest.raises(SparkOptionError, match='"kafka.bootstrap.servers".*HOST:PORT'):
        parse_options({"subscribe": "t", "kafka.bootstrap.servers": "a:1,b"}, streaming=False)


@pytest.mark.parametrize(
    "jaas, user, password",
    [
        (f'{PLAIN} required username="u" password="p";', "u", "p"),
        (f"  {PLAIN}  required\n username=u\n password=p2 ; ", "u", "p2"),
        (f'{PLAIN} optional password="a b;c=d" username="x\\"y";', 'x"y', "a b;c=d"),
        (f'{PLAIN} required username="" password="";', "", ""),
    ],
)
def test_sasl_plain_from_the_jaas_config(jaas, user, password):
    o = parse_options(
        {"subscribe": "t", "kafka.bootstrap.servers": "h:1", "kafka.sasl.jaas.config": jaas,
         "kafka.security.protocol": "sasl_plaintext", "kafka.sasl.mechanism": "PLAIN"},
        streaming=False,
    )  # fmt: skip
    assert (o.listener.username, o.listener.password) == (user, password)
    assert "password" not in repr(o.listener)  # Spark may log the options


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kafka.security.protocol": "SSL_PLAINTEXT"},
         '"kafka.security.protocol": SSL_PLAINTEXT is not supported'),
        ({"kafka.security.protocol": "SASL_PLAINTEXT"}, '"kafka.sasl.mechanism": GSSAPI'),
        ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER"},
         '"kafka.sasl.mechanism": OAUTHBEARER is not supported'),
        ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-1"},
         "SCRAM-SHA-1 is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
        ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-256",
          "kafka.sasl.jaas.config": f'{PLAIN} required username="u" password="p";'},
         "PlainLoginModule is not supported with SASL mechanism SCRAM-SHA-256 (it needs "
         "org.apache.kafka.common.security.scram.ScramLoginModule)"),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/x.jks"},
         '"kafka.ssl.truststore.type": JKS is not supported: logfs reads PEM truststores'),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/x.p12",
          "kafka.ssl.truststore.type": "PKCS12"}, "PKCS12 is not supported"),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.certificates": "-----BEGIN"},
         '"kafka.ssl.truststore.certificates" is not supported'),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/no/such.pem",
          "kafka.ssl.truststore.type": "PEM"},
         '"kafka.ssl.truststore.location": ssl_cafile /no/such.pem: No such file'),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.endpoint.identification.algorithm": "x"},
         '"kafka.ssl.endpoint.identification.algorithm": \'x\' is not supported'),
        ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"},
         '"kafka.sasl.jaas.config" is required'),
        ({"kafka.sasl.jaas.config":
          'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
          'password="p";'}, "ScramLoginModule is not supported"),
        ({"kafka.sasl.jaas.config": f'{PLAIN} required username="u";'},
         "username and password are required"),
        ({"kafka.sasl.jaas.config": f'{PLAIN} required username="u" password="p"'},
         "ending with ';'"),
        ({"kafka.sasl.jaas.config": f'{PLAIN} always username="u" password="p";'},
         "not a JAAS control flag"),
        ({"kafka.sasl.jaas.config": f'{PLAIN} required username "u" password="p";'},
         'key="value" pairs'),
        ({"kafka.sasl.jaas.config": f'{PLAIN} required username="u password=p;'},
         "cannot parse"),
    ],
)  # fmt: skip
def test_unsupported_security_options_are_named(options, message):
    sasl = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"}
    if "kafka.sasl.jaas.config" in options:
        options = {**sasl, **options}
    with pytest.raises(SparkOptionError, match=re.escape(message)):
        write_options(
            {"topic": "t", "kafka.bootstrap.servers": "h:1", **options}, columns("value binary")
        )
    with pytest.raises(SparkOptionError, match=re.escape(message)):
        parse_options(
            {"subscribe": "t", "kafka.bootstrap.servers": "h:1", **options}, streaming=False
        )


SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_tls_and_scram_options(pki, tmp_path):
    """Kafka's spelling of TLS and SCRAM reaches the listener's producer and store."""
    base = {"kafka.bootstrap.servers": "h:1"}
    o = parse_options({"subscribe": "t", **base, "kafka.security.protocol": "ssl"}, streaming=False)
    assert o.listener == Listener("h:1", protocol="SSL")  # the system's CAs, host name checked
    options = {
        **base,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "scram-sha-512",
        "kafka.sasl.jaas.config": f'{SCRAM} required username="etl" password="s3 cr=t";',
        "kafka.ssl.truststore.location": str(pki.ca),
        "kafka.ssl.truststore.type": "pem",
        "kafka.ssl.truststore.password": "ignored with PEM, as Kafka ignores it",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    o = parse_options({"subscribe": "t", **options}, streaming=True)
    w = write_options({"topic": "t", **options}, columns("value binary"))
    expected = Listener("h:1", "etl", "s3 cr=t", 30.0, "logfs-spark", "SASL_SSL",
                        "SCRAM-SHA-512", str(pki.ca), False)  # fmt: skip
    assert o.listener == w.listener == expected
    assert "s3 cr=t" not in repr(o.listener)
    security = o.listener.store()._wire.security
    assert (security.protocol, security.mechanism, security.username, security.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "etl", "s3 cr=t",
    )  # fmt: skip
    assert (security.cafile, security.check_hostname) == (str(pki.ca), False)
    with o.listener.producer() as p:
        assert p._wire.security == security
    o = parse_options(
        {"subscribe": "t", **options, "kafka.security.protocol": "SASL_PLAINTEXT",
         "kafka.sasl.mechanism": "SCRAM-SHA-256"},
        streaming=False,
    )  # fmt: skip
    # Without TLS the truststore options do not apply (as Kafka ignores them).
    assert (o.listener.protocol, o.listener.mechanism, o.listener.cafile) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-256", None,
    )  # fmt: skip
    (tmp_path / "truststore.jks").write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    not_pem = {**options, "kafka.ssl.truststore.location": str(tmp_path / "truststore.jks")}
    with pytest.raises(SparkOptionError, match='"kafka.ssl.truststore.location": .*not a PEM'):
        parse_options({"subscribe": "t", **not_pem}, streaming=False)


# ---------------------------------------------------------------- planning


def test_subscriptions():
    store = FakeStore({("orders", 0): (0, 5), ("orders", 1): (0, 5), ("ordersx", 0): (0, 1)})
    assert subscribed(store, opts(subscribe="orders,missing")) == [
        ("orders", 0),
        ("orders", 1),
    ]
    assert len(subscribed(store, opts(subscribePattern="orders.*"))) == 3
    # Found anywhere in the name, as Kafka's SubscribePatternStrategy's findFirstIn
    assert len(subscribed(store, opts(subscribePattern="rder"))) == 3
    assert subscribed(store, opts(subscribePattern="^orders$")) == [("orders", 0), ("orders", 1)]
    assert subscribed(store, opts(assign='{"orders": [1]}')) == [("orders", 1)]
    # Kafka's AssignStrategy keeps the assigned partitions that exist
    assert subscribed(store, opts(assign='{"orders": [1, 2], "nosuch": [0]}')) == [("orders", 1)]


def test_resolve_special_offsets_timestamps_and_data_loss():
    store = FakeStore({TP0: (10, 20), TP1: (0, 5)})
    o = opts(subscribe="t")
    assert resolve(store, [TP0, TP1], "earliest", None, o) == {TP0: 10, TP1: 0}
    assert resolve(store, [TP0, TP1], {TP0: -1, TP1: 3}, None, o) == {TP0: 20, TP1: 3}
    with pytest.raises(SparkOptionError, match="every subscribed partition"):
        resolve(store, [TP0, TP1], {TP0: -1}, None, o)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        resolve(store, [TP0], {TP0: 4}, None, o)
    assert resolve(store, [TP0], {TP0: 4}, None, opts(subscribe="t", failOnDataLoss="false")) == {
        TP0: 10
    }
    assert resolve(store, [TP0, TP1], "latest", 2, o) == {TP0: 12, TP1: 2}
    with pytest.raises(SparkOptionError, match="startingOffsetsByTimestampStrategy"):
        resolve(store, [TP1], "latest", 9, o)
    latest = opts(subscribe="t", startingOffsetsByTimestampStrategy="latest")
    assert resolve(store, [TP1], "latest", 9, latest) == {TP1: 5}


def test_batch_ranges():
    store = FakeStore({TP0: (10, 20), TP1: (0, 5)})
    o = opts(subscribe="t", startingOffsets='{"t": {"0": 12, "1": -2}}')
    assert batch_ranges(store, o) == [OffsetRange("t", 0, 12, 20), OffsetRange("t", 1, 0, 5)]
    o = opts(subscribe="t", startingTimestamp="3", endingOffsets='{"t": {"0": 14, "1": -1}}')
    assert batch_ranges(store, o) == [OffsetRange("t", 0, 13, 14), OffsetRange("t", 1, 3, 5)]
    with pytest.raises(SparkOptionError, match="after ending offset"):
        batch_ranges(store, opts(subscribe="t", endingOffsets='{"t": {"0": 11, "1": 4}}',
                                 startingOffsets='{"t": {"0": 12, "1": 0}}'))  # fmt: skip


def test_rate_limit_is_proportional_and_starves_no_one():
    start = {TP0: 0, TP1: 100}
    end = {TP0: 1000, TP1: 101}
    assert rate_limit(100, start, end, {}) == {TP0: 99, TP1: 101}
    assert rate_limit(10_000, start, end, {}) == end
    new = TopicPartition("t", 2)  # a partition the start offset does not know: from earliest
    assert rate_limit(10, {TP0: 0}, {TP0: 10, new: 15}, {new: 5}) == {TP0: 5, new: 10}


# ---------------------------------------------------------------- streaming, on a real store


@pytest.fixture
def store_path(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("t", partitions=2)
        store.log("t", 0).append([b"a%d" % i for i in range(30)])
        store.log("t", 1).append([b"b%d" % i for i in range(10)])
    return tmp_path


def test_stream_offsets_limit_new_partitions_and_available_now(store_path):
    reader = LogfsStreamReader(
        opts(True, path=str(store_path), subscribe="t", startingOffsets="earliest")
    )
    start = reader.initialOffset()
    assert start == {"t": {"0": 0, "1": 0}}
    assert reader.getDefaultReadLimit() == ReadAllAvailable()
    end = reader.latestOffset(start, ReadMaxRows(20))
    assert end == {"t": {"0": 15, "1": 5}}
    parts = [p.range for p in reader.partitions(start, end)]
    assert parts == [OffsetRange("t", 0, 0, 15), OffsetRange("t", 1, 0, 5)]
    reader.prepareForTriggerAvailableNow()
    with Store(store_path) as store:
        store.add_partitions("t", 3)
        store.log("t", 2).append([b"c"] * 4)
    assert reader.latestOffset(end, ReadAllAvailable()) == {"t": {"0": 30, "1": 10}}
    reader = LogfsStreamReader(reader.options)  # a restarted query: no AvailableNow target
    latest = reader.latestOffset(end, ReadAllAvailable())
    assert latest == {"t": {"0": 30, "1": 10, "2": 4}}
    assert OffsetRange("t", 2, 0, 4) in [p.range for p in reader.partitions(end, latest)]
    assert reader.latestOffset(latest, ReadAllAvailable()) == latest  # no new data


def test_stream_starts_at_latest_by_default(store_path):
    reader = LogfsStreamReader(opts(True, path=str(store_path), subscribe="t"))
    assert reader.initialOffset() == {"t": {"0": 30, "1": 10}}
    assert reader.getDefaultReadLimit() == ReadAllAvailable()
    limited = LogfsStreamReader(opts(True, path=str(store_path), assign='{"t":[1]}',
                                     maxOffsetsPerTrigger="7"))  # fmt: skip
    assert limited.getDefaultReadLimit() == ReadMaxRows(7)


# ---------------------------------------------------------------- Arrow reads


def spark_arrow_schema(include_headers):
    options = {"path": "x", "subscribe": "t", "includeHeaders": str(include_headers)}
    return to_arrow_schema(LogfsDataSource(options).schema(), timezone="UTC")


@pytest.mark.parametrize("codec", ["producer", "gzip", "zstd"])
def test_read_range_builds_arrow_batches(tmp_path, codec):
    with Store(tmp_path) as store:
        store.create_topic("t", config={"compression.type": codec})
        log = store.log("t", 0)
        log.append([b"x0", b"x1", b"x2"], keys=[b"k", None, b"k"], timestamp=1_000)
        log.append([b"y3"], headers=[[("h", b"1"), ("n", None)]], timestamp=2_000)
        log.append([b"z4", b"z5"], timestamp=[3_000, 3_001])
    with Store(tmp_path, read_only=True) as store:
        batches = list(read_range(store, OffsetRange("t", 0, 1, 5), include_headers=True))
    assert all(b.schema.equals(spark_arrow_schema(True)) for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == [1, 2, 3, 4]
    assert table.column("value").to_pylist() == [b"x1", b"x2", b"y3", b"z4"]
    assert table.column("key").to_pylist() == [None, b"k", None, None]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [
        10**6,
        10**6,
        2 * 10**6,
        3 * 10**6,
    ]
    assert table.column("headers").to_pylist()[1:3] == [
        None,
        [{"key": "h", "value": b"1"}, {"key": "n", "value": None}],
    ]
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("timestampType").to_pylist()) == {0}


def test_read_range_after_retention(tmp_path):
    with Store(tmp_path) as store:
        store.create_topic("t")
        store.log("t", 0).append([b"v"] * 3)
    with Store(tmp_path, read_only=True) as store:
        store.log("t", 0).log_start_offset = 2  # as if retention had deleted offsets 0 and 1
        with pytest.raises(DataLossError, match="deleted by retention"):
            list(read_range(store, OffsetRange("t", 0, 0, 3)))
        rows = list(read_range(store, OffsetRange("t", 0, 0, 3), fail_on_data_loss=False))
        assert rows[0].column("offset").to_pylist() == [2]
        with pytest.raises(DataLossError, match="gone"):
            list(read_range(store, OffsetRange("gone", 0, 0, 3)))


def test_read_range_when_offsets_go_while_being_read(tmp_path):
    """Over the network the batches are fetched after the log was opened: offsets that
    retention takes meanwhile (`OffsetOutOfRangeError` from Fetch) are data loss."""
    with Store(tmp_path) as store:
        store.create_topic("t")
        for i in range(4):
            store.log("t", 0).append([b"%d" % i])

    class Retained:  # the Store, with retention deleting offsets 1 and 2 after the first batch
        def __init__(self, store):
            self.store, self.reads = store, 0

        def log(self, topic, partition):
            log = self.store.log(topic, partition)
            self.reads += 1
            if self.reads > 1:
                log.log_start_offset = 3
                return log
            fetch = log.raw_batches
            return SimpleNamespace(
                log_start_offset=0, next_offset=4, raw_batches=lambda s, e: self._cut(fetch(s, e))
            )

        @staticmethod
        def _cut(batches):
            yield next(batches)
            raise OffsetOutOfRangeError("t-0 at offset 1: OFFSET_OUT_OF_RANGE")

    with Store(tmp_path, read_only=True) as store:
        with pytest.raises(DataLossError, match=r"offsets 1\.\.3 of t-0 went away"):
            list(read_range(Retained(store), OffsetRange("t", 0, 0, 4)))
        batches = read_range(Retained(store), OffsetRange("t", 0, 0, 4), fail_on_data_loss=False)
        assert [o for b in batches for o in b.column("offset").to_pylist()] == [0, 3]


# ---------------------------------------------------------------- writing without Spark


def test_produce_routes_rows_like_the_kafka_sink(tmp_path):
    schema = columns("key binary, value string, partition int")
    options = write_options({"path": str(tmp_path), "topic": "t"}, schema)
    with Store(tmp_path) as store:
        store.create_topic("t", partitions=3)
    batch = pa.RecordBatch.from_pydict(
        {"key": [b"a", b"b", None], "value": ["1", "2", "3"], "partition": [None, None, 2]}
    )
    counts = produce(options, iter([batch]))
    with Store(tmp_path, read_only=True) as store:
        for key, value in ((b"a", b"1"), (b"b", b"2")):
            p = (kafka_murmur2(key) & 0x7FFFFFFF) % 3
            assert (key, value) in [(r.key, r.value) for r in store.log("t", p).scan()]
        assert [r.value for r in store.log("t", 2).scan()][-1] == b"3"
    assert sum(counts.values()) == 3


def test_each_write_task_starts_its_unkeyed_rows_at_a_random_partition(tmp_path, monkeypatch):
    """Every task has its own producer and partitioner: a random start keeps the tasks from all
    beginning on partition 0; a task's next batch takes the next partition."""
    options = write_options({"path": str(tmp_path), "topic": "t"}, columns("value binary"))
    with Store(tmp_path) as store:
        store.create_topic("t", partitions=4)
    starts = iter([6, 3])
    monkeypatch.setattr(producer.random, "randrange", lambda n: next(starts))

    def batch(*values):
        return pa.RecordBatch.from_pydict({"value": list(values)})

    assert produce(options, iter([batch(b"a", b"b"), batch(b"c")])) == {"t-2": 2, "t-3": 1}
    assert produce(options, iter([batch(b"d")])) == {"t-3": 1}
    assert produce(options, iter([batch()])) == {}  # no rows: no producer


@pytest.mark.parametrize(
    ("ddl", "options", "message"),
    [
        ("key binary", {"topic": "t"}, "'value' not found"),
        ("value int", {"topic": "t"}, "value attribute type must be binary or string"),
        ("value binary", {}, "topic option required"),
        ("value binary, partition string", {"topic": "t"}, "partition attribute type"),
    ],
)
def test_write_options_check_columns(ddl, options, message):
    with pytest.raises(SparkOptionError, match=message):
        write_options({"path": "/d", **options}, columns(ddl))


# ---------------------------------------------------------------- the columnar decoder


maybe_bytes = st.none() | st.binary(max_size=300)  # > 63 bytes: multi-byte length varints
record_headers = st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.lists(
                st.tuples(maybe_bytes, maybe_bytes, st.integers(0, 10**13), record_headers),
                min_size=1,
            ),
            st.sampled_from([compression.NONE, compression.GZIP, compression.ZSTD]),
            st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]),
        ),
        min_size=1,
        max_size=4,
    ),
    cut=st.tuples(st.integers(0, 5), st.integers(0, 5)),
)
def test_decode_columns_agrees_with_decode_records(batches, cut):
    """The column-wise decoder (the core's walk, the compiled headers builder) against the
    reference decoder, headers included: a record without headers has a null list."""
    encoded, base = [], 100
    for rows, codec, ts_type in batches:
        keys, values, stamps, headers = (list(c) for c in zip(*rows, strict=True))
        data = encode_batch(base, values, keys=keys, timestamps=stamps, codec=codec,
                            timestamp_type=ts_type, headers=headers)  # fmt: skip
        encoded.append((read_header(data), memoryview(data)))
        base += len(rows)
    start, end = 100 + cut[0], base - cut[1]
    expected = [
        (rec.key, rec.value, rec.offset, rec.timestamp, header.timestamp_type,
         [{"key": k, "value": v} for k, v in rec.headers] or None)
        for header, batch in encoded
        for rec in decode_records(batch, header)
        if start <= rec.offset < end
    ]  # fmt: skip
    got = decode_columns(encoded, start, end, headers=True)
    names = ("key", "value", "offset", "timestamp", "timestampType", "headers")
    assert list(zip(*(got[name].tolist() for name in names), strict=True)) == expected
    plain = decode_columns(encoded, start, end)
    assert "headers" not in plain and plain["value"].equals(got["value"])


def test_decode_columns_rejects_a_bad_records_section():
    data = bytearray(encode_batch(0, [b"abc", b"def"]))
    data[HEADER_SIZE] += 2  # the first record claims one more byte than it has
    with pytest.raises(CorruptRecordError):
        decode_columns([(read_header(bytes(data)), memoryview(bytes(data)))], 0, 2)
