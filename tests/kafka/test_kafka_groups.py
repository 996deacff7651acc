"""Consumer groups through the listener with Kafka's own clients: a
confluent-kafka group of three reading a 6-partition topic exactly once
across rebalances and a daemon restart, kafka-python's KafkaConsumer, kcat's
balanced consumer (-G), and ``__consumer_offsets`` decoded independently."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import Served, mounted
from mount_helpers import LOGFS

from logfs.core.log import Store

KCAT = shutil.which("kcat")
TOPIC, PARTITIONS = "events", 6

# One member of a confluent-kafka group: each record is processed (a line in
# its output file, flushed) and then its offset is committed synchronously.
MEMBER = r"""
import sys, confluent_kafka as ck
bootstrap, group, out = sys.argv[1:4]
c = ck.Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
    "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
})
c.subscribe([sys.argv[4]])
with open(out, "a") as f:
    try:
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            f.write(f"{m.partition()} {m.offset()} {m.value().decode()}\n")
            f.flush()
            c.commit(m, asynchronous=False)
    except KeyboardInterrupt:
        pass
c.close()
"""


def wait_for(condition, timeout: float = 90, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return result


def produce(bootstrap: str, values: list[str]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(TOPIC, key=v.encode(), value=v.encode())
    assert p.flush(30) == 0


def committed(bootstrap: str, group: str) -> list[int]:
    """The group's committed offsets (OffsetFetch), by partition."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([ck.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 30)
        return [tp.offset for tp in parts]
    finally:
        c.close()


def ends(data: Path) -> list[int]:
    with Store(data, read_only=True) as store:
        return [store.log(TOPIC, p).next_offset for p in range(PARTITIONS)]


