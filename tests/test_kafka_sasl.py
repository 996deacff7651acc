"""Who may talk to the listener: loopback only without HOST; a listener other
machines can reach refuses to start without SASL credentials (unless anonymous
clients are allowed explicitly), and with them every client must authenticate
(SASL/PLAIN) before anything but ApiVersions."""

from __future__ import annotations

import subprocess

import pytest
from kafka_helpers import LOGFS, Served, call, closed, connect, stored
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
