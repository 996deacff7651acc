"""TLS on the listener (``kafka.ssl.certfile``, ``kafka.ssl.keyfile``): kcat,
kafka-python and confluent-kafka over SSL and SASL_SSL, clients that do not
speak TLS (or stall in the handshake) closed alone, and a large fetch through
TLS read in bounded chunks."""

from __future__ import annotations

import dataclasses
import datetime
import socket
import ssl
import subprocess
import time
from pathlib import Path

from kafka_helpers import (
    LOGFS,
    Served,
    call,
    closed,
    encode_request,
    mounted,
    receive_frame,
    stored,
)
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from logfs.core.log import Store

API_VERSIONS, FETCH = 18, 1


def tls_options(pki) -> tuple[str, str]:
    return f"kafka.ssl.certfile={pki.cert}", f"kafka.ssl.keyfile={pki.key}"


def kcat(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=60)


def tls_connect(address: tuple[str, int], ca: Path, timeout: float = 30) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(ca))
    sock = socket.create_connection(address, timeout=timeout)
    return context.wrap_socket(sock, server_hostname=address[0])


def api_versions(address, sock) -> ErrorCode:
    t = load_request_schema(API_VERSIONS, 3)
    body = t(client_software_name="logfs-test", client_software_version="1")
    return call(address, API_VERSIONS, 3, body, sock).error_code


def test_kcat_produces_and_consumes_over_tls(tmp_path, pki):
    data = tmp_path / "data"
    with Served(data, *tls_options(pki)) as served:
        ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}"]
        out = kcat("-b", served.bootstrap, *ssl_args, "-P", "-t", "sealed", "-K:",
                   input=b"k1:one\nk2:two\n")  # fmt: skip
        assert out.returncode == 0, out.stderr
        out = kcat("-b", served.bootstrap, *ssl_args, "-C", "-t", "sealed", "-e",
                   "-f", "%o %k %s\\n")  # fmt: skip
        assert out.stdout == b"0 k1 one\n1 k2 two\n", out.stderr
        # The server's certificate is checked: without the CA, kcat refuses it.
        out = kcat("-b", served.bootstrap, "-X", "security.protocol=SSL", "-L", "-m", "3")
        assert out.returncode != 0
        assert served.alive()
    assert [(r.key, r.value) for r in stored(data, "sealed")] == [(b"k1", b"one"), (b"k2", b"two")]


def test_kafka_python_and_confluent_kafka_over_tls(tmp_path, pki):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("sealed")
    sent = []
    with Served(data, *tls_options(pki)) as served:
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            producer = KafkaProducer(
                bootstrap_servers=served.bootstrap, security_protocol="SSL",
                ssl_cafile=str(pki.ca), compression_type=codec, linger_ms=5,
            )  # fmt: skip
            futures = []
            for i in range(50):
                value = f"{codec} {i} ".encode() * 20
                sent.append((codec.encode(), value))
                futures.append(producer.send("sealed", key=codec.encode(), value=value))
            for future in futures:
                future.get(timeout=30)
            producer.close()
        producer = Producer({"bootstrap.servers": served.bootstrap, "security.protocol": "SSL",
                             "ssl.ca.location": str(pki.ca)})  # fmt: skip
        for i in range(20):
            producer.produce("sealed", key=b"librdkafka", value=b"confluent %d" % i)
            sent.append((b"librdkafka", b"confluent %d" % i))
        assert producer.flush(30) == 0
        consumer = KafkaConsumer(
            bootstrap_servers=served.bootstrap, security_protocol="SSL", ssl_cafile=str(pki.ca),
            consumer_timeout_ms=3000,
        )  # fmt: skip
        consumer.assign([TopicPartition("sealed", 0)])
        consumer.seek_to_beginning()
        fetched = [(m.offset, m.key, m.value) for m in consumer]
        consumer.close()
    records = stored(data, "sealed")
    assert [(r.key, r.value) for r in records] == sent
    assert fetched == [(r.offset, r.key, r.value) for r in records]


def test_sasl_ssl_with_plain_and_scram(tmp_path, pki):
    from kafka import KafkaProducer

    data = tmp_path / "data"
    users = tmp_path / "users"
    users.write_text("root:over tls\n")
    with Served(data, *tls_options(pki), f"kafka.sasl.users={users}",
                listen="0.0.0.0:0") as served:  # fmt: skip
        sasl_ssl = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={pki.ca}",
                    "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=root"]  # fmt: skip
        out = kcat("-b", served.bootstrap, *sasl_ssl, "-X", "sasl.password=over tls",
                   "-P", "-t", "private", input=b"by kcat\n")  # fmt: skip
        assert out.returncode == 0, out.stderr
        for mechanism in ("PLAIN", "SCRAM-SHA-512"):
            producer = KafkaProducer(
                bootstrap_servers=served.bootstrap, security_protocol="SASL_SSL",
                ssl_cafile=str(pki.ca), sasl_mechanism=mechanism, sasl_plain_username="root",
                sasl_plain_password="over tls",
            )  # fmt: skip
            producer.send("private", value=mechanism.encode()).get(timeout=30)
            producer.close()
        out = kcat("-b", served.bootstrap, *sasl_ssl, "-X", "sasl.password=wrong",
                   "-L", "-m", "3")  # fmt: skip
        assert out.returncode != 0 and b"authentication failed" in out.stderr
        out = kcat("-b", served.bootstrap, *sasl_ssl, "-X", "sasl.password=over tls",
                   "-C", "-t", "private", "-e", "-f", "%s\\n")  # fmt: skip
        assert out.stdout == b"by kcat\nPLAIN\nSCRAM-SHA-512\n", out.stderr
    assert [r.value for r in stored(data, "private")] == [b"by kcat", b"PLAIN", b"SCRAM-SHA-512"]


