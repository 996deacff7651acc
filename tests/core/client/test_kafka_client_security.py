"""logfs's own Kafka clients (``Producer("kafka://...")`` and `RemoteStore`) over TLS and
SASL/SCRAM: against a listener with ``kafka.ssl.certfile`` and ``kafka.sasl.users``, checked
with kafka-python's consumer (the same settings, kafka-python's names) and the Store API;
a wrong CA, host name or password fails in one line; the SCRAM client against RFC 7677's
test vector, logfs's SCRAM server and a server that does not hold the user's keys."""

from __future__ import annotations

import base64
import datetime
import io
import re
import socket
import struct
import threading

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka_helpers import Served, stored
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from logfs import Store
from logfs.core.client import Producer, RemoteStore
from logfs.core.client.scram import ScramClient, ScramError
from logfs.core.client.security import Security
from logfs.core.client.wire import AuthenticationError, WireError
from logfs.core.errors import InvalidConfigError
from logfs.core.format import decode_records
from logfs.kafka import scram as server_scram

USER, PASSWORD = "etl", "pa:ss wörd"
SSL = ("SSL", "SASL_SSL")


def listener_options(pki, protocol: str, users=None) -> list[str]:
    options = []
    if protocol in SSL:
        options += [f"kafka.ssl.certfile={pki.cert}", f"kafka.ssl.keyfile={pki.key}"]
    if protocol.startswith("SASL_"):
        users.write_text(f"{USER}:{PASSWORD}\n")
        options.append(f"kafka.sasl.users={users}")
    return options


def settings(pki, protocol: str, mechanism: str | None, **changes) -> dict:
    """The client settings, in kafka-python's names (logfs's clients use the same)."""
    out: dict = {"security_protocol": protocol}
    if protocol in SSL:
        out["ssl_cafile"] = str(pki.ca)
    if mechanism:
        out.update(sasl_mechanism=mechanism, sasl_plain_username=USER, sasl_plain_password=PASSWORD)
    return {**out, **changes}


def kafka_python_records(bootstrap: str, topic: str, partitions: int, **client) -> list[tuple]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000, **client
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    rows = [(m.partition, m.offset, m.key, m.value, list(m.headers)) for m in consumer]
    consumer.close()
    return sorted(rows)


@pytest.mark.parametrize(
    "protocol, mechanism, host",
    [
        ("SSL", None, "127.0.0.1"),
        ("SASL_SSL", "PLAIN", "127.0.0.1"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "127.0.0.1"),
        ("SASL_SSL", "SCRAM-SHA-512", "localhost"),  # the certificate's DNS name
    ],
)
def test_producer_and_remote_store_over_tls_and_sasl(tmp_path, pki, protocol, mechanism, host):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("secure", 2)
    data.chmod(0o777)  # "etl" is no local user: the modes for others apply
    client = settings(pki, protocol, mechanism)
    with Served(data, *listener_options(pki, protocol, tmp_path / "users")) as served:
        address = f"kafka://{host}:{served.address[1]}"
        with Producer(address, compression_type="zstd", **client) as producer:
            for i in range(100):
                key = None if i % 7 == 0 else b"k%d" % (i % 3)
                producer.send("secure", b"v%d" % i, key=key, headers=[("i", b"%d" % i)],
                              partition=i % 2)  # fmt: skip
            receipts = producer.flush()
        assert sorted((r.partition, r.first_offset, r.last_offset) for r in receipts) == [
            (0, 0, 49),
            (1, 0, 49),
        ]
        expected = sorted(
            (i % 2, i // 2, None if i % 7 == 0 else b"k%d" % (i % 3), b"v%d" % i,
             [("i", b"%d" % i)])
            for i in range(100)
        )  # fmt: skip
        assert kafka_python_records(served.bootstrap, "secure", 2, **client) == expected
        with RemoteStore(address, **client) as net:
            assert dict(net.topics()) == {"secure": 2}
            remote = sorted(
                (p, r.offset, r.key, r.value, list(r.headers))
                for p in (0, 1)
                for h, b in net.log("secure", p).raw_batches()
                for r in decode_records(b, h)
            )
        assert remote == expected
        assert served.alive()
    local = sorted(
        (p, r.offset, r.key, r.value, list(r.headers))
        for p in (0, 1)
        for r in stored(data, "secure", p)
    )
    assert local == expected


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_certificate_that_does_not_verify_fails_clearly(tmp_path, pki):
    with Served(tmp_path / "data", *listener_options(pki, "SSL")) as served:
        address = f"kafka://{served.bootstrap}"
        for cafile in (pki.other_ca, None):  # another CA of the same name; the system's CAs
            verify_failed = "TLS handshake failed: certificate verify failed"
            with (
                pytest.raises(WireError, match=verify_failed),
                Producer(address, security_protocol="SSL", ssl_cafile=cafile) as producer,
            ):
                producer.send("t", b"never")
            with pytest.raises(WireError, match="certificate verify failed") as e:
                RemoteStore(address, security_protocol="SSL", ssl_cafile=cafile).topics()
            assert one_line(e).startswith(f"{address}: ")
        # A plaintext client of a TLS listener is told what the listener closes.
        with pytest.raises(WireError, match="one with kafka.ssl.certfile plaintext") as e:
            RemoteStore(address).topics()
        one_line(e)
        with pytest.raises(WireError, match="does the listener have kafka.sasl.users") as e:
            RemoteStore(address, **settings(pki, "SASL_SSL", "SCRAM-SHA-256")).topics()
        one_line(e)
        assert served.alive()
    with Served(tmp_path / "plain") as served:
        with pytest.raises(WireError, match="TLS handshake failed: .*does it serve TLS") as e:
            RemoteStore(f"kafka://{served.bootstrap}", **settings(pki, "SSL", None)).topics()
        one_line(e)