class Members:
    """Group members as child processes, each with its own output file."""

    def __init__(self, tmp: Path, group: str) -> None:
        self.tmp, self.group = tmp, group
        self.script = tmp / "member.py"
        self.script.write_text(MEMBER)
        self.procs: list[subprocess.Popen] = []
        self.outs: list[Path] = []

    def start(self, bootstrap: str) -> subprocess.Popen:
        out = self.tmp / f"member-{len(self.procs)}.txt"
        proc = subprocess.Popen(
            [sys.executable, str(self.script), bootstrap, self.group, str(out), TOPIC],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.procs.append(proc)
        self.outs.append(out)
        return proc

    def seen(self) -> list[tuple[int, int, str]]:
        rows = []
        for out in self.outs:
            if out.exists():
                for line in out.read_text().splitlines():
                    p, o, v = line.split(" ", 2)
                    rows.append((int(p), int(o), v))
        return rows

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # close(): LeaveGroup
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def stable_members(bootstrap: str, group: str) -> int:
    """Members of the group once it is Stable, else 0 (DescribeGroups)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(30)
    if described.state != ck.ConsumerGroupState.STABLE:
        return 0
    return len(described.members)


def test_confluent_group_of_three_reads_every_record_once_across_rebalance_and_restart(tmp_path):
    data = tmp_path / "data"
    members = Members(tmp_path, "readers")
    values = [f"v{i}" for i in range(1800)]
    served = Served(data).start()
    try:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        produce(served.bootstrap, values[:600])
        for _ in range(3):
            members.start(served.bootstrap)
        wait_for(lambda: len(members.seen()) >= 600, what="the first 600 records")
        wait_for(lambda: committed(served.bootstrap, "readers") == ends(data), what="commits")
        # A member is killed (its session expires) and another joins.
        members.procs[0].kill()
        members.procs[0].wait()
        members.start(served.bootstrap)
        wait_for(lambda: stable_members(served.bootstrap, "readers") == 3, what="a rebalance")
        produce(served.bootstrap, values[600:1200])
        wait_for(lambda: len(members.seen()) >= 1200, what="the next 600 records")
        wait_for(lambda: committed(served.bootstrap, "readers") == ends(data), what="commits")
        members.stop_all()
        before = committed(served.bootstrap, "readers")
        assert served.terminate() == 0
        # After a restart the group resumes from its commits.
        served = Served(data).start()
        assert committed(served.bootstrap, "readers") == before
        produce(served.bootstrap, values[1200:])
        for _ in range(3):
            members.start(served.bootstrap)
        wait_for(lambda: len(members.seen()) >= 1800, what="the last 600 records")
        wait_for(lambda: committed(served.bootstrap, "readers") == ends(data), what="commits")
        members.stop_all()
    finally:
        members.stop_all()
        served.__exit__(None, None, None)
    seen = members.seen()
    positions = [(p, o) for p, o, _ in seen]
    assert len(positions) == len(set(positions)) == 1800  # every record once, none twice
    assert sorted(v for _, _, v in seen) == sorted(values)
    # Partitions changed hands (the kill, the newcomer, the restart) and each new
    # owner went on from the last owner's commit.
    readers = {}
    for n, out in enumerate(members.outs):
        for line in out.read_text().splitlines() if out.exists() else []:
            readers.setdefault(int(line.split()[0]), set()).add(n)
    assert any(len(r) > 1 for r in readers.values())


def test_kafka_python_consumer_group_commits_and_resumes(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with Served(tmp_path / "data", "partitions=3") as served:
        producer = KafkaProducer(bootstrap_servers=served.bootstrap)
        for i in range(30):
            producer.send("kp", key=b"%d" % i, value=b"r%d" % i)
        producer.flush()
        producer.close()

        def consume(expected: int) -> list[bytes]:
            consumer = KafkaConsumer(
                "kp", bootstrap_servers=served.bootstrap, group_id="kpg",
                auto_offset_reset="earliest", enable_auto_commit=False,
                consumer_timeout_ms=3000,
            )  # fmt: skip
            got = []
            deadline = time.monotonic() + 60
            while len(got) < expected and time.monotonic() < deadline:
                for m in consumer:
                    got.append(m.value)
                    if len(got) == expected:
                        break
            consumer.commit()
            offsets = [consumer.committed(TopicPartition("kp", p)) for p in range(3)]
            consumer.close()
            return got, offsets

        got, offsets = consume(30)
        assert sorted(got) == sorted(b"r%d" % i for i in range(30))
        with Store(tmp_path / "data", read_only=True) as store:
            assert offsets == [store.log("kp", p).next_offset for p in range(3)]
        producer = KafkaProducer(bootstrap_servers=served.bootstrap)
        producer.send("kp", value=b"later").get(30)
        producer.close()
        got, _ = consume(1)
        assert got == [b"later"]  # resumed from the commits, nothing read twice


def test_kcat_balanced_consumer_commits(tmp_path):
    assert KCAT, "kcat is not installed (mount_scripts/install.sh installs it)"
    with Served(tmp_path / "data", "partitions=2") as served:
        lines = b"".join(b"line %d\n" % i for i in range(40))
        subprocess.run(
            [KCAT, "-b", served.bootstrap, "-P", "-t", "kc"], input=lines, check=True, timeout=60
        )
        proc = subprocess.Popen(
            [KCAT, "-b", served.bootstrap, "-G", "kcg", "-o", "beginning", "-f", "%p %o %s\n",
             "-X", "auto.commit.interval.ms=100", "kc"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with Store(tmp_path / "data", read_only=True) as store:
                ends = [store.log("kc", p).next_offset for p in range(2)]
            assert sum(ends) == 40
            # A partition the producer left empty has nothing to commit (-1001: none).
            want = [end if end else ck.OFFSET_INVALID for end in ends]
            wait_for(lambda: committed_of(served.bootstrap, "kcg", "kc", 2) == want,
                     what="kcat's commits")  # fmt: skip
        finally:
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
        rows = out.decode().splitlines()
        assert sorted(r.split(" ", 2)[2] for r in rows) == sorted(f"line {i}" for i in range(40))


def committed_of(bootstrap: str, group: str, topic: str, count: int) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [t.offset for t in c.committed([ck.TopicPartition(topic, p) for p in range(count)])]
    finally:
        c.close()


def _string(data: bytes, at: int) -> tuple[str | None, int]:
    (size,) = struct.unpack_from(">h", data, at)
    if size < 0:
        return None, at + 2
    return data[at + 2 : at + 2 + size].decode(), at + 2 + size


def test_consumer_offsets_in_kafkas_record_formats(tmp_path):
    """The internal topic's batches decode with kafka-python's record reader, and
    their keys and values with Kafka's schemas, read here field by field."""
    from kafka.record import MemoryRecords

    data = tmp_path / "data"
    with Served(data, "partitions=2") as served:
        produce_topic = ck.Producer({"bootstrap.servers": served.bootstrap})
        for i in range(10):
            produce_topic.produce("fmt", value=b"x", partition=i % 2)
        produce_topic.flush(30)
        c = ck.Consumer({
            "bootstrap.servers": served.bootstrap, "group.id": "fmtg",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        c.subscribe(["fmt"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 10 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
                c.commit(m, asynchronous=False)
        c.close()
        assert got == 10
        # Hidden from listings, refused to producers.
        meta = AdminClient({"bootstrap.servers": served.bootstrap}).list_topics(timeout=30)
        assert "__consumer_offsets" not in meta.topics
        p = ck.Producer({"bootstrap.servers": served.bootstrap, "message.timeout.ms": 5000})
        errors = []
        p.produce("__consumer_offsets", value=b"x", on_delivery=lambda e, m: errors.append(e))
        p.flush(30)
        assert errors and errors[0].code() == ck.KafkaError.TOPIC_EXCEPTION
    segments = sorted((data / "__consumer_offsets-0").glob("*.log"))
    assert segments
    offsets, groups = {}, {}
    for segment in segments:
        records = MemoryRecords(segment.read_bytes())
        while records.has_next():
            for record in records.next_batch():
                (version,) = struct.unpack_from(">h", record.key, 0)
                if version == 1:
                    group, at = _string(record.key, 2)
                    topic, at = _string(record.key, at)
                    (partition,) = struct.unpack_from(">i", record.key, at)
                    (v, offset, epoch) = struct.unpack_from(">hqi", record.value, 0)
                    metadata, at = _string(record.value, 14)
                    (stamp,) = struct.unpack_from(">q", record.value, at)
                    assert v == 3 and at + 8 == len(record.value) and stamp > 0
                    offsets[(group, topic, partition)] = offset
                else:
                    assert version == 2
                    group, _ = _string(record.key, 2)
                    (v,) = struct.unpack_from(">h", record.value, 0)
                    protocol_type, at = _string(record.value, 2)
                    (generation,) = struct.unpack_from(">i", record.value, at)
                    assert v == 3 and protocol_type == "consumer"
                    groups[group] = generation
    assert offsets == {("fmtg", "fmt", 0): 5, ("fmtg", "fmt", 1): 5}
    assert groups["fmtg"] >= 1
    assert os.path.getsize(segments[-1]) > 0


def test_the_internal_topic_is_hidden_from_the_mount(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    with mounted(data, mnt) as (_, bootstrap):
        subprocess.run(
            [KCAT, "-b", bootstrap, "-P", "-t", "seen"], input=b"a\nb\n", check=True, timeout=60
        )
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "hid"})
        c.commit(offsets=[ck.TopicPartition("seen", 0, 2)], asynchronous=False)
        assert [tp.offset for tp in c.committed([ck.TopicPartition("seen", 0)], 30)] == [2]
        c.close()
        assert (data / "__consumer_offsets-0").is_dir()
        listing = subprocess.run(["ls", str(mnt)], capture_output=True, text=True, check=True)
        assert listing.stdout.split() == ["seen"]
        hidden = subprocess.run(["stat", str(mnt / "__consumer_offsets")], capture_output=True)
        assert hidden.returncode != 0 and b"No such file" in hidden.stderr


def test_kafkajs_consumer_group(tmp_path):
    script = Path(__file__).resolve().parents[1] / "helpers" / "kafkajs" / "group.js"
    node_modules = Path(sys.prefix) / "node" / "node_modules"  # installed by install.sh
    assert shutil.which("node"), "node is not installed (mount_scripts/install.sh installs it)"
    assert (node_modules / "kafkajs").is_dir(), f"KafkaJS is not installed in {node_modules}"
    with Served(tmp_path / "data") as served:
        done = subprocess.run(
            ["node", str(script), served.bootstrap],
            capture_output=True, text=True, timeout=180,
            env={**os.environ, "NODE_PATH": str(node_modules)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["assigned"] == [2, 2]  # the four partitions shared between the two members
    rows = seen["read"][0] + seen["read"][1]
    assert sorted(rows) == sorted([i % 4, i // 4, f"m{i}"] for i in range(40))  # each once
    assert seen["committed"] == [[p, "10"] for p in range(4)]
    assert "jsg" in seen["groups"]


def test_a_static_member_takes_its_place_back_without_waiting_for_its_session(tmp_path):
    with Served(tmp_path / "data", "partitions=2") as served:
        produce_to = ck.Producer({"bootstrap.servers": served.bootstrap})
        for i in range(20):
            produce_to.produce("st", value=b"%d" % i, partition=i % 2)
        assert produce_to.flush(30) == 0
        config = {
            "bootstrap.servers": served.bootstrap, "group.id": "static",
            "group.instance.id": "reader-1", "session.timeout.ms": 60000,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        }  # fmt: skip

        def read(count: int) -> tuple[list[bytes], float]:
            c = ck.Consumer(config)
            c.subscribe(["st"])
            started, got = time.monotonic(), []
            first = None
            while len(got) < count and time.monotonic() - started < 60:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    first = first or time.monotonic() - started
                    got.append(m.value())
                    c.commit(m, asynchronous=False)
            c.close()  # a static member does not leave the group on close
            return got, first

        got, _ = read(20)
        assert sorted(got) == sorted(b"%d" % i for i in range(20))
        assert stable_members(served.bootstrap, "static") == 1  # still a member
        for i in range(20, 24):
            produce_to.produce("st", value=b"%d" % i, partition=i % 2)
        assert produce_to.flush(30) == 0
        got, first = read(4)
        # Taken over at once, not after the old membership's 60 s session.
        assert sorted(got) == [b"20", b"21", b"22", b"23"] and first < 20
        assert stable_members(served.bootstrap, "static") == 1


def describe_groups_cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*LOGFS, "describe", str(data), "--groups", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_logfs_describe_groups_shows_members_offsets_and_lag(tmp_path):
    data = tmp_path / "data"
    with Served(data) as served:
        p = ck.Producer({"bootstrap.servers": served.bootstrap})
        for i in range(10):
            p.produce("dg", value=b"%d" % i)
        assert p.flush(30) == 0
        c = ck.Consumer({
            "bootstrap.servers": served.bootstrap, "group.id": "lagging",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })  # fmt: skip
        c.subscribe(["dg"])
        read = 0
        while read < 5:
            m = c.poll(0.5)
            if m is not None and not m.error():
                read += 1
                c.commit(m, asynchronous=False)
        member = c.memberid()
        # Beside the running daemon: the member, its assignment, the lag.
        done = describe_groups_cli(data, "--json")
        assert done.returncode == 0, done.stderr
        (group,) = json.loads(done.stdout)
        assert group["group"] == "lagging" and group["state"] == "Stable"
        assert group["protocol_type"] == "consumer"
        assert [(m["member_id"], m["assignment"]) for m in group["members"]] == [
            (member, [["dg", 0]])
        ]
        assert group["offsets"] == [
            {"topic": "dg", "partition": 0, "committed_offset": 5, "log_end_offset": 10,
             "lag": 5, "member_id": member}
        ]  # fmt: skip
        c.close()  # leaves: the group is empty, its offsets stay
    done = describe_groups_cli(data)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Group: lagging\tType: classic\tState: Empty\t")
    assert lines[1] == (
        "\tTopic: dg\tPartition: 0\tCommittedOffset: 5\tLogEndOffset: 10\tLag: 5\tMember: -"
    )
    assert describe_groups_cli(data, "other").stdout == ""
