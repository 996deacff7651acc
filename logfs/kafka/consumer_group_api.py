"""The consumer group protocol of KIP-848 (Kafka 4's default for consumers,
``group.protocol=consumer``): ConsumerGroupHeartbeat and ConsumerGroupDescribe,
translated to the groups room's `Coordinator.consumer` and back.

Kafka names topics by id in these messages; the groups room names them by
name. A partition the request names by an id no topic has (it was deleted)
is owned under a name no topic can have, and an assigned topic deleted
since is left out of the answer.
"""

from __future__ import annotations

import datetime

from ..core.access import GroupOp
from ..groups import DEAD, ConsumerGroup, GroupError, Heartbeat
from .access import claim_group, group_allows, require_group
from .codes import NO_THROTTLE, error_code
from .protocol import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, ErrorCode, make, schema

CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # ConsumerGroupDescribe v1's member types
NO_OPERATIONS = -(2**31)


def _names(store, topic_partitions) -> dict[str, frozenset[int]] | None:
    """Owned partitions by topic name; a topic id no topic has is kept under a name no
    topic can have ("?" and the id), so the request's checks still see it."""
    if topic_partitions is None:
        return None
    out = {}
    for tp in topic_partitions:
        name = store.topic_ids.name_of(tp.topic_id) or f"?{tp.topic_id}"
        out[name] = out.get(name, frozenset()) | frozenset(tp.partitions)
    return out


def _ids(store, partitions, cls) -> tuple:
    topics = store.topics()
    return tuple(
        make(
            cls,
            topic_id=store.topic_ids.id_of(topic),
            topic_name=topic,
            partitions=tuple(sorted(ps)),
        )
        for topic, ps in sorted(partitions.items())
        if topic in topics
    )


def heartbeat(broker, request, advertised):
    m = schema(CONSUMER_GROUP_HEARTBEAT, request.version)
    body = request.body
    rebalance = body.rebalance_timeout
    h = Heartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_ms=-1 if rebalance is None else int(rebalance.total_seconds() * 1000),
        topics=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        regex=getattr(body, "subscribed_topic_regex", None),
        assignor=body.server_assignor,
        owned=_names(broker.store, body.topic_partitions),
        client_id=request.client_id or "",
        client_host=advertised.peer,
        own_id=request.version >= 1,
    )
    claimed = claim_group(broker, advertised, body.group_id)  # a new group is its maker's
    try:
        require_group(broker, advertised, GroupOp.JOIN, body.group_id)
        answer = broker.groups.consumer.heartbeat(h)
    except GroupError as e:
        return make(
            m.ConsumerGroupHeartbeatResponse,
            throttle_time=NO_THROTTLE,
            error_code=error_code(e),
            error_message=e.message,
            member_id=None,
            member_epoch=-1,
            heartbeat_interval=datetime.timedelta(0),
            assignment=None,
        )
    finally:
        if claimed:
            broker.groups.settle_group(body.group_id)
    assignment = None
    if answer.assignment is not None:
        assignment = m.Assignment(
            topic_partitions=_ids(broker.store, answer.assignment, m.TopicPartitions)
        )
    return make(
        m.ConsumerGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=answer.member_id,
        member_epoch=answer.epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=answer.interval_ms),
        assignment=assignment,
    )


def describe(broker, request, advertised):
    m = schema(CONSUMER_GROUP_DESCRIBE, request.version)
    store, coordinator = broker.store, broker.groups
    described = []
    for group_id in request.body.group_ids:
        group = coordinator.group(group_id)
        refused = not group_allows(broker, advertised, GroupOp.READ, group_id)
        if refused or not isinstance(group, ConsumerGroup):
            what = "not found" if group is None else "is not a consumer group"
            what = "may not be described by this client" if refused else what
            described.append(
                make(
                    m.DescribedGroup,
                    error_code=ErrorCode.group_authorization_failed
                    if refused
                    else ErrorCode.group_id_not_found,
                    error_message=f"Group {group_id} {what}.",
                    group_id=group_id,
                    group_state=DEAD,
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=(),
                    authorized_operations=NO_OPERATIONS,
                )
            )
            continue
        members = tuple(
            make(
                m.Member,
                member_id=x.member_id,
                instance_id=x.instance_id,
                rack_id=x.rack_id,
                member_epoch=x.epoch,
                client_id=x.client_id,
                client_host=x.client_host,
                subscribed_topic_names=tuple(sorted(x.topics)),
                subscribed_topic_regex=x.regex,
                assignment=m.Assignment(
                    topic_partitions=_ids(store, x.progress.assigned, m.TopicPartitions)
                ),
                target_assignment=m.Assignment(
                    topic_partitions=_ids(
                        store, group.target.get(x.member_id, {}), m.TopicPartitions
                    )
                ),
                member_type=CLASSIC_MEMBER if x.classic is not None else CONSUMER_MEMBER,
            )
            for x in group.members.values()
        )
        described.append(
            make(
                m.DescribedGroup,
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=coordinator.consumer.assignor_of(group),
                members=members,
                authorized_operations=NO_OPERATIONS,
            )
        )
    return make(m.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described))


HANDLERS = {CONSUMER_GROUP_HEARTBEAT: heartbeat, CONSUMER_GROUP_DESCRIBE: describe}