def test_the_host_name_is_checked_unless_turned_off(tmp_path, pki):
    """127.0.0.2 is not in the certificate (localhost, 127.0.0.1): refused, unless
    ssl_check_hostname is false (Kafka's empty endpoint identification algorithm)."""
    options = [*listener_options(pki, "SSL"), "kafka.allow.anonymous=true"]
    with Served(tmp_path / "data", *options, listen="0.0.0.0:0") as served:
        address = f"kafka://127.0.0.2:{served.address[1]}"
        with pytest.raises(WireError, match="IP address mismatch.*ssl_check_hostname") as e:
            RemoteStore(address, **settings(pki, "SSL", None)).topics()
        one_line(e)
        with Producer(address, **settings(pki, "SSL", None, ssl_check_hostname=False)) as producer:
            producer.send("named", b"anyway")
            [receipt] = producer.flush()
        assert (receipt.topic, receipt.first_offset) == ("named", 0)
    assert [r.value for r in stored(tmp_path / "data", "named")] == [b"anyway"]


@pytest.mark.parametrize("protocol, mechanism", [("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                 ("SASL_SSL", "SCRAM-SHA-512")])  # fmt: skip
def test_a_wrong_scram_password_fails(tmp_path, pki, protocol, mechanism):
    with Served(tmp_path / "data", *listener_options(pki, protocol, tmp_path / "users")) as served:
        wrong = settings(pki, protocol, mechanism, sasl_plain_password="pa:ss word")
        address = f"kafka://{served.bootstrap}"
        with pytest.raises(
            AuthenticationError, match=f"SASL/{mechanism} authentication as 'etl' failed"
        ) as e:
            RemoteStore(address, **wrong).topics()
        one_line(e)
        with pytest.raises(AuthenticationError), Producer(address, **wrong) as producer:
            producer.send("t", b"never")
        assert served.alive()
    assert "t-0" not in {p.name for p in (tmp_path / "data").iterdir()}


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"security_protocol": "TLS"}, "security_protocol 'TLS' is not one of PLAINTEXT, SSL"),
        ({"security_protocol": "SASL_SSL"}, "needs sasl_plain_username and sasl_plain_password"),
        ({"sasl_plain_username": "u"}, "needs sasl_plain_username and sasl_plain_password"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
          "sasl_plain_username": "u", "sasl_plain_password": "p"},
         "sasl_mechanism 'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"security_protocol": "SSL", "sasl_plain_username": "u", "sasl_plain_password": "p"},
         "SASL settings need security_protocol SASL_PLAINTEXT or SASL_SSL, not SSL"),
        ({"sasl_mechanism": "SCRAM-SHA-256"}, "SASL settings need security_protocol"),
        ({"ssl_cafile": "/ca.pem"}, "ssl_cafile needs security_protocol SSL or SASL_SSL"),
        ({"security_protocol": "SSL", "ssl_cafile": "/no/such/ca.pem"},
         "ssl_cafile /no/such/ca.pem: No such file or directory"),
    ],
)  # fmt: skip
def test_security_settings_are_checked_at_once(keywords, message):
    for client in (Producer, RemoteStore):
        with pytest.raises(InvalidConfigError, match=message):
            client("kafka://127.0.0.1:1", **keywords)


def test_a_ca_file_that_is_not_pem(tmp_path, pki):
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    with pytest.raises(InvalidConfigError, match="not a PEM file of CA certificates"):
        Producer("kafka://127.0.0.1:1", security_protocol="SSL", ssl_cafile=str(jks))
    for cafile in (pki.ca, pki.dir / "server.pem"):  # a CA; a certificate chain
        assert Security.of("SSL", ssl_cafile=str(cafile)).context() is not None


