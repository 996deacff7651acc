"""``-o mirror.from=``: a follower daemon copying a leader (a logfs mount with a TLS and
SCRAM listener, standing in for a cluster) byte for byte: shell writers and a
transactional producer with an aborted transaction on the leader; ``tail -f`` on the
follower's mount; kill -9 of either daemon, dropped and stalled connections; read-only
refusals on the mount and the listener; the log start following DeleteRecords."""

from __future__ import annotations

import errno
import json
import random
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka_helpers import mounted
from mirror_helpers import PASSWORD, USER, read_committed
from mount_helpers import LOGFS, Daemon, force_unmount, sh
from prometheus_client.parser import text_string_to_metric_families
from tcp_proxy import Proxy
from waiting import wait_for

pytestmark = pytest.mark.mount

SEGMENT = "segment.bytes=4000"  # several segments, for the files to compare


@pytest.fixture
def leader(tmp_path, pki):
    """A mount whose listener wants TLS and SCRAM: ``client`` are a Kafka client's
    settings for it, ``follow`` a follower's ``-o`` options (``follow(address)`` for
    another address, a proxy's)."""
    users = tmp_path / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    users.chmod(0o600)
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    mnt = tmp_path / "leader-mnt"
    options = (
        f"kafka.sasl.users={users}", f"kafka.ssl.certfile={pki.cert}",
        f"kafka.ssl.keyfile={pki.key}", SEGMENT, "partitions=2",
    )  # fmt: skip
    with mounted(tmp_path / "leader", mnt, *options) as (daemon, address):

        def follow(at: str = address, *more: str) -> list[str]:
            return [
                f"mirror.from=kafka://{at}", "mirror.security.protocol=SASL_SSL",
                "mirror.sasl.mechanism=SCRAM-SHA-512", f"mirror.sasl.username={USER}",
                f"mirror.sasl.password.file={password}", f"mirror.ssl.cafile={pki.ca}",
                "mirror.id=follower-1", "mirror.timeout.ms=3000", *more,
            ]  # fmt: skip

        client = {
            "bootstrap.servers": address, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER,
            "sasl.password": PASSWORD, "ssl.ca.location": str(pki.ca),
        }  # fmt: skip
        yield SimpleNamespace(
            daemon=daemon, address=address, data=tmp_path / "leader", mnt=mnt,
            client=client, follow=follow, options=options,
        )  # fmt: skip


def transactions(leader, topic: str, rounds: int, tag: str) -> None:
    """Committed and aborted transactions of a transactional producer on both partitions."""
    producer = Producer({**leader.client, "transactional.id": f"app-{tag}"})
    producer.init_transactions(30)
    for i in range(rounds):
        producer.begin_transaction()
        for p in (0, 1):
            for j in range(20):
                producer.produce(topic, f"{tag} {i}-{j}".encode(), partition=p)
        producer.flush(30)
        if i % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def shell_lines(mnt: Path, topic: str, count: int, tag: str) -> None:
    sh(f"mkdir -p {mnt}/{topic}")  # two partitions (partitions=2)
    for p in (0, 1):
        sh(f"for i in $(seq {count}); do echo '{tag} line '$i; done >> {mnt}/{topic}/{p}/append")


def segment_files(data: Path, topic: str, p: int, suffix: str = ".log") -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((data / f"{topic}-{p}").glob(f"*{suffix}"))}


def state(mnt: Path, topic: str, p: int) -> dict:
    return json.loads((mnt / topic / str(p) / "state").read_text())


def state_says(mnt: Path, topic: str, p: int, key: str, value) -> bool:
    """Whether the partition's ``state`` has ``value`` at ``key`` (not there yet: no)."""
    try:
        return state(mnt, topic, p)[key] == value
    except FileNotFoundError:
        return False


def identical(leader, data: Path, topic: str, timeout: float = 60) -> None:
    """Wait until both partitions of ``topic`` have the leader's log end, then compare
    the segment files (and the aborted transactions' indexes) byte for byte."""
    for p in (0, 1):
        end = state(leader.mnt, topic, p)["next_offset"]
        wait_for(
            lambda p=p, end=end: (data / f"{topic}-{p}").is_dir()
            and sum(len(b) for b in segment_files(data, topic, p).values())
            == sum(len(b) for b in segment_files(leader.data, topic, p).values())
            and end > 0,
            f"{topic}-{p} copied to its end {end}", timeout=timeout, poll=0.2,
        )  # fmt: skip
        assert segment_files(data, topic, p) == segment_files(leader.data, topic, p)
        assert len(segment_files(data, topic, p)) > 1
        txn = ".txnindex"
        assert segment_files(data, topic, p, txn) == segment_files(leader.data, topic, p, txn)


