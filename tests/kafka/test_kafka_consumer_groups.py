"""Consumer groups of both protocols with librdkafka (confluent-kafka), against a real
listener: ``group.protocol=consumer`` (KIP-848, Kafka 4's default) and ``classic``
members share a topic's partitions, rebalance when one joins, leaves or is killed,
commit, and resume after a daemon restart, each record read once; static members
(KIP-345) restart without moving anyone's partitions; ListGroups, DescribeGroups,
ConsumerGroupDescribe and the mount-free report show each group's type."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import Served
from mount_helpers import LOGFS

from logfs.core.log import Store

TOPIC, PARTITIONS = "events", 6
# The coordinator's consumer-protocol sessions, short for the test (Kafka's group.consumer.*).
FAST = (
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.heartbeat.interval.ms=500",
    "group.consumer.min.heartbeat.interval.ms=100",
)

# A member: each record is processed (a line in its output file, flushed) and its
# offset committed synchronously; assignments and revocations go to the same file.
MEMBER = r"""
import signal, sys, time, confluent_kafka as ck
# SIGINT stops a member (`Members.stop`), even if started from a shell's background job,
# which leaves SIGINT ignored in what it runs.
signal.signal(signal.SIGINT, signal.default_int_handler)
bootstrap, group, out, topic, protocol, instance = sys.argv[1:7]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "group.protocol": protocol}
if protocol == "classic":
    conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
if instance != "-":
    conf["group.instance.id"] = instance
    if protocol == "classic":
        conf["session.timeout.ms"] = 60000
c = ck.Consumer(conf)
f = open(out, "a")
def note(what, parts):
    f.write(f"{what} {time.time()} {','.join(str(p.partition) for p in parts)}\n")
    f.flush()
f.write(f"subscribe {time.time()}\n")
c.subscribe([topic], on_assign=lambda c, ps: note("assign", ps),
            on_revoke=lambda c, ps: note("revoke", ps))
try:
    while True:
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        f.write(f"record {m.partition()} {m.offset()} {m.value().decode()}\n")
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


class Members:
    """Group members as child processes, each with its own output file and its
    stderr in a file beside it (``member-N.err``: a traceback, librdkafka's logs)."""

    def __init__(self, tmp: Path, group: str, protocol: str) -> None:
        self.tmp, self.group, self.protocol = tmp, group, protocol
        self.script = tmp / "member.py"
        self.script.write_text(MEMBER)
        self.procs: list[subprocess.Popen] = []
        self.outs: list[Path] = []

    def start(self, bootstrap: str, instance: str = "-") -> int:
        out = self.tmp / f"member-{len(self.procs)}.txt"
        args = [bootstrap, self.group, str(out), TOPIC, self.protocol, instance]
        with open(out.with_suffix(".err"), "w") as err:
            proc = subprocess.Popen(
                [sys.executable, str(self.script), *args], stdout=subprocess.DEVNULL, stderr=err
            )
        self.procs.append(proc)
        self.outs.append(out)
        return len(self.procs) - 1

    def running(self, n: int) -> None:
        """Fail at once if member ``n``'s process ended: its file would go on
        showing what it held when it died."""
        if (code := self.procs[n].poll()) is not None:
            err = self.outs[n].with_suffix(".err").read_text(errors="replace")
            raise AssertionError(f"member-{n} exited {code}; its stderr ends:\n{err[-4000:]}")

    def lines(self, n: int) -> list[list[str]]:
        out = self.outs[n]
        return [line.split(" ") for line in out.read_text().splitlines()] if out.exists() else []

    def records(self) -> list[tuple[int, int, str]]:
        return [
            (int(w[1]), int(w[2]), w[3])
            for n in range(len(self.outs))
            for w in self.lines(n)
            if w[0] == "record"
        ]

    def assigned(self, n: int) -> list[int] | None:
        """What member ``n`` holds now, by its last assign or revoke (None: nothing yet)."""
        held = None
        for w in self.lines(n):
            parts = {int(p) for p in w[2].split(",") if p} if len(w) > 2 else set()
            if w[0] == "assign":  # librdkafka's assign: the whole set (classic eager) or
                held = (held or set()) | parts  # the increment (cooperative, KIP-848)
            elif w[0] == "revoke":
                held = (held or set()) - parts
        return None if held is None else sorted(held)

    def events(self, n: int, after: float = 0) -> list[str]:
        return [w[0] for w in self.lines(n) if w[0] in ("assign", "revoke") and float(w[1]) > after]

    def stop(self, n: int) -> None:
        proc = self.procs[n]
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # close(): it leaves the group
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self, n: int) -> None:
        self.procs[n].kill()
        self.procs[n].wait()

    def stop_all(self) -> None:
        for n in range(len(self.procs)):
            self.stop(n)