# ---------------------------------------------------------------- SCRAM


def test_rfc_7677_test_vector():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="signature does not match"):
        client.verify(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ScramError, match="the server refused: invalid-proof"):
        client.verify(b"e=invalid-proof")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["etl", "a=b,c", "ünï"])
def test_the_client_against_logfs_scram_server(mechanism, user):
    keys = {user: server_scram.derive("secret", mechanism)}
    for password, accepted in (("secret", True), ("Secret", False)):
        server = server_scram.ScramServer(mechanism, keys.__getitem__)
        client = ScramClient(mechanism, user, password)
        server_first = server.step(client.first())
        final = client.final(server_first)
        if accepted:
            client.verify(server.step(final))
            assert server.user == user
        else:
            with pytest.raises(server_scram.Failed, match="invalid credentials"):
                server.step(final)


@pytest.mark.parametrize(
    "server_first, message",
    [
        (b"r={nonce}abc,s=c2FsdA==,i=1", "asks for 1 iterations (this client accepts 4096"),
        (b"r={nonce}abc,s=c2FsdA==,i=100000000", "asks for 100000000 iterations"),
        (b"r=other,s=c2FsdA==,i=4096", "nonce does not extend the client's"),
        (b"r={nonce},s=c2FsdA==,i=4096", "nonce does not extend the client's"),
        (b"r={nonce}abc,s=*,i=4096", "salt is not base64"),
        (b"m=ext,r={nonce}abc,s=c2FsdA==,i=4096", "an extension this client does not know"),
        (b"e=unknown-user", "the server refused: unknown-user"),
        (b"garbage", "a malformed server-first message"),
    ],
)
def test_bad_server_first_messages(server_first, message):
    client = ScramClient("SCRAM-SHA-256", "u", "p")
    client.first()
    with pytest.raises(ScramError, match=re.escape(message)):
        client.final(server_first.replace(b"{nonce}", client.nonce.encode()))


class Impostor:
    """A Kafka server on loopback that answers SaslHandshake and SaslAuthenticate as a SCRAM
    server would, without holding the user's keys: its server-first message is
    ``server_first`` (``{nonce}``: the client's) and its server-final a made-up signature."""

    def __init__(self, server_first: bytes) -> None:
        self.server_first = server_first
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"kafka://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        with self.sock:
            conn, _ = self.sock.accept()
        with conn, conn.makefile("rb") as stream:
            nonce = b""
            while header := stream.read(4):
                frame = stream.read(struct.unpack(">i", header)[0])
                key, version = struct.unpack(">hh", frame[:4])
                request_type = load_request_schema(key, version)
                head, used = entity_reader(request_type.__header_schema__)(frame, 0)
                body, _ = entity_reader(request_type)(frame, used)
                response_type = load_response_schema(key, version)
                if key == 17:
                    answer = response_type(error_code=ErrorCode.none, mechanisms=("SCRAM-SHA-256",))
                else:
                    if body.auth_bytes.startswith(b"n,,"):
                        nonce = body.auth_bytes.partition(b"r=")[2]
                        token = self.server_first.replace(b"{nonce}", nonce)
                    else:
                        token = b"v=" + base64.b64encode(bytes(32))
                    answer = response_type(error_code=ErrorCode.none, error_message=None,
                                           auth_bytes=token,
                                           session_lifetime=datetime.timedelta(0))  # fmt: skip
                out = io.BytesIO()
                entity_writer(response_type.__header_schema__)(
                    out, response_type.__header_schema__(correlation_id=head.correlation_id)
                )
                entity_writer(response_type)(out, answer)
                conn.sendall(struct.pack(">i", len(out.getvalue())) + out.getvalue())


@pytest.mark.parametrize(
    "server_first, message",
    [
        (b"r={nonce}xyz,s=c2FsdHNhbHQ=,i=4096", "signature does not match"),
        (b"r={nonce}xyz,s=c2FsdHNhbHQ=,i=2", "asks for 2 iterations"),
    ],
)
def test_a_server_that_does_not_hold_the_keys_is_refused(server_first, message):
    impostor = Impostor(server_first)
    client = {"sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "u",
              "sasl_plain_password": "p"}  # fmt: skip
    with pytest.raises(AuthenticationError, match=f"SASL/SCRAM-SHA-256 .* failed: .*{message}"):
        RemoteStore(impostor.address, **client).topics()
    impostor.thread.join(30)
    assert not impostor.thread.is_alive()  # the client hung up