def test_a_follower_copies_its_leader_byte_for_byte_and_tail_f_sees_it(tmp_path, leader):
    shell_lines(leader.mnt, "events", 200, "before")
    transactions(leader, "events", 6, "txn")
    mnt = tmp_path / "mnt"
    metrics = "metrics=127.0.0.1:0"
    with mounted(tmp_path / "follower", mnt, *leader.follow(), metrics) as (daemon, address):
        identical(leader, tmp_path / "follower", "events")
        for p in (0, 1):
            wait_for(lambda p=p: follower_lag(daemon, p) == (0, 0), "lag 0 in the metrics")
        for p in (0, 1):  # the local LSO and what read_committed readers see: the leader's
            mine, theirs = state(mnt, "events", p), state(leader.mnt, "events", p)
            assert mine["last_stable_offset"] == theirs["last_stable_offset"]
            assert (mnt / "events" / str(p) / "stream").read_bytes() == (
                leader.mnt / "events" / str(p) / "stream"
            ).read_bytes()
            assert mine["follower"]["from"] == f"kafka://{leader.address}"
            assert mine["follower"]["lag_records"] == 0 and mine["follower"]["error"] is None
        for p in (0, 1):  # Kafka's consumers read the copy as the leader
            copy = read_committed({"bootstrap.servers": address}, "events", p)
            assert copy == read_committed(leader.client, "events", p)
            assert len(copy) == 200 + 4 * 20
        config = (mnt / "events" / "config").read_text()
        assert "segment.bytes=4000" in config  # the leader's setting, copied
        tail = subprocess.Popen(
            ["tail", "-n", "0", "-f", str(mnt / "events" / "0" / "stream")],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            time.sleep(0.5)  # tail is at the end
            started = time.monotonic()
            with open(leader.mnt / "events" / "0" / "append", "w") as f:
                f.write("fresh\n")
            assert tail.stdout.readline() == "fresh\n"
            assert time.monotonic() - started < 1.5  # within about a second
        finally:
            tail.kill()
            tail.wait()
            tail.stdout.close()
        shown = subprocess.run(
            [*LOGFS, "describe", str(tmp_path / "follower"), "--mirrors"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert f"From: kafka://{leader.address}" in shown.stdout, shown.stderr
        assert "Partition: events-1" in shown.stdout
    assert "Traceback" not in daemon.output()


def follower_lag(daemon, partition: int) -> tuple[float, float] | None:
    """``logfs_follower_lag_messages`` and ``_ms`` of events-``partition`` as served."""
    found = re.search(r"serving metrics on http://([\d.]+:\d+)/", daemon.output())
    if found is None:
        return None
    with urllib.request.urlopen(f"http://{found[1]}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    lags = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("logfs_follower_lag_") and sample.labels == {
                "source": sample.labels.get("source"), "topic": "events",
                "partition": str(partition),
            }:  # fmt: skip
                lags[sample.name] = sample.value
    if len(lags) != 2:
        return None
    return lags["logfs_follower_lag_messages"], lags["logfs_follower_lag_ms"]


def test_followed_partitions_are_read_only_on_the_mount_and_the_listener(tmp_path, leader):
    shell_lines(leader.mnt, "events", 10, "x")
    mnt = tmp_path / "mnt"
    only = leader.follow(leader.address, "mirror.topics=events")  # "local" is this node's
    with mounted(tmp_path / "follower", mnt, *only) as (daemon, address):
        wait_for(lambda: state_says(mnt, "events", 1, "next_offset", 10), "copied", timeout=60)
        (mnt / "local").mkdir()  # an ordinary topic beside: writable
        for topic in ("events", "local"):
            part = mnt / topic / "0"
            for path, data in [
                (part / "append", b"refused\n"),
                (part / "append.bin", (8).to_bytes(4, "big") + b"refused!"),
                (mnt / topic / "append", b"refused\n"),
                (mnt / topic / "config", b"retention.ms=1000\n"),
            ]:
                if topic == "local":
                    path.write_bytes(data)
                    continue
                with pytest.raises(OSError) as refused, open(path, "wb", buffering=0) as f:
                    f.write(data)
                assert refused.value.errno == errno.EROFS, path
        for command in (f"mkdir {mnt}/events/2", f"rmdir {mnt}/events"):
            done = sh(command, check=False)
            assert done.returncode != 0 and "Read-only file system" in done.stderr, command
        assert state(mnt, "events", 0)["next_offset"] == 10
        assert state(mnt, "local", 0)["next_offset"] == 3
        producer = Producer({"bootstrap.servers": address, "message.timeout.ms": 10000})
        errors = {}
        for topic in ("events", "local"):
            producer.produce(
                topic, b"x", partition=0, on_delivery=lambda e, m: errors.update({m.topic(): e})
            )
        producer.flush(30)
        assert errors["events"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert errors["local"] is None
        admin = AdminClient({"bootstrap.servers": address})
        for futures in (
            admin.delete_records([TopicPartition("events", 0, 5)]),
            admin.create_partitions([NewPartitions("events", 3)]),
            admin.delete_topics(["events"]),
        ):
            for future in futures.values():
                with pytest.raises(KafkaException) as refused:
                    future.result(30)
                code = refused.value.args[0].code()
                assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused.value
        assert state(mnt, "events", 0)["next_offset"] == 10
        assert state(mnt, "events", 0)["log_start_offset"] == 0
    assert "Traceback" not in daemon.output()


def test_the_log_start_follows_delete_records_on_the_leader(tmp_path, leader):
    shell_lines(leader.mnt, "events", 300, "x")
    mnt = tmp_path / "mnt"
    with mounted(tmp_path / "follower", mnt, *leader.follow()) as (daemon, _):
        identical(leader, tmp_path / "follower", "events")
        admin = AdminClient(leader.client)
        done = admin.delete_records([TopicPartition("events", 0, 150)])
        for future in done.values():
            future.result(30)
        wait_for(
            lambda: state_says(mnt, "events", 0, "log_start_offset", 150), "log start", timeout=30
        )
        assert not (mnt / "events" / "0" / "offset" / "149").exists()
        assert (mnt / "events" / "0" / "offset" / "150").read_bytes() == b"x line 151"
    assert "Traceback" not in daemon.output()


def test_kill_9_of_either_side_and_broken_connections_end_byte_identical(tmp_path, leader):
    rng = random.Random(20261126)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with Proxy(tuple_of(leader.address)) as proxy:
        follower = Daemon(tmp_path / "follower", mnt, *leader.follow(proxy.bootstrap)).start()
        try:
            for step in range(6):
                shell_lines(leader.mnt, "events", rng.randrange(50, 300), f"s{step}")
                transactions(leader, "events", 2, f"t{step}")
                wait_for(lambda: proxy.connections > 0, "a connection", timeout=60)
                time.sleep(rng.uniform(0.05, 0.5))
                fault = step % 4
                if fault == 0:
                    follower.kill()
                    force_unmount(mnt)
                    follower = Daemon(tmp_path / "follower", mnt, *follower.options).start()
                elif fault == 1:
                    proxy.cut()
                elif fault == 2:
                    proxy.stall()
                    time.sleep(rng.uniform(0.5, 4.0))  # past mirror.timeout.ms at times
                    proxy.resume()
                else:
                    leader.daemon.kill()
                    force_unmount(leader.mnt)
                    leader.daemon = Daemon(
                        leader.data, leader.mnt, "kafka=" + leader.address, *leader.options
                    ).start()
            identical(leader, tmp_path / "follower", "events", timeout=120)
            shown = (mnt / "events" / "0" / "state").read_text()
            assert json.loads(shown)["follower"]["lag_records"] == 0
        finally:
            follower.stop()
            leader.daemon.stop()
    output = follower.output()
    assert "Traceback" not in output
    assert "follower of kafka://" in output  # the failures were reported


def tuple_of(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def test_bad_follower_options_fail_with_one_line(tmp_path):
    for option, said in [
        ("mirror.from=nowhere", "mirror.from=nowhere: expected kafka://HOST:PORT"),
        ("mirror.from=kafka://h:1,mirror.to=kafka://h:2", "a daemon mirrors one way"),
        ("mirror.from=kafka://h:1,mirror.fetch.max.bytes=10", "mirror.fetch.max.bytes=10"),
        ("mirror.from=kafka://h:1,mirror.max.partition.fetch.bytes=x", "fetch.bytes=x"),
    ]:
        done = subprocess.run(
            [*LOGFS, "serve", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "-o", option],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1, (option, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, (option, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = subprocess.run(
        [*LOGFS, "mirror", str(tmp_path), "kafka://127.0.0.1:1", "-o", "mirror.from=kafka://h:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "a follower runs in" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_follower_behind_the_leaders_log_start_starts_again_there(tmp_path, leader):
    """The follower is down while DeleteRecords on the leader passes its log end: it
    empties the partition and copies from the leader's log start on."""
    shell_lines(leader.mnt, "events", 120, "a")
    mnt = tmp_path / "mnt"
    with mounted(tmp_path / "follower", mnt, *leader.follow()) as (daemon, _):
        identical(leader, tmp_path / "follower", "events")
    shell_lines(leader.mnt, "events", 100, "b")
    admin = AdminClient(leader.client)  # kept: its futures end with it
    done = admin.delete_records([TopicPartition("events", 0, 190)])
    for future in done.values():
        future.result(30)
    with mounted(tmp_path / "follower", mnt, *leader.follow()) as (daemon, _):
        wait_for(lambda: state_says(mnt, "events", 0, "next_offset", 220), "copied", timeout=60)
        mine = state(mnt, "events", 0)
        assert mine["log_start_offset"] == 190 and mine["follower"]["error"] is None
        assert (mnt / "events" / "0" / "offset" / "190").read_bytes() == b"b line 71"
        assert not (mnt / "events" / "0" / "offset" / "189").exists()
        assert sorted(p.name for p in (tmp_path / "follower" / "events-0").glob("*.log")) == [
            f"{190:020d}.log"
        ]
        assert state_says(mnt, "events", 1, "next_offset", 220)  # the other went on as ever
    assert "Traceback" not in daemon.output()
