"""Kafka 4's new requests with nonsense in them: every one answered with error codes
on the same connection, never a traceback in the daemon's log; a regex built to
backtrack costs nothing; an API the listener does not advertise closes only that
connection."""

from __future__ import annotations

import datetime
import sys
import time
import uuid

import pytest
from kafka_helpers import Served, call, closed, connect, encode_request
from kio.index import load_request_schema

HEARTBEAT, DESCRIBE_GROUP = 68, 69
DELETE_RECORDS, EPOCHS, LOG_DIRS, CONFIGS, ALTER, PRODUCERS = 21, 23, 35, 32, 33, 61


def schema(api: int, version: int):
    t = load_request_schema(api, version)
    return t, sys.modules[t.__module__]


def heartbeat(**fields):
    t, _ = schema(HEARTBEAT, 1)
    values = dict(
        group_id="g",
        member_id="m" * 22,
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )
    values.update(fields)
    return t(**values)


@pytest.fixture
def served(tmp_path):
    with Served(tmp_path / "data", "partitions=2") as s:
        yield s


def test_nonsense_is_answered_with_error_codes_on_the_same_connection(served):
    t, m = schema(HEARTBEAT, 1)
    stranger = m.TopicPartitions(topic_id=uuid.uuid4(), partitions=(0, -5))
    cases = [
        (HEARTBEAT, 1, heartbeat(member_epoch=-9), "invalid_request"),
        (HEARTBEAT, 1, heartbeat(member_id=""), "invalid_request"),
        (
            HEARTBEAT,
            1,
            heartbeat(rebalance_timeout=datetime.timedelta(milliseconds=-1)),
            "invalid_request",
        ),
        (HEARTBEAT, 1, heartbeat(server_assignor="sticky"), "unsupported_assignor"),
        (HEARTBEAT, 1, heartbeat(subscribed_topic_regex="(a"), "invalid_regular_expression"),
        (HEARTBEAT, 1, heartbeat(member_epoch=7), "group_id_not_found"),
        (HEARTBEAT, 1, heartbeat(topic_partitions=(stranger,)), "invalid_request"),
        (HEARTBEAT, 1, heartbeat(group_id="  "), "invalid_request"),
    ]
    with connect(served.address) as sock:
        for api, version, body, code in cases:
            answer = call(served.address, api, version, body, sock)
            assert answer.error_code.name == code, (body, answer)
        # a backtracking pattern over a long topic name: linear time
        long_name = "a" * 240
        t2, m2 = schema(3, 12)
        call(
            served.address,
            3,
            12,
            t2(
                topics=(m2.MetadataRequestTopic(topic_id=None, name=long_name),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
            sock,
        )
        started = time.monotonic()
        answer = call(
            served.address,
            HEARTBEAT,
            1,
            heartbeat(subscribed_topic_names=None, subscribed_topic_regex="(a+)+b"),
            sock,
        )
        assert answer.error_code.name == "none" and time.monotonic() - started < 2
        t, m = schema(DESCRIBE_GROUP, 1)
        [group] = call(
            served.address,
            DESCRIBE_GROUP,
            1,
            t(group_ids=("nosuch",), include_authorized_operations=True),
            sock,
        ).groups
        assert group.error_code.name == "group_id_not_found"
        t, m = schema(DELETE_RECORDS, 2)
        body = t(
            topics=(
                m.DeleteRecordsTopic(
                    name="nosuch",
                    partitions=(m.DeleteRecordsPartition(partition_index=0, offset=5),),
                ),
                m.DeleteRecordsTopic(
                    name=long_name,
                    partitions=(
                        m.DeleteRecordsPartition(partition_index=-1, offset=0),
                        m.DeleteRecordsPartition(partition_index=0, offset=-7),
                        m.DeleteRecordsPartition(partition_index=0, offset=2**62),
                    ),
                ),
            ),
            timeout=datetime.timedelta(seconds=1),
        )
        answer = call(served.address, DELETE_RECORDS, 2, body, sock)
        codes = [p.error_code.name for topic in answer.topics for p in topic.partitions]
        assert codes == [
            "unknown_topic_or_partition",
            "unknown_topic_or_partition",
            "offset_out_of_range",
            "offset_out_of_range",
        ]
        t, m = schema(EPOCHS, 4)
        part = m.OffsetForLeaderPartition(partition=9, current_leader_epoch=-1, leader_epoch=0)
        body = t(
            replica_id=-1, topics=(m.OffsetForLeaderTopic(topic="nosuch", partitions=(part,)),)
        )
        [p] = call(served.address, EPOCHS, 4, body, sock).topics[0].partitions
        assert p.error_code.name == "unknown_topic_or_partition"
        t, m = schema(LOG_DIRS, 4)
        body = t(topics=(m.DescribableLogDirTopic(topic="nosuch", partitions=(0, -1, 2**31 - 1)),))
        answer = call(served.address, LOG_DIRS, 4, body, sock)
        assert answer.error_code.name == "none" and answer.results[0].topics == ()
        t, m = schema(CONFIGS, 4)
        resources = tuple(
            m.DescribeConfigsResource(
                resource_type=kind, resource_name=name, configuration_keys=None
            )
            for kind, name in ((4, "x"), (4, "99"), (8, "0"), (0, ""), (2, "nosuch"))
        )
        answer = call(
            served.address,
            CONFIGS,
            4,
            t(resources=resources, include_synonyms=True, include_documentation=True),
            sock,
        )
        assert [r.error_code.name for r in answer.results] == [
            "invalid_request",
            "invalid_request",
            "invalid_request",
            "invalid_request",
            "unknown_topic_or_partition",
        ]
        t, m = schema(ALTER, 2)
        body = t(
            resources=(
                m.AlterConfigsResource(
                    resource_type=4,
                    resource_name="0",
                    configs=(m.AlterableConfig(name="log.retention.ms", value="-5"),),
                ),
                m.AlterConfigsResource(
                    resource_type=4,
                    resource_name="0",
                    configs=(m.AlterableConfig(name="no.such.setting", value="1"),),
                ),
            ),
            validate_only=False,
        )
        answer = call(served.address, ALTER, 2, body, sock)
        assert [r.error_code.name for r in answer.responses] == ["invalid_config"] * 2
        t, m = schema(PRODUCERS, 0)
        body = t(topics=(m.TopicRequest(name="nosuch", partition_indexes=(0, -1)),))
        parts = call(served.address, PRODUCERS, 0, body, sock).topics[0].partitions
        assert [p.error_code.name for p in parts] == ["unknown_topic_or_partition"] * 2
        # still the same connection, and an API not advertised closes it
        t, m = schema(27, 1)  # WriteTxnMarkers: between brokers only
        sock.sendall(encode_request(27, 1, t(markers=())))
        assert closed(sock)
    assert "Traceback" not in served.output() and "internal error" not in served.output()
