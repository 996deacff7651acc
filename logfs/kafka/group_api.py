"""The group coordinator's requests: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups and OffsetDelete, over `groups.Coordinator`.

This node coordinates every group. Transactions have no coordinator here:
FindCoordinator for a transactional id answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import struct

from ..core.errors import LogfsError
from .codes import NO_THROTTLE, NODE_ID, error_code
from .group_log import Committed
from .groups import MAX_METADATA, GroupError
from .protocol import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    ErrorCode,
    make,
    schema,
)

GROUP_KEY = 0
CLASSIC = "classic"


def _ms(value) -> int:
    return int(value.total_seconds() * 1000)


def find_coordinator(broker, request, advertised):
    m = schema(FIND_COORDINATOR, request.version)
    body = request.body
    host, port = advertised
    key_type = getattr(body, "key_type", GROUP_KEY)

    def entry(key: str) -> dict:
        if key_type != GROUP_KEY:
            return dict(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=ErrorCode.coordinator_not_available,
                error_message="logfs has no transaction coordinator",
            )
        return dict(
            key=key,
            node_id=NODE_ID,
            host=host,
            port=port,
            error_code=ErrorCode.none,
            error_message=None,
        )

    if request.version >= 4:
        coordinators = tuple(make(m.Coordinator, **entry(k)) for k in body.coordinator_keys)
        return make(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)
    return make(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **entry(body.key))


async def join_group(broker, request, advertised):
    m = schema(JOIN_GROUP, request.version)
    body, version = request.body, request.version
    session = _ms(body.session_timeout)
    rebalance = _ms(getattr(body, "rebalance_timeout", body.session_timeout))
    rebalance = session if rebalance < 0 else rebalance
    protocols = [(p.name, p.metadata) for p in body.protocols]
    code, round_, member_id = ErrorCode.none, None, body.member_id
    try:
        round_, member_id = await broker.groups.join(
            body.group_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            body.protocol_type,
            protocols,
            session,
            rebalance,
            request.client_id or "",
            "",
            version >= 4,
        )
        if round_ is None:
            code = ErrorCode.member_id_required
    except GroupError as e:
        code = e.code
    members = ()
    if round_ is not None and round_.leader == member_id:
        members = tuple(
            make(m.JoinGroupResponseMember, member_id=i, group_instance_id=inst, metadata=meta)
            for i, inst, meta in round_.members
        )
    protocol = round_.protocol if round_ is not None else None
    return make(
        m.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        generation_id=round_.generation if round_ is not None else -1,
        protocol_type=body.protocol_type if round_ is not None else None,
        protocol_name=protocol if version >= 7 else protocol or "",
        leader=round_.leader if round_ is not None else "",
        skip_assignment=False,
        member_id=member_id,
        members=members,
    )


async def sync_group(broker, request, advertised):
    m = schema(SYNC_GROUP, request.version)
    body = request.body
    assignments = {a.member_id: a.assignment for a in body.assignments}
    code, assignment, group = ErrorCode.none, b"", None
    try:
        group, assignment = await broker.groups.sync(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            assignments,
        )
        asked_type = getattr(body, "protocol_type", None)
        asked_name = getattr(body, "protocol_name", None)
        if (asked_type is not None and asked_type != group.protocol_type) or (
            asked_name is not None and asked_name != group.protocol
        ):
            raise GroupError(ErrorCode.inconsistent_group_protocol)
    except GroupError as e:
        code, assignment = e.code, b""
    return make(
        m.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        protocol_type=group.protocol_type if group is not None and not code else None,
        protocol_name=group.protocol if group is not None and not code else None,
        assignment=assignment,
    )


def heartbeat(broker, request, advertised):
    m = schema(HEARTBEAT, request.version)
    body = request.body
    code = ErrorCode.none
    try:
        broker.groups.heartbeat(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
        )
    except GroupError as e:
        code = e.code
    return make(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code)


def leave_group(broker, request, advertised):
    m = schema(LEAVE_GROUP, request.version)
    body = request.body
    if request.version < 3:
        leaving = [(body.member_id, None)]
    else:
        leaving = [(x.member_id, x.group_instance_id) for x in body.members]
    results = []
    for member_id, instance_id in leaving:
        code = ErrorCode.none
        try:
            broker.groups.leave(body.group_id, member_id, instance_id)
        except GroupError as e:
            code = e.code
        results.append(
            make(
                m.MemberResponse,
                member_id=member_id,
                group_instance_id=instance_id,
                error_code=code,
            )
            if request.version >= 3
            else code
        )
    if request.version < 3:
        return make(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=results[0])
    return make(
        m.LeaveGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        members=tuple(results),
    )


def _partition_known(broker, topic: str, partition: int) -> bool:
    return 0 <= partition < broker.store.topics().get(topic, 0)


def offset_commit(broker, request, advertised):
    m = schema(OFFSET_COMMIT, request.version)
    body = request.body
    codes: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], Committed] = {}
    now = broker.groups.clock()
    group = refused = None
    try:
        group = broker.groups.check_commit(
            body.group_id,
            body.generation_id_or_member_epoch,
            body.member_id,
            getattr(body, "group_instance_id", None),
        )
    except GroupError as e:
        refused = e.code
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if refused is not None:
                codes[tp] = refused
            elif not _partition_known(broker, *tp):
                codes[tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode()) > MAX_METADATA:
                codes[tp] = ErrorCode.offset_metadata_too_large
            else:
                epoch = getattr(p, "committed_leader_epoch", -1)
                wanted[tp] = Committed(p.committed_offset, epoch, metadata, now)
    if group is not None:
        try:
            broker.groups.commit(group, wanted)
            codes.update(dict.fromkeys(wanted, ErrorCode.none))
        except (LogfsError, OSError) as e:
            codes.update(dict.fromkeys(wanted, error_code(e)))
    topics = tuple(
        make(
            m.OffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    m.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=codes[(topic.name, p.partition_index)],
                )
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
    return make(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def _fetched_topics(broker, m, names, group_id, asked, version):
    """One group's OffsetFetch topics: ``asked`` [(topic, [partitions])] or, for
    None, every partition the group has committed."""
    committed = broker.groups.committed(group_id)
    if asked is None:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(committed):
            by_topic.setdefault(topic, []).append(p)
        asked = list(by_topic.items())
    topic_cls, partition_cls = names
    out = []
    for topic, partitions in asked:
        rows = []
        for p in partitions:
            c = committed.get((topic, p))
            rows.append(
                make(
                    partition_cls,
                    partition_index=p,
                    committed_offset=c.offset if c else -1,
                    committed_leader_epoch=c.leader_epoch if c else -1,
                    metadata=c.metadata if c else "",
                    error_code=ErrorCode.none,
                )
            )
        out.append(make(topic_cls, name=topic, partitions=tuple(rows)))
    return tuple(out)


def offset_fetch(broker, request, advertised):
    m = schema(OFFSET_FETCH, request.version)
    body = request.body
    if request.version >= 8:
        names = (m.OffsetFetchResponseTopics, m.OffsetFetchResponsePartitions)
        groups = []
        for g in body.groups:
            asked = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
            groups.append(
                make(
                    m.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    topics=_fetched_topics(broker, m, names, g.group_id, asked, request.version),
                    error_code=ErrorCode.none,
                )
            )
        return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    names = (m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition)
    asked = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    return make(
        m.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=_fetched_topics(broker, m, names, body.group_id, asked, request.version),
        error_code=ErrorCode.none,
    )


def list_groups(broker, request, advertised):
    m = schema(LIST_GROUPS, request.version)
    body = request.body
    coordinator = broker.groups
    coordinator.load()
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    listed = []
    if not types or CLASSIC in types:
        for group in coordinator.groups.values():
            if states and group.state.lower() not in states:
                continue
            listed.append(
                make(
                    m.ListedGroup,
                    group_id=group.group_id,
                    protocol_type=group.protocol_type,
                    group_state=group.state,
                    group_type=CLASSIC,
                )
            )
    return make(
        m.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(listed),
    )


def describe_groups(broker, request, advertised):
    m = schema(DESCRIBE_GROUPS, request.version)
    coordinator = broker.groups
    coordinator.load()
    described = []
    for group_id in request.body.groups:
        group = coordinator.groups.get(group_id)
        members = ()
        if group is not None:
            members = tuple(
                make(
                    m.DescribedGroupMember,
                    member_id=x.member_id,
                    group_instance_id=x.instance_id,
                    client_id=x.client_id,
                    client_host=x.client_host,
                    member_metadata=x.metadata(group.protocol),
                    member_assignment=x.assignment,
                )
                for x in group.members.values()
            )
        described.append(
            make(
                m.DescribedGroup,
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=group.state if group is not None else "Dead",
                protocol_type=group.protocol_type if group is not None else "",
                protocol_data=(group.protocol or "") if group is not None else "",
                members=members,
                authorized_operations=-(2**31),
            )
        )
    return make(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(described))


def delete_groups(broker, request, advertised):
    m = schema(DELETE_GROUPS, request.version)
    results = []
    for group_id in request.body.groups_names:
        code = ErrorCode.none
        try:
            broker.groups.delete_group(group_id)
        except GroupError as e:
            code = e.code
        except (LogfsError, OSError) as e:
            code = error_code(e)
        results.append(make(m.DeletableGroupResult, group_id=group_id, error_code=code))
    return make(m.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def _subscribed_topics(group) -> set[str]:
    """Topics the members of a consumer group subscribe to (Kafka's
    ConsumerProtocolSubscription: int16 version, int32 count, int16-length names)."""
    topics: set[str] = set()
    if group.protocol_type != "consumer":
        return topics
    for member in group.members.values():
        data = member.metadata(group.protocol)
        try:
            (count,) = struct.unpack_from(">i", data, 2)
            at = 6
            for _ in range(count):
                (size,) = struct.unpack_from(">h", data, at)
                topics.add(data[at + 2 : at + 2 + size].decode())
                at += 2 + size
        except (struct.error, UnicodeDecodeError):
            continue
    return topics


def offset_delete(broker, request, advertised):
    m = schema(OFFSET_DELETE, request.version)
    body = request.body
    coordinator = broker.groups
    coordinator.load()
    group = coordinator.groups.get(body.group_id)
    if group is None:
        return make(
            m.OffsetDeleteResponse,
            error_code=ErrorCode.group_id_not_found,
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    subscribed = _subscribed_topics(group)
    codes: dict[tuple[str, int], ErrorCode] = {}
    for topic in body.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name in subscribed:
                codes[tp] = ErrorCode.group_subscribed_to_topic
            elif not _partition_known(broker, *tp):
                codes[tp] = ErrorCode.unknown_topic_or_partition
            else:
                codes[tp] = ErrorCode.none
    gone = [tp for tp, code in codes.items() if code == ErrorCode.none]
    try:
        coordinator.delete_offsets(group, gone)
    except (LogfsError, OSError) as e:
        codes.update(dict.fromkeys(gone, error_code(e)))
    topics = tuple(
        make(
            m.OffsetDeleteResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    m.OffsetDeleteResponsePartition,
                    partition_index=p.partition_index,
                    error_code=codes[(topic.name, p.partition_index)],
                )
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
    return make(
        m.OffsetDeleteResponse,
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=topics,
    )


HANDLERS = {
    FIND_COORDINATOR: find_coordinator,
    JOIN_GROUP: join_group,
    SYNC_GROUP: sync_group,
    HEARTBEAT: heartbeat,
    LEAVE_GROUP: leave_group,
    OFFSET_COMMIT: offset_commit,
    OFFSET_FETCH: offset_fetch,
    LIST_GROUPS: list_groups,
    DESCRIBE_GROUPS: describe_groups,
    DELETE_GROUPS: delete_groups,
    OFFSET_DELETE: offset_delete,
}