def produce(bootstrap: str, values: list[str]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(TOPIC, key=v.encode(), value=v.encode())
    assert p.flush(30) == 0


def committed(bootstrap: str, group: str) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([ck.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], 30)
        return [tp.offset for tp in parts]
    finally:
        c.close()


def ends(data: Path) -> list[int]:
    with Store(data, read_only=True) as store:
        return [store.log(TOPIC, p).next_offset for p in range(PARTITIONS)]


def split_among(members: Members, live: list[int]) -> bool:
    """Whether the ``live`` members hold every partition, each its own."""
    for n in live:
        members.running(n)
    held = [members.assigned(n) for n in live]
    if any(h is None or not h for h in held):
        return False
    flat = [p for h in held for p in h]
    return sorted(flat) == list(range(PARTITIONS))


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_group_shares_rebalances_commits_and_resumes_each_record_once(tmp_path, protocol):
    data = tmp_path / "data"
    group = f"readers-{protocol}"
    members = Members(tmp_path, group, protocol)
    values = [f"v{i}" for i in range(1800)]
    served = Served(data, *FAST).start()
    try:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        produce(served.bootstrap, values[:600])
        for _ in range(3):
            members.start(served.bootstrap)
        wait_for(lambda: split_among(members, [0, 1, 2]), what="three members sharing")
        wait_for(lambda: len(members.records()) >= 600, what="the first 600 records")
        wait_for(lambda: committed(served.bootstrap, group) == ends(data), what="commits")
        members.kill(0)  # killed: its session runs out, its partitions move
        wait_for(lambda: split_among(members, [1, 2]), what="the killed one's partitions moving")
        members.start(served.bootstrap)  # a newcomer joins: partitions move to it
        wait_for(lambda: split_among(members, [1, 2, 3]), what="the newcomer getting some")
        members.stop(1)  # one leaves cleanly
        wait_for(lambda: split_among(members, [2, 3]), what="the leaver's partitions moving")
        produce(served.bootstrap, values[600:1200])
        wait_for(lambda: len(members.records()) >= 1200, what="the next 600 records")
        wait_for(lambda: committed(served.bootstrap, group) == ends(data), what="commits")
        members.stop_all()
        before = committed(served.bootstrap, group)
        assert served.terminate() == 0
        served = Served(data, *FAST).start()  # after a restart: from the commits
        assert committed(served.bootstrap, group) == before
        produce(served.bootstrap, values[1200:])
        restarted = [members.start(served.bootstrap) for _ in range(2)]
        wait_for(lambda: len(members.records()) >= 1800, what="the last 600 records")
        wait_for(lambda: committed(served.bootstrap, group) == ends(data), what="commits")
        # One member may take every partition and read all 600 before the other joins.
        wait_for(lambda: split_among(members, restarted), what="the two sharing after the restart")
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        listing = admin.list_consumer_groups().result(30)
        kinds = {g.group_id: g.type for g in listing.valid}
        assert kinds[group] == getattr(ck.ConsumerGroupType, protocol.upper())
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert len(described.members) == 2
        assert all(m.host == "/127.0.0.1" for m in described.members)
        members.stop_all()
    finally:
        members.stop_all()
        served.__exit__(None, None, None)
    seen = members.records()
    assert len({(p, o) for p, o, _ in seen}) == len(seen) == 1800  # each record once
    assert sorted(v for _, _, v in seen) == sorted(values)
    report = subprocess.run(
        [*LOGFS, "describe", str(data), "--groups", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    [described] = [g for g in json.loads(report.stdout) if g["group"] == group]
    assert described["type"] == protocol
    assert [o["lag"] for o in described["offsets"]] == [0] * PARTITIONS


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_static_member_restarts_without_moving_anyone(tmp_path, protocol):
    data = tmp_path / "data"
    members = Members(tmp_path, f"static-{protocol}", protocol)
    with Served(data, *FAST) as served:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        produce(served.bootstrap, [f"v{i}" for i in range(60)])
        try:
            for name in "abc":
                members.start(served.bootstrap, instance=name)
            wait_for(lambda: split_among(members, [0, 1, 2]), what="three static members")
            time.sleep(2)  # settled: no move under way
            held = [members.assigned(n) for n in range(3)]
            restarted = time.time()
            members.stop(0)  # a static member's close; it comes back under the same instance
            back = members.start(served.bootstrap, instance="a")
            wait_for(lambda: members.assigned(back) is not None, timeout=30, what="its assignment")
            assign = next(float(w[1]) for w in members.lines(back) if w[0] == "assign")
            subscribed = next(float(w[1]) for w in members.lines(back) if w[0] == "subscribe")
            assert assign - subscribed < 1.0, f"{assign - subscribed:.2f} s"
            assert members.assigned(back) == held[0]
            time.sleep(2)
            assert members.events(1, restarted) == members.events(2, restarted) == []
            assert [members.assigned(n) for n in (1, 2)] == held[1:]
            if protocol == "classic":
                # one static member down (not yet expired), another restarts: it gets its
                # partitions back at once, as if nothing happened
                members.kill(1)
                again = time.time()
                members.stop(2)
                last = members.start(served.bootstrap, instance="c")
                wait_for(lambda: members.assigned(last) is not None, timeout=30, what="c back")
                assign = next(float(w[1]) for w in members.lines(last) if w[0] == "assign")
                assert assign - again < 3.0 and members.assigned(last) == held[2]
                assert members.events(back, again) == []
        finally:
            members.stop_all()


def test_a_live_classic_group_converts_and_both_protocols_share_it(tmp_path):
    """Kafka 4's online migration with librdkafka: classic members, then a member of
    the consumer protocol joining (the group converts), then it leaving (the group
    converts back); every record read once."""
    data = tmp_path / "data"
    values = [f"v{i}" for i in range(900)]
    (tmp_path / "modern").mkdir()
    classic = Members(tmp_path, "migrating", "classic")
    modern = Members(tmp_path / "modern", "migrating", "consumer")
    with Served(data, *FAST) as served:
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        produce(served.bootstrap, values[:300])
        try:
            for _ in range(2):
                classic.start(served.bootstrap)
            wait_for(lambda: len(classic.records()) >= 300, what="the classic members reading")

            def kind():
                return {g.group_id: g.type for g in admin.list_consumer_groups().result(30).valid}

            assert kind()["migrating"] == ck.ConsumerGroupType.CLASSIC
            modern.start(served.bootstrap)
            wait_for(lambda: kind()["migrating"] == ck.ConsumerGroupType.CONSUMER, what="upgrade")
            wait_for(lambda: modern.assigned(0), what="the consumer member's partitions")
            produce(served.bootstrap, values[300:600])
            wait_for(
                lambda: len(classic.records()) + len(modern.records()) >= 600,
                what="the next 300 records",
            )
            assert modern.records(), "the consumer member read none"
            modern.stop(0)
            wait_for(lambda: kind()["migrating"] == ck.ConsumerGroupType.CLASSIC, what="downgrade")
            produce(served.bootstrap, values[600:])
            wait_for(
                lambda: len(classic.records()) + len(modern.records()) >= 900,
                what="the last 300 records",
            )
        finally:
            classic.stop_all()
            modern.stop_all()
    seen = classic.records() + modern.records()
    assert len({(p, o) for p, o, _ in seen}) == len(seen) == 900
    assert sorted(v for _, _, v in seen) == sorted(values)