def test_clients_that_do_not_speak_tls_are_closed_alone(tmp_path, pki):
    """A plaintext Kafka request, garbage instead of a ClientHello, a handshake
    that stalls, and garbage inside a TLS session each close their own
    connection; an established TLS connection goes on being served."""
    with Served(tmp_path / "data", *tls_options(pki), "kafka.request.timeout.ms=1000") as served:
        with tls_connect(served.address, pki.ca) as good:
            assert api_versions(served.address, good) == ErrorCode.none
            t = load_request_schema(API_VERSIONS, 3)
            plaintext = encode_request(API_VERSIONS, 3, t(client_software_name="x",
                                                          client_software_version="1"))  # fmt: skip
            for first_bytes in (
                plaintext,
                b"\x16\x03\x01\x00\x05garbage" * 100,
                b"GET / HTTP/1.0\r\n\r\n",
            ):
                with socket.create_connection(served.address, timeout=30) as bad:
                    bad.sendall(first_bytes)
                    assert closed(bad)
                assert api_versions(served.address, good) == ErrorCode.none
            with socket.create_connection(served.address, timeout=30) as stalled:
                started = time.monotonic()
                assert api_versions(served.address, good) == ErrorCode.none
                assert closed(stalled, timeout=20)  # after kafka.request.timeout.ms
                assert time.monotonic() - started < 15
            with tls_connect(served.address, pki.ca) as bad:
                bad.sendall(b"\x00\x00\x00\x10" + b"\xff" * 16)  # a header that does not parse
                assert closed(bad)
            assert api_versions(served.address, good) == ErrorCode.none
        assert served.alive()
        log = served.output()
    assert "Traceback" not in log and "TLS handshake" in log


def test_tls_files_that_cannot_be_used_fail_the_start(tmp_path, pki):
    cases = {
        f"kafka.ssl.certfile={pki.cert},kafka.ssl.keyfile={pki.dir / 'locked.key'}": "passphrase",
        f"kafka.ssl.certfile={pki.cert},kafka.ssl.keyfile={pki.dir / 'other.key'}": "not match",
        f"kafka.ssl.certfile={pki.cert}": "not a PEM certificate chain and its private key",
        f"kafka.ssl.certfile={tmp_path / 'missing.pem'}": "No such file",
        f"kafka.ssl.keyfile={pki.key}": "needs kafka.ssl.certfile",
    }
    for options, message in cases.items():
        done = subprocess.run(
            [*LOGFS, "serve", str(tmp_path / "data"), "--listen", "127.0.0.1:0", "-o", options],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1 and message in done.stderr, (options, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_mount_serves_tls_beside_its_files(tmp_path, pki):
    """kcat over TLS to a mount's listener: the records are in ``stream`` and
    ``offset/<n>`` at once, and a line appended through the mount is fetched."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt, *tls_options(pki)) as (daemon, address):
        ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}"]
        out = kcat("-b", address, *ssl_args, "-P", "-t", "both", input=b"over tls\n")
        assert out.returncode == 0, out.stderr
        assert (mnt / "both/0/offset/0").read_bytes() == b"over tls"
        with open(mnt / "both/0/append", "ab") as f:
            f.write(b"through the mount\n")
        out = kcat("-b", address, *ssl_args, "-C", "-t", "both", "-e", "-f", "%o %s\\n")
        assert out.stdout == b"0 over tls\n1 through the mount\n", out.stderr
        assert (mnt / "both/0/stream").read_bytes() == b"over tls\nthrough the mount\n"


def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_a_large_fetch_through_tls_is_exact_and_bounded_in_memory(tmp_path, pki):
    """48 MiB of batches fetched in one answer through TLS arrive exactly as
    the segment file holds them, while the daemon's peak RSS grows by far less
    than the answer (the bytes go through in chunks)."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("big", config={"segment.bytes": str(1 << 30)})
        log = store.log("big", 0)
        value = bytes(range(256)) * 256  # 64 KiB, incompressible enough for its purpose
        for i in range(48):
            log.append([value[i:] + value[:i]] * 16)  # one MiB each
        store.flush()
    segment = next((data / "big-0").glob("*.log")).read_bytes()
    assert len(segment) > 48 << 20
    t = load_request_schema(FETCH, 11)
    module = __import__(t.__module__, fromlist=["x"])
    request = t(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=64 << 20,
        isolation_level=0, forgotten_topics_data=(),
        topics=(module.FetchTopic(topic="big", partitions=(
            module.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 << 20),
        )),),
    )  # fmt: skip
    with Served(data, *tls_options(pki)) as served:
        pid = served.proc.pid
        with tls_connect(served.address, pki.ca) as sock:
            assert api_versions(served.address, sock) == ErrorCode.none
            small = call(served.address, FETCH, 11, dataclasses.replace(request, max_bytes=1), sock)
            assert small.responses[0].partitions[0].records  # the path is warm
            before = rss_kib(pid, "VmRSS")
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
            sock.sendall(encode_request(FETCH, 11, request))
            frame = receive_frame(sock)
            peak = rss_kib(pid, "VmHWM")
        assert served.alive()
    response_type = load_response_schema(FETCH, 11)
    from kio.schema.response_header.v0.header import ResponseHeader

    _, used = entity_reader(ResponseHeader)(frame, 0)
    answer, _ = entity_reader(response_type)(frame, used)
    records = answer.responses[0].partitions[0].records
    assert records == segment
    assert peak - before < 16 * 1024, f"the daemon grew by {peak - before} KiB"
