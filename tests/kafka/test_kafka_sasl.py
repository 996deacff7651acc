"""Who may talk to the listener: loopback only without HOST; a listener other
machines can reach refuses to start without SASL credentials (unless anonymous
clients are allowed explicitly), and with them every client must authenticate
(SASL/PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) before anything but ApiVersions."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_helpers import LOGFS, Served, call, closed, connect, receive_frame, stored
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from mount_helpers import mount_type

from logfs.core.log import Store

KCAT_SASL = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN"]


@pytest.fixture
def users(tmp_path):
    path = tmp_path / "kafka-users"
    path.write_text("# who may connect\nalice:correct horse\nbob:b:with:colons\n")
    path.chmod(0o600)
    return path


def kcat(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=60)


def test_a_non_loopback_listener_needs_credentials_or_an_explicit_choice(tmp_path):
    done = subprocess.run(
        [*LOGFS, "serve", str(tmp_path / "data"), "--listen", "0.0.0.0:0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "kafka.sasl.users" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        [*LOGFS, "mount", str(tmp_path / "data"), str(mnt), "-o", "kafka=0.0.0.0:0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "not a loopback address" in done.stderr
    assert mount_type(mnt) is None
    with Served(tmp_path / "data", "kafka.allow.anonymous=true", listen="0.0.0.0:0") as served:
        out = kcat("-b", served.bootstrap, "-P", "-t", "open", input=b"anyone\n")
        assert out.returncode == 0, out.stderr
    assert [r.value for r in stored(tmp_path / "data", "open")] == [b"anyone"]


def test_plain_authentication_with_kcat_and_kafka_python(tmp_path, users):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("secure")
    data.chmod(0o777)  # alice and bob are no local users: the modes for others apply
    with Served(data, f"kafka.sasl.users={users}", listen="0.0.0.0:0") as served:
        good = [*KCAT_SASL, "-X", "sasl.username=alice", "-X", "sasl.password=correct horse"]
        out = kcat("-b", served.bootstrap, *good, "-P", "-t", "secure", input=b"one\ntwo\n")
        assert out.returncode == 0, out.stderr
        producer = KafkaProducer(
            bootstrap_servers=served.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="b:with:colons",
        )  # fmt: skip
        producer.send("secure", value=b"three", headers=[("by", b"bob")]).get(timeout=30)
        producer.close()
        out = kcat("-b", served.bootstrap, *good, "-C", "-t", "secure", "-e", "-f", "%o %s\\n")
        assert out.stdout == b"0 one\n1 two\n2 three\n"
        consumer = KafkaConsumer(
            bootstrap_servers=served.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username="alice",
            sasl_plain_password="correct horse", consumer_timeout_ms=3000,
        )  # fmt: skip
        consumer.assign([TopicPartition("secure", 0)])
        consumer.seek_to_beginning()
        assert [(m.offset, m.value) for m in consumer] == [(0, b"one"), (1, b"two"), (2, b"three")]
        consumer.close()
        # A wrong password, an unknown user, no authentication at all: refused.
        for user, password in (("alice", "wrong"), ("mallory", "correct horse")):
            bad = [*KCAT_SASL, "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
            out = kcat("-b", served.bootstrap, *bad, "-L", "-m", "3")
            assert out.returncode != 0 and b"authentication failed" in out.stderr
        out = kcat("-b", served.bootstrap, "-P", "-t", "secure", "-m", "3", input=b"sneaky\n")
        assert out.returncode != 0
        with connect(served.address) as sock:  # ApiVersions is answered, nothing else
            t = load_request_schema(18, 3)
            answer = call(served.address, 18, 3, t(client_software_name="x",
                                                   client_software_version="1"), sock)  # fmt: skip
            assert answer.error_code == ErrorCode.none
            t = load_request_schema(3, 9)
            metadata = t(
                topics=None,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
            with pytest.raises(ConnectionError):
                call(served.address, 3, 9, metadata, sock)
            assert closed(sock)
        assert served.alive()
    assert [r.value for r in stored(data, "secure")] == [b"one", b"two", b"three"]


def test_a_credentials_file_that_cannot_be_used_fails_the_start(tmp_path):
    bad = tmp_path / "users"
    bad.write_text("no colon here\n")
    for path in (bad, tmp_path / "missing"):
        done = subprocess.run(
            [*LOGFS, "serve", str(tmp_path / "data"), "--listen", "0:0",
             "-o", f"kafka.sasl.users={path}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1 and str(path) in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_principals_are_local_users_with_the_mounts_modes(tmp_path):
    """DATA owned by root, mode 0755: root may do everything; the local user
    nobody may read but not produce, create, alter or delete."""
    import pwd

    from confluent_kafka.admin import AdminClient, NewTopic

    pwd.getpwnam("nobody")  # the principal below is this local user
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("owned")
    data.chmod(0o755)
    users = tmp_path / "users"
    users.write_text("root:rootpw\nnobody:nobodypw\n")
    with Served(data, f"kafka.sasl.users={users}") as served:
        root = [*KCAT_SASL, "-X", "sasl.username=root", "-X", "sasl.password=rootpw"]
        nobody = [*KCAT_SASL, "-X", "sasl.username=nobody", "-X", "sasl.password=nobodypw"]
        out = kcat("-b", served.bootstrap, *root, "-P", "-t", "owned", input=b"by root\n")
        assert out.returncode == 0, out.stderr
        out = kcat("-b", served.bootstrap, *nobody, "-P", "-t", "owned", input=b"by nobody\n")
        assert out.returncode != 0 and b"authorization failed" in out.stderr.lower()
        out = kcat("-b", served.bootstrap, *nobody, "-C", "-t", "owned", "-e", "-f", "%s\\n")
        assert out.returncode == 0 and out.stdout == b"by root\n"  # reading is allowed

        def admin(user: str, password: str) -> AdminClient:
            return AdminClient({
                "bootstrap.servers": served.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": password,
            })  # fmt: skip

        as_nobody = admin("nobody", "nobodypw")
        with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
            as_nobody.delete_topics(["owned"])["owned"].result(10)
        with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
            as_nobody.create_topics([NewTopic("mine", 1, 1)])["mine"].result(10)
        as_root = admin("root", "rootpw")  # kept: a client destroyed drops its futures
        assert as_root.delete_topics(["owned"])["owned"].result(10) is None
    with Store(data, read_only=True) as store:
        assert store.topics() == {}


# ---------------------------------------------------------------- SCRAM


def test_scram_sha_256_computation_matches_rfc_7677():
    """RFC 7677 section 3's exchange, with its salt and server nonce."""
    from logfs.kafka.scram import Failed, ScramServer, derive

    keys = derive("pencil", "SCRAM-SHA-256", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    final = f"c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()

    def server():
        return ScramServer(
            "SCRAM-SHA-256", {"user": keys}.__getitem__, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        )

    exchange = server()
    assert exchange.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    )
    assert exchange.user is None
    assert exchange.step(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.user == "user" and exchange.done
    with pytest.raises(Failed):
        exchange.step(final)  # nothing after the last message
    exchange = server()
    exchange.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(Failed, match="invalid credentials"):
        exchange.step(final.replace(b"p=dHzb", b"p=dHzc"))
    assert exchange.user is None


@settings(max_examples=300, deadline=None)
@given(first=st.binary(max_size=200), final=st.binary(max_size=300))
def test_scram_refuses_any_bytes_with_failed_only(first, final):
    """Whatever a client sends, the exchange answers or raises Failed, and
    never authenticates without the proof."""
    from logfs.kafka.scram import Failed, ScramServer, derive

    keys = derive("pencil", "SCRAM-SHA-512", b"salt" * 4)
    exchange = ScramServer("SCRAM-SHA-512", lambda user: keys)
    for message in (b"n,,n=user,r=abc" if first[:1] == b"!" else first, final):
        try:
            exchange.step(message)
        except Failed:
            break
    assert exchange.user is None


def test_scram_with_kafka_python_kcat_and_confluent_kafka(tmp_path, users):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("salted")
    data.chmod(0o777)  # alice and bob are no local users: the modes for others apply
    with Served(data, f"kafka.sasl.users={users}", listen="0.0.0.0:0") as served:
        for mechanism, user, password in (("SCRAM-SHA-256", "alice", "correct horse"),
                                          ("SCRAM-SHA-512", "bob", "b:with:colons")):  # fmt: skip
            producer = KafkaProducer(
                bootstrap_servers=served.bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
            )  # fmt: skip
            producer.send("salted", value=mechanism.encode()).get(timeout=30)
            producer.close()
        scram512 = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
                    "-X", "sasl.username=alice"]  # fmt: skip
        good = [*scram512, "-X", "sasl.password=correct horse"]
        out = kcat("-b", served.bootstrap, *good, "-P", "-t", "salted", input=b"by kcat\n")
        assert out.returncode == 0, out.stderr
        producer = Producer({
            "bootstrap.servers": served.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "bob",
            "sasl.password": "b:with:colons",
        })  # fmt: skip
        producer.produce("salted", value=b"by confluent-kafka")
        assert producer.flush(30) == 0
        plain = [*KCAT_SASL, "-X", "sasl.username=alice", "-X", "sasl.password=correct horse"]
        out = kcat("-b", served.bootstrap, *plain, "-P", "-t", "salted", input=b"by PLAIN\n")
        assert out.returncode == 0, out.stderr
        out = kcat("-b", served.bootstrap, *good, "-C", "-t", "salted", "-e", "-f", "%s\\n")
        expected = [
            b"SCRAM-SHA-256",
            b"SCRAM-SHA-512",
            b"by kcat",
            b"by confluent-kafka",
            b"by PLAIN",
        ]
        assert out.stdout.splitlines() == expected, out.stderr
        consumer = KafkaConsumer(
            bootstrap_servers=served.bootstrap, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
            sasl_plain_password="b:with:colons", consumer_timeout_ms=3000,
        )  # fmt: skip
        consumer.assign([TopicPartition("salted", 0)])
        consumer.seek_to_beginning()
        assert [m.value for m in consumer] == expected
        consumer.close()
        # A wrong password or an unknown user, with either mechanism.
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for user, password in (("alice", "wrong"), ("mallory", "correct horse")):
                bad = ["-X", "security.protocol=SASL_PLAINTEXT", "-X",
                       f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
                       "-X", f"sasl.password={password}"]  # fmt: skip
                out = kcat("-b", served.bootstrap, *bad, "-L", "-m", "3")
                assert out.returncode != 0 and b"authentication failed" in out.stderr
        assert served.alive()
    assert [r.value for r in stored(data, "salted")] == expected


