"""The listener's budgets against hostile local users: raw sockets run as users
made here with ``useradd`` (removed at teardown), the daemon's RSS read from
/proc, and another user's requests timed meanwhile. Each test ends with the
daemon alive and answering, and a control topic unchanged."""

from __future__ import annotations

import datetime
import json
import os
import pwd
import subprocess
import threading
import time
from pathlib import Path

import pytest
import trio
import trio.testing
from kafka_helpers import (
    LOGFS,
    Served,
    call,
    connect,
    decode_response,
    encode_request,
    receive_frame,
    stored,
)
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from logfs.core.log import Store
from logfs.kafka.budgets import (
    ConnectionSlots,
    FailedAuthentications,
    RequestMemory,
    client_key,
)

API_VERSIONS, METADATA, JOIN_GROUP = 18, 3, 11
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
CLIENTS = Path(__file__).parents[1] / "helpers" / "raw_clients.py"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def users():
    """Two local users, made for these tests and removed after them."""
    names = [f"lfsb{os.getpid() % 100000}{c}" for c in "ab"]
    for name in names:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    try:
        yield [pwd.getpwnam(n) for n in names]
    finally:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True, timeout=60)


def as_user(user, mode: str, spec: dict) -> subprocess.Popen:
    """raw_clients.py ``mode`` as ``user`` (the system's interpreter: stdlib only)."""
    return subprocess.Popen(
        ["/usr/bin/python3", str(CLIENTS), mode, json.dumps(spec)],
        user=user.pw_uid, group=user.pw_gid, extra_groups=[],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def result(proc: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def api_versions_body():
    t = load_request_schema(API_VERSIONS, 3)
    return t(client_software_name="probe", client_software_version="1")


def answered_in(served: Served, metadata: bool = True) -> float:
    """Seconds another client (root, on a new connection) waits for ApiVersions
    and (unless the listener wants SASL first) for Metadata of the control topic."""
    started = time.monotonic()
    assert call(served.address, API_VERSIONS, 3, api_versions_body()).error_code == 0
    if not metadata:
        return time.monotonic() - started
    t = load_request_schema(METADATA, 9)
    m = __import__(t.__module__, fromlist=["MetadataRequestTopic"])
    body = t(
        topics=(m.MetadataRequestTopic(name="control"),), allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False,
    )  # fmt: skip
    topic = call(served.address, METADATA, 9, body).topics[0]
    assert topic.error_code == 0 and len(topic.partitions) == 1
    return time.monotonic() - started


class Watch:
    """Samples the daemon's RSS and another client's answer time until stopped."""

    def __init__(self, served: Served) -> None:
        self.served, self.rss, self.waits = served, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.rss.append(rss_mib(self.served.proc.pid))
            self.waits.append(answered_in(self.served))
            time.sleep(0.1)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def run(test) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


def test_request_memory_makes_frames_wait_not_grow():
    async def test():
        memory = RequestMemory(100)
        order = []

        async def frame(name: str, size: int, hold_for: float):
            charge = await memory.hold(size, name)  # each its own client
            order.append((name, trio.current_time()))
            assert memory.held <= memory.total
            await trio.sleep(hold_for)
            memory.release(charge, name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(frame, "a", 60, 1)
            await trio.sleep(0.1)
            nursery.start_soon(frame, "b", 60, 1)  # waits for a
            nursery.start_soon(frame, "c", 30, 1)  # fits beside a
            nursery.start_soon(frame, "huge", 500, 1)  # over the budget: served alone
        assert [n for n, _ in order[:2]] == ["a", "c"]
        times = dict(order)
        assert times["b"] >= 1 and memory.held == 0 and memory.waiting == 0
        assert times["huge"] >= times["b"] + 1 or times["b"] >= times["huge"] + 1

    run(test)


def test_one_client_holds_at_most_half_the_budget_beyond_one_frame():
    async def test():
        memory = RequestMemory(100)
        got = []

        async def frame(key, size):
            got.append((key, size, await memory.hold(size, key)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(frame, "a", 70)  # one frame over half: taken
            await trio.sleep(0.1)
            nursery.start_soon(frame, "a", 20)  # a second of a's: waits for a's first
            await trio.sleep(0.1)
            nursery.start_soon(frame, "b", 30)  # b still has room
            await trio.sleep(0.1)
            assert [(k, s) for k, s, _ in got] == [("a", 70), ("b", 30)]
            assert memory.by_client == {"a": 70, "b": 30} and memory.waiting == 1
            memory.release(70, "a")
        assert got[-1][:2] == ("a", 20) and memory.by_client == {"a": 20, "b": 30}
        memory.release(20, "a")
        memory.release(30, "b")
        assert memory.held == 0 and memory.by_client == {}

    run(test)


def test_connection_slots_per_user_and_per_address():
    slots = ConnectionSlots(per_ip=2, per_user=3)
    alice, remote = client_key(1000, "127.0.0.1"), client_key(None, "10.0.0.7")
    assert [slots.take(alice) for _ in range(3)] == [None] * 3
    assert "uid 1000 holds 3 connections" in slots.take(alice)
    assert slots.take(client_key(1001, "127.0.0.1")) is None  # another user, same address
    assert [slots.take(remote) for _ in range(2)] == [None] * 2
    assert "10.0.0.7" in slots.take(remote)
    slots.give(alice)
    assert slots.take(alice) is None
    root = client_key(0, "127.0.0.1")
    assert all(slots.take(root) is None for _ in range(10))  # root is not counted
    for _ in range(3):
        slots.give(alice)
    assert alice not in slots.held


def test_failed_authentications_are_one_delay_apart_per_client():
    async def test():
        failures = FailedAuthentications(0.1)
        ends = {}

        async def fail(key, i):
            await failures.wait(key)
            ends[key, i] = trio.current_time()

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(fail, ("uid", 1000), i)
            nursery.start_soon(fail, ("uid", 1001), 0)
        mine = sorted(t for (key, _), t in ends.items() if key == ("uid", 1000))
        assert mine[-1] >= 2.0 - 1e-9
        assert all(b - a >= 0.1 - 1e-9 for a, b in zip(mine, mine[1:], strict=False))
        assert ends[("uid", 1001), 0] <= 0.1 + 1e-9  # another client is not held up

    run(test)


def control_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("control")
        store.log("control", 0).append([b"unchanged"])
    return data


def assert_unharmed(served: Served, data: Path, metadata: bool = True) -> None:
    assert served.alive(), served.output()
    assert answered_in(served, metadata) < 1
    assert "Traceback" not in served.output()
    served.terminate()
    assert [r.value for r in stored(data, "control")] == [b"unchanged"]


def test_request_bytes_are_held_within_the_budget(tmp_path, users):
    """12 connections of one user each send a 99 MiB frame at once (row 2): the
    daemon holds at most queued.max.request.bytes of them, the others wait."""
    data = control_data(tmp_path)
    with Served(data) as served:
        before = rss_mib(served.proc.pid)
        spec = {"address": served.address, "count": 12, "size": 99 * MiB}
        with Watch(served) as watch:
            flood = as_user(users[0], "flood", spec)
            out = result(flood, timeout=600)
        assert sum(out["sent"]) > 6 * 99 * MiB  # the frames were sent, most of them whole
        assert max(watch.rss) - before < 128 + 64, (before, max(watch.rss))
        assert max(watch.waits) < 1, watch.waits
        assert_unharmed(served, data)


def test_request_budget_option_bounds_memory_lower(tmp_path, users):
    """A smaller budget holds the daemon lower still: frames of 40 MiB, one at a time."""
    data = control_data(tmp_path)
    with Served(data, f"queued.max.request.bytes={48 * MiB}") as served:
        before = rss_mib(served.proc.pid)
        spec = {"address": served.address, "count": 8, "size": 40 * MiB}
        with Watch(served) as watch:
            result(as_user(users[0], "flood", spec), timeout=600)
        assert max(watch.rss) - before < 48 + 40, (before, max(watch.rss))
        assert max(watch.waits) < 1, watch.waits
        assert_unharmed(served, data)


def test_one_user_cannot_take_every_connection(tmp_path, users):
    """One user's 300 sockets (row 3): 100 are served, the rest closed at once;
    another user still connects and is answered; idle sockets and half-sent size
    fields are closed in time."""
    data = control_data(tmp_path)
    options = ("connections.max.idle.ms=3000", "kafka.request.timeout.ms=1500")
    with Served(data, *options) as served:
        idle = as_user(users[0], "hold", {"address": served.address, "count": 250, "seconds": 12})
        time.sleep(1)  # (they connect first)
        half = {"address": served.address, "count": 50, "prefix": "0000", "seconds": 12}
        halves = as_user(users[0], "hold", half)
        time.sleep(1)
        other = as_user(
            users[1], "attempts",
            {"address": served.address, "threads": 20, "close_within": 0.5,
             "attempts": [[encode_request(API_VERSIONS, 3, api_versions_body()).hex()]] * 40},
        )  # fmt: skip
        answered = result(other)
        assert all(len(a) == 1 for a in answered["answers"]), answered
        idle_out, half_out = result(idle), result(halves)
        assert idle_out["opened"] == 250 and half_out["opened"] == 50
        # Times count from each socket's connect; the idle timeout is 3 s.
        refused = [t for t in idle_out["closed"] + half_out["closed"] if t is not None and t < 2]
        assert len(refused) == 200, (idle_out, half_out)  # 300 - 100, closed as they came
        served_idle = [t for t in idle_out["closed"] if t is None or t >= 2]
        assert len(served_idle) == 100 and all(t is not None and t < 8 for t in served_idle)
        assert answered_in(served) < 1
        assert_unharmed(served, data)


def test_frames_declared_and_never_sent_leave_others_their_share(tmp_path, users):
    """One user declares a 99 MiB and a 29 MiB frame (the whole budget) and sends
    one byte of each: its second waits for its first, so others are answered, and
    each is closed at the request timeout (the second's counted once it has its share)."""
    data = control_data(tmp_path)
    with Served(data, "kafka.request.timeout.ms=5000") as served:
        prefixes = [(size * MiB).to_bytes(4, "big").hex() + "00" for size in (99, 29)]
        spec = {"address": served.address, "prefixes": prefixes, "seconds": 14}
        holder = as_user(users[0], "hold", spec)
        time.sleep(1)
        assert answered_in(served) < 1
        out = result(holder)
        first, second = out["closed"]
        # The second's time starts once it has its bytes: when the first is closed.
        assert first is not None and 3 < first < 7, out
        assert second is not None and first + 3 < second < 13, out
        assert_unharmed(served, data)


def test_half_sent_size_fields_are_closed_by_the_request_timeout(tmp_path, users):
    data = control_data(tmp_path)
    options = ("connections.max.idle.ms=60000", "kafka.request.timeout.ms=1500")
    with Served(data, *options) as served:
        half = {"address": served.address, "count": 30, "prefix": "0000", "seconds": 10}
        out = result(as_user(users[0], "hold", half))
        assert all(t is not None and 1 <= t < 5 for t in out["closed"]), out
        assert_unharmed(served, data)


def sasl_frames(password: str) -> list[str]:
    handshake = load_request_schema(SASL_HANDSHAKE, 1)(mechanism="PLAIN")
    authenticate = load_request_schema(SASL_AUTHENTICATE, 2)(
        auth_bytes=b"\0alice\0" + password.encode()
    )
    return [
        encode_request(SASL_HANDSHAKE, 1, handshake).hex(),
        encode_request(SASL_AUTHENTICATE, 2, authenticate).hex(),
    ]


def test_failed_authentications_are_spaced_per_client(tmp_path, users):
    """40 wrong PLAIN passwords from one user over 10 connections at a time
    (row 5) take at least 40 delays; another user's right one is not delayed."""
    data = control_data(tmp_path)
    credentials = tmp_path / "kafka-users"
    credentials.write_text("alice:right\n")
    credentials.chmod(0o600)
    options = (f"kafka.sasl.users={credentials}", "connection.failed.authentication.delay.ms=100")
    with Served(data, *options) as served:
        guesses = {
            "address": served.address, "threads": 10,
            "attempts": [sasl_frames(f"guess{i}") for i in range(40)],
        }  # fmt: skip
        guessing = as_user(users[0], "attempts", guesses)
        time.sleep(1)
        right = {"address": served.address, "threads": 1, "close_within": 0.2,
                 "attempts": [sasl_frames("right")]}  # fmt: skip
        started = time.monotonic()
        good = result(as_user(users[1], "attempts", right))
        assert time.monotonic() - started < 2
        out = result(guessing)
        assert len(good["answers"][0]) == 2
        _, answer = decode_response(SASL_AUTHENTICATE, 2, bytes.fromhex(good["answers"][0][1]))
        assert answer.error_code == ErrorCode.none
        for answers in out["answers"]:
            assert len(answers) == 2
            _, answer = decode_response(SASL_AUTHENTICATE, 2, bytes.fromhex(answers[1]))
            assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert max(out["ends"]) >= 40 * 0.1 - 0.2, out["ends"]
        assert_unharmed(served, data, metadata=False)


def join_frame(group: str, metadata: bytes) -> bytes:
    t = load_request_schema(JOIN_GROUP, 3)
    m = __import__(t.__module__, fromlist=["JoinGroupRequestProtocol"])
    body = t(
        group_id=group, session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30), member_id="",
        protocol_type="consumer",
        protocols=(m.JoinGroupRequestProtocol(name="range", metadata=metadata),),
    )  # fmt: skip
    return encode_request(JOIN_GROUP, 3, body)


def join_code(sock, group: str, metadata: bytes) -> int:
    sock.sendall(join_frame(group, metadata))
    return decode_response(JOIN_GROUP, 3, receive_frame(sock))[1].error_code


def test_group_metadata_is_bounded_and_let_go_with_its_connection(tmp_path):
    """Members' metadata (row 1): a member over its bound is refused, members over
    the daemon's budget are refused, and members whose connection closed before
    they synced are let go within the shortest session, not at the end of theirs
    (30 s here)."""
    data = control_data(tmp_path)
    options = (f"group.metadata.max.bytes={8 * MiB}",)
    with Served(data, *options) as served:
        before = rss_mib(served.proc.pid)
        with connect(served.address) as sock:
            for i in range(30):
                assert join_code(sock, f"big{i}", bytes(20 * MiB)) == ErrorCode.invalid_request
        socks = [connect(served.address) for _ in range(9)]
        try:
            codes = [join_code(s, f"g{i}", bytes(950 * 1024)) for i, s in enumerate(socks)]
            assert codes[:8] == [ErrorCode.none] * 8
            assert codes[8] == ErrorCode.group_max_size_reached
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + 15
        while True:  # within group.min.session.timeout.ms (6 s) and a sweep
            with connect(served.address) as sock:
                if join_code(sock, "after", bytes(950 * 1024)) == ErrorCode.none:
                    break
            assert time.monotonic() < deadline, "the closed members' metadata was not let go"
            time.sleep(0.2)
        assert rss_mib(served.proc.pid) - before < 100
        assert_unharmed(served, data)


def test_a_metadata_request_creates_a_bounded_number_of_topics(tmp_path):
    """One Metadata request naming 3,000 unknown topics (row 4) creates at most
    kafka.auto.create.topics.per.request of them, and others are answered meanwhile."""
    data = control_data(tmp_path)
    with Served(data) as served:
        t = load_request_schema(METADATA, 9)
        m = __import__(t.__module__, fromlist=["MetadataRequestTopic"])
        names = tuple(m.MetadataRequestTopic(name=f"flood-{i}") for i in range(3000))
        body = t(
            topics=names, allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False, include_topic_authorized_operations=False,
        )  # fmt: skip
        with Watch(served) as watch:
            started = time.monotonic()
            answer = call(served.address, METADATA, 9, body)
            took = time.monotonic() - started
        created = [x for x in answer.topics if x.error_code == 0]
        assert len(created) == 10, len(created)
        assert {x.error_code for x in answer.topics} == {0, ErrorCode.unknown_topic_or_partition}
        assert took < 5 and max(watch.waits, default=0) < 1
        assert_unharmed(served, data)
    with Store(data, read_only=True) as store:
        assert len([t for t in store.topics() if t.startswith("flood-")]) == 10


@pytest.mark.parametrize(
    "option",
    [
        "queued.max.request.bytes=0",
        "connections.max.idle.ms=x",
        "max.connections.per.ip=-1",
        "kafka.max.connections.per.user=",
        "connection.failed.authentication.delay.ms=1.5",
        "group.metadata.max.bytes=0",
    ],
)
def test_a_bad_budget_is_one_line_and_no_daemon(tmp_path, option):
    done = subprocess.run(
        [*LOGFS, "serve", str(tmp_path / "data"), "--listen", "127.0.0.1:0", "-o", option],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert option.split("=")[0] in done.stderr


def test_two_users_flooding_at_once_share_one_budget(tmp_path, users):
    """Two users' 8 connections each send 60 MiB frames at once: the daemon still
    holds at most the budget, and a third client is answered meanwhile."""
    data = control_data(tmp_path)
    with Served(data, f"queued.max.request.bytes={64 * MiB}") as served:
        before = rss_mib(served.proc.pid)
        spec = {"address": served.address, "count": 8, "size": 60 * MiB}
        with Watch(served) as watch:
            floods = [as_user(user, "flood", spec) for user in users]
            outs = [result(flood, timeout=600) for flood in floods]
        assert all(sum(out["sent"]) > 4 * 60 * MiB for out in outs)
        assert max(watch.rss) - before < 64 + 60, (before, max(watch.rss))
        assert max(watch.waits) < 1, watch.waits
        assert_unharmed(served, data)


def test_creating_many_topics_at_once_leaves_others_served(tmp_path):
    """CreateTopics naming 500 topics: each is created, and other clients are
    answered between two creations."""
    data = control_data(tmp_path)
    with Served(data) as served:
        t = load_request_schema(19, 5)
        m = __import__(t.__module__, fromlist=["CreatableTopic"])
        topics = tuple(
            m.CreatableTopic(
                name=f"many-{i}",
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(),
            )  # fmt: skip
            for i in range(500)
        )
        body = t(topics=topics, timeout=datetime.timedelta(seconds=60), validate_only=False)
        with Watch(served) as watch:
            answer = call(served.address, 19, 5, body)
        assert [x.error_code for x in answer.topics] == [0] * 500
        assert max(watch.waits, default=0) < 1, watch.waits
        assert_unharmed(served, data)


def test_thousands_of_partitions_are_made_and_deleted_off_the_loop(tmp_path):
    """CreateTopics of 2,000 partitions, CreatePartitions to 3,000 and DeleteTopics
    (seconds of fsync and rmdir): the files are made and removed in worker threads,
    and other clients are answered within a second meanwhile."""
    data = control_data(tmp_path)
    with Served(data) as served:
        create = load_request_schema(19, 5)
        c = __import__(create.__module__, fromlist=["CreatableTopic"])
        topic = c.CreatableTopic(
            name="wide", num_partitions=2000, replication_factor=1, assignments=(), configs=()
        )
        grow = load_request_schema(37, 3)
        g = __import__(grow.__module__, fromlist=["CreatePartitionsTopic"])
        delete = load_request_schema(20, 5)
        timeout = datetime.timedelta(seconds=120)
        with Watch(served) as watch:
            made = call(served.address, 19, 5, create(topics=(topic,), timeout=timeout,
                                                     validate_only=False))  # fmt: skip
            assert [x.error_code for x in made.topics] == [0]
            more = g.CreatePartitionsTopic(name="wide", count=3000, assignments=None)
            grown = call(served.address, 37, 3, grow(topics=(more,), timeout=timeout,
                                                     validate_only=False))  # fmt: skip
            assert [x.error_code for x in grown.results] == [0]
            assert len(list(data.glob("wide-*"))) == 3000
            gone = call(served.address, 20, 5, delete(topic_names=("wide",), timeout=timeout))
            assert [x.error_code for x in gone.responses] == [0]
        assert len(watch.waits) > 10, watch.waits  # sampled all along
        assert max(watch.waits) < 1, watch.waits
        assert not list(data.glob("wide-*")) and not list(data.glob("*-delete"))
        assert_unharmed(served, data)


def test_joining_a_group_needs_the_right_to_read(tmp_path, users):
    """A loopback client is the user owning its socket: one who may not search
    DATA (0700, root's) may not join a group either, so its metadata is never
    held (GROUP_AUTHORIZATION_FAILED); root may."""
    data = control_data(tmp_path)
    data.chmod(0o700)
    with Served(data) as served:
        frame = join_frame("joiners", bytes(1024)).hex()
        spec = {"address": served.address, "attempts": [[frame]], "threads": 1, "close_within": 1}
        out = result(as_user(users[0], "attempts", spec))
        [answer] = out["answers"][0]
        refused = decode_response(JOIN_GROUP, 3, bytes.fromhex(answer))[1]
        assert refused.error_code == ErrorCode.group_authorization_failed
        with connect(served.address) as sock:  # root, the test's own uid
            assert join_code(sock, "joiners", bytes(1024)) == ErrorCode.none
        assert_unharmed(served, data)
