"""The group coordinator against clients that misbehave, in Kafka's protocol
(kio's messages): a member that never heartbeats, ten thousand groups,
commits to partitions that do not exist, stale generations and strangers."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import Served, call, connect
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT = 8, 9, 11, 12
SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 14, 15, 16
SESSION = datetime.timedelta(milliseconds=6000)


@pytest.fixture
def served(tmp_path):
    with Served(tmp_path / "data") as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic("known", 2, 1)])["known"].result(30)
        yield s


def join(address, group: str, member_id: str = "", sock=None, version: int = 5):
    t = load_request_schema(JOIN_GROUP, version)
    m = __import__(t.__module__, fromlist=["JoinGroupRequestProtocol"])
    body = t(
        group_id=group, session_timeout=SESSION, rebalance_timeout=SESSION,
        member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b"\0\0\0\0\0\0"),),
    )  # fmt: skip
    return call(address, JOIN_GROUP, version, body, sock)


def commit(address, group: str, offsets, generation=-1, member_id="", sock=None):
    t = load_request_schema(OFFSET_COMMIT, 8)
    m = __import__(t.__module__, fromlist=["OffsetCommitRequestTopic"])
    topics = {}
    for topic, partition, offset in offsets:
        topics.setdefault(topic, []).append(
            m.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset,
                committed_leader_epoch=-1, committed_metadata="",
            )
        )  # fmt: skip
    body = t(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=None,
        topics=tuple(m.OffsetCommitRequestTopic(name=k, partitions=tuple(v))
                     for k, v in topics.items()),
    )  # fmt: skip
    answer = call(address, OFFSET_COMMIT, 8, body, sock)
    return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def describe(address, group: str):
    t = load_request_schema(DESCRIBE_GROUPS, 5)
    body = t(groups=(group,), include_authorized_operations=False)
    return call(address, DESCRIBE_GROUPS, 5, body).groups[0]


def list_groups(address, sock=None) -> list[str]:
    t = load_request_schema(LIST_GROUPS, 4)
    return [g.group_id for g in call(address, LIST_GROUPS, 4, t(states_filter=()), sock).groups]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return result


def test_a_member_that_never_heartbeats_is_expired(served):
    address = served.address
    first = join(address, "quiet")
    assert first.error_code == ErrorCode.member_id_required  # JoinGroup v4+: rejoin with the id
    joined = join(address, "quiet", first.member_id)
    assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
    t = load_request_schema(SYNC_GROUP, 3)
    m = __import__(t.__module__, fromlist=["SyncGroupRequestAssignment"])
    body = t(
        group_id="quiet", generation_id=joined.generation_id, member_id=first.member_id,
        group_instance_id=None,
        assignments=(m.SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"a"),),
    )  # fmt: skip
    synced = call(address, SYNC_GROUP, 3, body)
    assert synced.error_code == ErrorCode.none and synced.assignment == b"a"
    group = describe(address, "quiet")
    assert group.group_state == "Stable" and len(group.members) == 1
    started = time.monotonic()
    # No heartbeat: the member is gone once its 6 s session has run out, not before.
    wait_for(lambda: describe(address, "quiet").group_state == "Dead", 30, "the expiry")
    assert time.monotonic() - started > 4
    t = load_request_schema(HEARTBEAT, 3)
    late = call(
        address,
        HEARTBEAT,
        3,
        t(
            group_id="quiet",
            generation_id=joined.generation_id,
            member_id=first.member_id,
            group_instance_id=None,
        ),
    )
    assert late.error_code == ErrorCode.unknown_member_id


def test_commits_to_unknown_partitions_and_by_strangers(served):
    address = served.address
    codes = commit(address, "g", [("known", 0, 5), ("known", 7, 1), ("nowhere", 0, 1)])
    assert codes == {
        ("known", 0): ErrorCode.none,
        ("known", 7): ErrorCode.unknown_topic_or_partition,
        ("nowhere", 0): ErrorCode.unknown_topic_or_partition,
    }
    # A member id the group never gave out, and a stale generation.
    assert set(commit(address, "g", [("known", 1, 1)], 3, "stranger").values()) == {
        ErrorCode.unknown_member_id
    }
    first = join(address, "live")
    joined = join(address, "live", first.member_id)
    stale = commit(address, "live", [("known", 0, 1)], joined.generation_id + 5, first.member_id)
    assert set(stale.values()) == {ErrorCode.illegal_generation}
    # A group with members takes no commit from outside it.
    outside = commit(address, "live", [("known", 0, 1)])
    assert set(outside.values()) == {ErrorCode.unknown_member_id}
    t = load_request_schema(OFFSET_FETCH, 7)
    m = __import__(t.__module__, fromlist=["OffsetFetchRequestTopic"])
    body = t(group_id="g", topics=(m.OffsetFetchRequestTopic(name="known",
             partition_indexes=(0, 1)),), require_stable=False)  # fmt: skip
    fetched = call(address, OFFSET_FETCH, 7, body)
    assert [(p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions] == [
        (0, 5),
        (1, -1),
    ]


def test_ten_thousand_groups_cost_bounded_memory(served):
    address = served.address
    with connect(address) as sock:
        commit(address, "warm", [("known", 0, 1)], sock=sock)
        before = rss_kib(served.proc.pid)
        for n in range(10_000):
            assert commit(address, f"g{n}", [("known", n % 2, n)], sock=sock) == {
                ("known", n % 2): ErrorCode.none
            }
        grown = rss_kib(served.proc.pid) - before
        # Ten thousand member ids asked for and never used (JoinGroup v5 without an id).
        for n in range(10_000):
            assert join(address, f"j{n}", sock=sock).error_code == ErrorCode.member_id_required
        names = list_groups(address, sock)
    assert len([g for g in names if g.startswith("g")]) == 10_000
    print(f"10,000 groups grew the daemon by {grown} KiB")
    assert grown < 64 * 1024, f"10,000 groups grew the daemon by {grown} KiB"
    # The unused ids expire with their session; their groups are forgotten.
    wait_for(
        lambda: not any(g.startswith("j") for g in list_groups(address)), 60, "the pending ids"
    )


def test_members_go_on_after_a_restart_if_they_heartbeat(tmp_path):
    data = tmp_path / "data"
    with Served(data) as served:
        first = join(served.address, "kept")
        joined = join(served.address, "kept", first.member_id)
        t = load_request_schema(SYNC_GROUP, 3)
        m = __import__(t.__module__, fromlist=["SyncGroupRequestAssignment"])
        body = t(
            group_id="kept", generation_id=joined.generation_id, member_id=first.member_id,
            group_instance_id=None,
            assignments=(m.SyncGroupRequestAssignment(member_id=first.member_id,
                                                      assignment=b"mine"),),
        )  # fmt: skip
        assert call(served.address, SYNC_GROUP, 3, body).error_code == ErrorCode.none
    with Served(data) as served:
        t = load_request_schema(HEARTBEAT, 3)
        beat = t(group_id="kept", generation_id=joined.generation_id,
                 member_id=first.member_id, group_instance_id=None)  # fmt: skip
        assert call(served.address, HEARTBEAT, 3, beat).error_code == ErrorCode.none
        group = describe(served.address, "kept")
        assert group.group_state == "Stable"
        assert [(x.member_id, x.member_assignment) for x in group.members] == [
            (first.member_id, b"mine")
        ]
        # Silent from now on: expired like any member.
        wait_for(lambda: describe(served.address, "kept").group_state != "Stable", 30, "expiry")
        assert call(served.address, HEARTBEAT, 3, beat).error_code == ErrorCode.unknown_member_id


def test_committing_needs_the_right_to_read_the_topic(tmp_path):
    """DATA owned by root, mode 0711: the local user nobody may search it but not
    read its topics, so it may neither commit nor fetch offsets; root may. A group
    is its maker's: nobody may not commit for root's group at all. (Without search
    on DATA nobody may touch any group: every path of the mount needs it.)"""
    import pwd

    import confluent_kafka as ck

    from logfs.core.log import Store

    pwd.getpwnam("nobody")  # the principal below is this local user
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("secret")
    data.chmod(0o711)
    users = tmp_path / "users"
    users.write_text("root:rootpw\nnobody:nobodypw\n")
    with Served(data, f"kafka.sasl.users={users}") as served:

        def consumer(user: str, password: str, group: str = "g") -> ck.Consumer:
            return ck.Consumer({
                "bootstrap.servers": served.bootstrap, "group.id": group,
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                "sasl.username": user, "sasl.password": password,
            })  # fmt: skip

        as_root = consumer("root", "rootpw")
        done = as_root.commit(offsets=[ck.TopicPartition("secret", 0, 0)], asynchronous=False)
        assert done[0].error is None
        # nobody's own new group: the topic is what it may not read
        own = consumer("nobody", "nobodypw", group="h")
        with pytest.raises(ck.KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
            own.commit(offsets=[ck.TopicPartition("secret", 0, 5)], asynchronous=False)
        # root's group (root made it: 0644): nobody may not commit for it at all
        as_nobody = consumer("nobody", "nobodypw")
        with pytest.raises(ck.KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
            as_nobody.commit(offsets=[ck.TopicPartition("secret", 0, 5)], asynchronous=False)
        (fetched,) = as_nobody.committed([ck.TopicPartition("secret", 0)], 30)
        assert fetched.error is not None and fetched.error.code() == (
            ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        )
        assert as_root.committed([ck.TopicPartition("secret", 0)], 30)[0].offset == 0
        as_nobody.close()
        as_root.close()