def scram_client_final(server_first: bytes, client_first_bare: str, password: str,
                       name: str = "sha256", gs2: str = "n,,") -> str:  # fmt: skip
    """The client's final message (RFC 5802 section 3), computed here on its own."""
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))  # fmt: skip
    client_key = hmac.digest(salted, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={fields['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth, name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def sasl_request(api_key: int, version: int, **fields):
    return load_request_schema(api_key, version)(**fields)


def test_scram_exchanges_that_break_the_rules_are_refused(tmp_path, users):
    """Channel binding, a changed nonce, an oversized message, bytes that are
    not UTF-8 and a request before the end: SASL_AUTHENTICATION_FAILED (or a
    closed connection) for that client only. SaslHandshake v0 with bare frames
    works for SCRAM too."""
    HANDSHAKE, AUTHENTICATE = 17, 36
    bare = "n=alice,r=fyko+d2lbbFgONRv9qkxdawL"
    with Served(tmp_path / "data", f"kafka.sasl.users={users}") as served:

        def begin(sock) -> None:
            answer = call(served.address, HANDSHAKE, 1,
                          sasl_request(HANDSHAKE, 1, mechanism="SCRAM-SHA-256"), sock)  # fmt: skip
            assert answer.error_code == ErrorCode.none
            assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

        def authenticate(sock, token: bytes):
            return call(served.address, AUTHENTICATE, 2,
                        sasl_request(AUTHENTICATE, 2, auth_bytes=token), sock)  # fmt: skip

        def refused(first: bytes, final=None) -> None:
            with connect(served.address) as sock:
                begin(sock)
                answer = authenticate(sock, first)
                if final is not None:
                    assert answer.error_code == ErrorCode.none
                    answer = authenticate(sock, final(answer.auth_bytes))
                assert answer.error_code == ErrorCode.sasl_authentication_failed
                assert answer.error_message.startswith("authentication failed")
                assert closed(sock)

        refused(f"p=tls-unique,,{bare}".encode())  # channel binding is not offered
        refused(b"n,,r=nonce-without-user")
        refused(b"n,a=bob," + bare.encode())  # authorization identity of someone else
        refused(b"n,,n=alice,r=" + b"x" * 9000)  # over the bound of one message
        refused(b"n,,n=\xff\xfe,r=abc")
        refused(f"n,,{bare}".encode(), lambda first: b"c=biws,r=other-nonce,p=AAAA")
        refused(f"n,,{bare}".encode(), lambda first: scram_client_final(
            first, bare, "correct horse").replace("c=biws", "c=eSws").encode())  # fmt: skip
        refused(f"n,,{bare}".encode(),
                lambda first: scram_client_final(first, bare, "wrong").encode())  # fmt: skip

        # Between client-first and client-final nothing else is served.
        with connect(served.address) as sock:
            begin(sock)
            authenticate(sock, f"n,,{bare}".encode())
            t = load_request_schema(3, 9)
            metadata = t(topics=None, allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False,
                         include_topic_authorized_operations=False)  # fmt: skip
            with pytest.raises(ConnectionError):
                call(served.address, 3, 9, metadata, sock)

        # The right proof, computed here, over SaslAuthenticate and over SaslHandshake v0.
        with connect(served.address) as sock:
            begin(sock)
            first = authenticate(sock, f"n,,{bare}".encode()).auth_bytes
            final = authenticate(sock, scram_client_final(first, bare, "correct horse").encode())
            assert final.error_code == ErrorCode.none and final.auth_bytes.startswith(b"v=")
            assert call(served.address, 3, 9, metadata, sock).brokers
        with connect(served.address) as sock:
            answer = call(served.address, HANDSHAKE, 0,
                          sasl_request(HANDSHAKE, 0, mechanism="SCRAM-SHA-512"), sock)  # fmt: skip
            assert answer.error_code == ErrorCode.none
            sock.sendall(struct.pack(">i", len(bare) + 3) + f"n,,{bare}".encode())
            first = receive_frame(sock)
            final = scram_client_final(first, bare, "correct horse", "sha512").encode()
            sock.sendall(struct.pack(">i", len(final)) + final)
            assert receive_frame(sock).startswith(b"v=")
            assert call(served.address, 3, 9, metadata, sock).brokers
        assert served.alive()
        assert "Traceback" not in served.output()
