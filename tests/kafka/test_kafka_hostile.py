"""Hostile protocol input never stops the listener or another connection:
random and truncated requests, wrong and huge claimed sizes, a slow client;
and a SIGKILL during acks=-1 produce loses nothing acknowledged."""

from __future__ import annotations

import contextlib
import datetime
import socket
import struct
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_helpers import Served, call, connect, encode_request, stored
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from logfs.core.log import Store

API_VERSIONS, METADATA, PRODUCE = 18, 3, 0


def api_versions_body():
    t = load_request_schema(API_VERSIONS, 3)
    return t(client_software_name="probe", client_software_version="1")


def assert_serving(served: Served, sock: socket.socket | None = None) -> None:
    """The daemon runs and answers (on ``sock``, or on a new connection)."""
    assert served.alive(), served.output()
    answer = call(served.address, API_VERSIONS, 3, api_versions_body(), sock)
    assert answer.error_code == ErrorCode.none


def closed_by_peer(sock: socket.socket, timeout: float = 10) -> bool:
    """Whether the listener closed ``sock`` (reads EOF) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = tmp_path_factory.mktemp("hostile") / "data"
    with Store(data) as store:
        store.create_topic("t", partitions=2)
    with Served(data) as s:
        yield s


def produce_frame() -> bytes:
    t = load_request_schema(PRODUCE, 9)
    module = __import__(t.__module__, fromlist=["x"])
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=1, key=b"k", value=b"v", headers=[])
    body = t(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            module.TopicProduceData(
                name="t",
                partition_data=(
                    module.PartitionProduceData(index=0, records=bytes(builder.build())),
                ),
            ),
        ),
    )
    return encode_request(PRODUCE, 9, body)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    api_key=st.sampled_from([0, 1, 2, 3, 18, 19, 20, 22, 32, 37, 44, 9, 1000, -1]),
    version=st.integers(-2, 20),
    body=st.binary(max_size=300),
)
def test_random_requests_never_stop_the_listener(served, api_key, version, body):
    with connect(served.address) as sock, connect(served.address) as bystander:
        frame = struct.pack(">hhi", api_key, version, 7) + body
        with contextlib.suppress(OSError):
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            sock.shutdown(socket.SHUT_WR)
        assert closed_by_peer(sock)  # answered, then closed at the end of the stream
        assert_serving(served, bystander)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(1, 10_000), flip=st.integers(0, 10_000))
def test_truncated_and_damaged_requests(served, cut, flip):
    frame = bytearray(produce_frame())
    damaged = bytearray(frame)
    damaged[4 + flip % (len(frame) - 4)] ^= 0x5A
    with connect(served.address) as sock, connect(served.address) as bystander:
        with contextlib.suppress(OSError):  # the listener may have closed it already
            sock.sendall(bytes(damaged))  # a damaged request: answered or the connection closed
            sock.sendall(bytes(frame[: cut % len(frame)]))  # then a truncated one
            sock.shutdown(socket.SHUT_WR)
        assert closed_by_peer(sock)
        assert_serving(served, bystander)
    assert all(r.key == b"k" and r.value == b"v" for r in stored(served.data, "t"))


@pytest.mark.parametrize("size", [0, -1, -(2**31), 2**31 - 1, 100 * 1024 * 1024 + 1])
def test_wrong_and_huge_claimed_sizes_close_that_connection_only(served, size):
    with connect(served.address) as sock, connect(served.address) as bystander:
        assert_serving(served, bystander)
        sock.sendall(struct.pack(">i", size) + b"\0" * 64)
        assert closed_by_peer(sock)
        assert_serving(served, bystander)  # the same other connection goes on


def test_a_malformed_request_closes_its_connection_only(served):
    with connect(served.address) as bad, connect(served.address) as good:
        assert_serving(served, good)
        frame = struct.pack(">hhi", METADATA, 9, 1) + b"\xff" * 5  # client id claims 65535 bytes
        bad.sendall(struct.pack(">i", len(frame)) + frame)
        assert closed_by_peer(bad)
        assert_serving(served, good)


def test_slow_clients_do_not_hold_up_others(served):
    """Clients that trickle a request byte by byte, and idle ones, while another
    client is answered at once throughout."""
    frame = encode_request(API_VERSIONS, 3, api_versions_body())
    slow = [connect(served.address) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(frame[:3])
        for i in range(3, 12):
            started = time.monotonic()
            assert_serving(served)
            assert time.monotonic() - started < 2
            for sock in slow:
                sock.sendall(frame[i : i + 1])
    finally:
        for sock in slow:
            sock.close()
    assert_serving(served)


def test_a_request_that_never_completes_is_dropped(tmp_path):
    """A begun request must arrive within the request timeout (slow-loris)."""
    data = tmp_path / "data"
    with Served(data, "kafka.request.timeout.ms=500") as served:
        frame = encode_request(API_VERSIONS, 3, api_versions_body())
        with connect(served.address) as sock:
            sock.sendall(frame[:6])
            started = time.monotonic()
            assert closed_by_peer(sock, timeout=20)
            assert time.monotonic() - started < 15
        assert_serving(served)


PRODUCER = """
import sys, time
from kafka import KafkaProducer
from kafka.errors import KafkaError
producer = KafkaProducer(bootstrap_servers=sys.argv[1], acks="all", linger_ms=1, retries=0,
                         enable_idempotence=False, request_timeout_ms=5000, max_block_ms=5000,
                         delivery_timeout_ms=7000)
acked = open(sys.argv[2], "a", buffering=1)
def ack(value, meta):  # Future.add_callback passes its own arguments first
    acked.write(f"{meta.offset} {value.decode()}\\n")
i = 0
while True:
    value = f"record {i}".encode()
    try:
        producer.send("t", value=value, partition=0).add_callback(ack, value)
    except KafkaError:
        break
    i += 1
    if i % 50 == 0:
        time.sleep(0.001)
"""


def test_sigkill_during_acks_all_loses_nothing_acknowledged(tmp_path):
    """A kafka-python producer (its own process) sends with acks=all while the
    daemon is killed; every record it had acknowledged is in the log."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t")
    acked_file = tmp_path / "acked"
    acked_file.touch()
    with Served(data) as served:
        producer = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, served.bootstrap, str(acked_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while len(acked_file.read_bytes().splitlines()) < 2000:
                assert time.monotonic() < deadline, "the producer got no acknowledgements"
                assert producer.poll() is None, "the producer exited"
                time.sleep(0.01)
            served.kill()
        finally:
            producer.kill()
            producer.wait(30)
    acknowledged = []
    for line in acked_file.read_text().splitlines():
        offset, _, value = line.partition(" ")
        if value:  # a line cut by the kill was not acknowledged to anyone
            acknowledged.append((int(offset), value.encode()))
    assert len(acknowledged) >= 2000
    records = {r.offset: r.value for r in stored(data, "t")}
    with Store(data) as store:  # recovery of the killed daemon's partition keeps them too
        recovered = {r.offset: r.value for r in store.log("t", 0).scan()}
    for offset, value in acknowledged:
        assert records.get(offset) == value
        assert recovered.get(offset) == value
