"""The group coordinator's requests: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, ListGroups, DescribeGroups and DeleteGroups, translated
to the groups room's `Coordinator` (`Broker.groups`) and its answers back to
Kafka's messages; the offset requests are in group_offsets.py.

This node coordinates every group and every transactional id (FindCoordinator
with key type 1; the transaction coordinator's requests are transactions.py's).
"""

from __future__ import annotations

from ..core.access import GroupOp
from ..core.errors import LogfsError
from ..groups import DEAD, ConsumerGroup, GroupError
from . import group_offsets
from .access import claim_group, group_allows, require_group
from .codes import NO_THROTTLE, NODE_ID, error_code
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

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _ms(value) -> int:
    return int(value.total_seconds() * 1000)


def find_coordinator(broker, request, advertised):
    m = schema(FIND_COORDINATOR, request.version)
    body = request.body
    host, port = advertised.host, advertised.port
    key_type = getattr(body, "key_type", GROUP_KEY)

    def entry(key: str) -> dict:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):  # KIP-848's share groups: none here
            return dict(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=ErrorCode.invalid_request,
                error_message=f"coordinator key type {key_type} is not served",
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
    claimed = claim_group(broker, advertised, body.group_id)  # a new group is its maker's
    try:
        require_group(broker, advertised, GroupOp.JOIN, body.group_id)
        round_, member_id = await broker.groups.join(
            body.group_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            body.protocol_type,
            protocols,
            session,
            rebalance,
            request.client_id or "",
            advertised.peer,
            version >= 4,
            connection=advertised.connection,
        )
        if round_ is None:
            code = ErrorCode.member_id_required
    except GroupError as e:
        code = error_code(e)
    finally:
        if claimed:
            broker.groups.settle_group(body.group_id)
    members, leader, skip = (), round_.leader if round_ is not None else "", False
    if round_ is not None and round_.skip_assignment and version < 9:
        # A static leader back in a stable group, of a client that cannot be told to
        # skip the assignment: it is named no leader (Kafka names the id it replaced).
        leader = round_.replaced or ""
    elif round_ is not None and round_.leader == member_id:
        skip = round_.skip_assignment
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
        leader=leader,
        skip_assignment=skip,
        member_id=member_id,
        members=members,
    )


async def sync_group(broker, request, advertised):
    m = schema(SYNC_GROUP, request.version)
    body = request.body
    assignments = {a.member_id: a.assignment for a in body.assignments}
    code, assignment, kind, protocol = ErrorCode.none, b"", None, None
    try:
        require_group(broker, advertised, GroupOp.JOIN, body.group_id)
        kind, protocol, assignment = await broker.groups.sync(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            assignments,
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
        )
    except GroupError as e:
        code, assignment = error_code(e), b""
    return make(
        m.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        protocol_type=kind,
        protocol_name=protocol,
        assignment=assignment,
    )


def heartbeat(broker, request, advertised):
    m = schema(HEARTBEAT, request.version)
    body = request.body
    code = ErrorCode.none
    try:
        require_group(broker, advertised, GroupOp.JOIN, body.group_id)
        broker.groups.heartbeat(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
        )
    except GroupError as e:
        code = error_code(e)
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
            require_group(broker, advertised, GroupOp.JOIN, body.group_id)
            broker.groups.leave(body.group_id, member_id, instance_id)
        except GroupError as e:
            code = error_code(e)
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


def list_groups(broker, request, advertised):
    """Every group, of both protocols, with Kafka's state and type filters (any case)."""
    m = schema(LIST_GROUPS, request.version)
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    listed = []
    for group in broker.groups.all_groups():
        if (states and group.state.lower() not in states) or (types and group.kind not in types):
            continue
        if not group_allows(broker, advertised, GroupOp.READ, group.group_id):
            continue  # Kafka lists the groups the client may describe
        listed.append(
            make(
                m.ListedGroup,
                group_id=group.group_id,
                protocol_type=group.protocol_type,
                group_state=group.state,
                group_type=group.kind,
            )
        )
    return make(
        m.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(listed),
    )


def describe_groups(broker, request, advertised):
    """Classic groups; a consumer group is none of DescribeGroups' (ConsumerGroupDescribe
    describes it): Dead, or from v6 on GROUP_ID_NOT_FOUND, as Kafka 4 answers (KIP-1043)."""
    m = schema(DESCRIBE_GROUPS, request.version)
    described = []
    for group_id in request.body.groups:
        group = broker.groups.group(group_id)
        code, message = ErrorCode.none, None
        if not group_allows(broker, advertised, GroupOp.READ, group_id):
            group, code = None, ErrorCode.group_authorization_failed
        if isinstance(group, ConsumerGroup):
            group = None
            if request.version >= 6:
                code = ErrorCode.group_id_not_found
                message = f"Group {group_id} is not a classic group."
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
                error_code=code,
                error_message=message,
                group_id=group_id,
                group_state=group.state if group is not None else DEAD,
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
            require_group(broker, advertised, GroupOp.DELETE, group_id)
            broker.groups.delete_group(group_id)
        except (LogfsError, OSError) as e:  # a GroupError carries its own code
            code = error_code(e)
        results.append(make(m.DeletableGroupResult, group_id=group_id, error_code=code))
    return make(m.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


HANDLERS = {
    FIND_COORDINATOR: find_coordinator,
    JOIN_GROUP: join_group,
    SYNC_GROUP: sync_group,
    HEARTBEAT: heartbeat,
    LEAVE_GROUP: leave_group,
    OFFSET_COMMIT: group_offsets.offset_commit,
    OFFSET_FETCH: group_offsets.offset_fetch,
    LIST_GROUPS: list_groups,
    DESCRIBE_GROUPS: describe_groups,
    DELETE_GROUPS: delete_groups,
    OFFSET_DELETE: group_offsets.offset_delete,
}
