"""A Kafka listener that is briefly unreachable: the Spark source's network reader tries it
again as Kafka's consumers do (until ``kafka.default.api.timeout.ms``), so a restarted
``logfs serve`` does not fail a query; past the timeout the error names the servers and
the option."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kafka_helpers import Served

from logfs import Store
from logfs.core.client import RemoteStore
from logfs.core.client.security import WireError
from logfs.spark.options import parse_options


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_restarted_listener_is_waited_for(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
        store.log("t", 0).append([b"a", b"b", b"c"])
    listen = f"127.0.0.1:{free_port()}"
    first = Served(data, listen=listen).start()
    second = Served(data, listen=listen)
    try:
        with RemoteStore(f"kafka://{listen}", api_timeout=60) as net:
            assert net.topics() == {"t": 1}
            first.terminate()
            restart = threading.Timer(1.5, second.start)
            restart.start()
            began = time.monotonic()
            log = net.log("t", 0)  # tried again until the new listener answers
            assert time.monotonic() - began >= 1.0
            assert [h.records_count for h, _ in log.raw_batches(0, 3)] == [3]
            restart.join()
    finally:
        for served in (first, second):
            served.__exit__(None, None, None)


def test_past_the_timeout_the_error_names_the_servers_and_the_option():
    dead = f"127.0.0.1:{free_port()}"
    options = parse_options(
        {"kafka.bootstrap.servers": dead, "subscribe": "t", "kafka.default.api.timeout.ms": "700"},
        streaming=False,
    )
    began = time.monotonic()
    with options.listener.store() as net, pytest.raises(WireError) as failed:
        net.topics()
    assert 0.6 <= time.monotonic() - began < 10
    message = str(failed.value)
    assert dead in message and "kafka.default.api.timeout.ms" in message
    assert "\n" not in message


def test_a_bad_timeout_is_named():
    with pytest.raises(ValueError, match='"kafka.default.api.timeout.ms"'):
        parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                       "kafka.default.api.timeout.ms": "soon"}, streaming=False)  # fmt: skip


def test_the_sink_waits_for_a_restarting_listener(tmp_path):
    """A write task whose listener is down when it starts waits for it (nothing is sent
    before it answers), then writes each row once."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from logfs.spark.write import produce, write_options

    data = tmp_path / "data"
    Store(data).close()
    listen = f"127.0.0.1:{free_port()}"
    served = Served(data, listen=listen)
    options = write_options({"kafka.bootstrap.servers": listen, "topic": "t"},
                            StructType([StructField("value", StringType())]))  # fmt: skip
    start = threading.Timer(1.0, served.start)
    start.start()
    try:
        rows = pa.RecordBatch.from_arrays([pa.array(["a", "b"])], names=["value"])
        assert produce(options, iter([rows])) == {"t-0": 2}
    finally:
        start.join()
        served.__exit__(None, None, None)
    with Store(data, read_only=True) as store:
        assert [r.value for r in store.log("t", 0).scan()] == [b"a", b"b"]


def test_a_path_write_beside_logfs_serve_names_its_listener(tmp_path):
    """The data directory of a running ``logfs serve`` has one writer, the listener: a
    ``path`` write fails at once and says which ``kafka.bootstrap.servers`` to use."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from logfs.core.errors import DataDirBusyError
    from logfs.spark.write import produce, write_options

    data = tmp_path / "data"
    Store(data).close()
    schema = StructType([StructField("value", StringType())])
    rows = pa.RecordBatch.from_arrays([pa.array(["a"])], names=["value"])
    with Served(data) as served:
        options = write_options({"path": str(data), "topic": "t", "lockTimeout": "30"}, schema)
        began = time.monotonic()
        with pytest.raises(DataDirBusyError) as refused:
            produce(options, iter([rows]))
        assert time.monotonic() - began < 5  # not after lockTimeout
        assert f'"kafka.bootstrap.servers" = "{served.bootstrap}"' in str(refused.value)
