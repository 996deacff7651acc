"""ACLs: logfs keeps none. Access is each topic's and group's owner, group and
mode (access.py), so DescribeAcls answers the ACLs those imply — for each
topic and group the client may describe, an ALLOW entry per class of users
(``User:<owner>``, ``Group:<group>``, ``User:*`` for others) and per Kafka
operation that class may do — and the cluster's CREATE (making topics in the
mount's root). CreateAcls and DeleteAcls are refused with POLICY_VIOLATION
and a message naming ``chown`` and ``chmod`` as the way (docs/kafka.md, Who
may do what).
"""

from __future__ import annotations

import grp
import pwd

from ..core.access import (
    GroupOp,
    Identity,
    TopicOp,
    allowed,
    group_allowed,
    group_shown,
    holds_records,
    may_create,
    may_delete,
    topic_owner,
)
from ..core.config import INTERNAL_TOPICS
from ..core.log import Owner
from .access import DESCRIBE, allows, group_allows
from .codes import NO_THROTTLE
from .protocol import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS, ErrorCode, make, schema

ANY, MATCH, LITERAL = 1, 2, 3  # resource types' and patterns' ANY; patterns
TOPIC, GROUP, CLUSTER = 2, 3, 4  # resource types
ALLOW = 3  # permission type
CLUSTER_NAME = "kafka-cluster"
# Kafka's operation codes for what each face's operation is
TOPIC_OPERATIONS = {
    3: TopicOp.READ,
    4: TopicOp.WRITE,
    7: TopicOp.ALTER,
    8: TopicOp.DESCRIBE,
    10: TopicOp.DESCRIBE_CONFIGS,
    11: TopicOp.ALTER_CONFIGS,
}
DELETE, CREATE = 6, 5
GROUP_OPERATIONS = {3: GroupOp.JOIN, 8: GroupOp.READ, DELETE: GroupOp.DELETE}
NO_ONE = 2**32 - 3  # a uid and gid no account has: a class's stand-in
REFUSED = (
    "logfs keeps no ACLs: who may do what is each topic's and consumer group's owner, "
    "group and mode; change them with chown and chmod on the mount"
)


def _user(uid: int) -> str:
    try:
        return "User:" + pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"User:{uid}"


def _group(gid: int) -> str:
    try:
        return "Group:" + grp.getgrgid(gid).gr_name
    except KeyError:
        return f"Group:{gid}"


def _classes(owner: Owner) -> list[tuple[str, Identity]]:
    """Each class of users of a node and a stand-in for it."""
    return [
        (_user(owner.uid), Identity(owner.uid, owner.gid)),
        (_group(owner.gid), Identity(NO_ONE, owner.gid)),
        ("User:*", Identity(NO_ONE, NO_ONE)),
    ]


def _topic_acls(broker, topic: str) -> list[tuple[str, int]]:
    store, root = broker.store, broker.access
    owner = topic_owner(store, topic, root)
    full = holds_records(store, topic)
    found = []
    for principal, who in _classes(owner):
        for code, op in TOPIC_OPERATIONS.items():
            if allowed(who, op, root, owner):
                found.append((principal, code))
        if may_delete(who, root, owner, full) is None:
            found.append((principal, DELETE))
    return found


def _group_acls(broker, group_id: str) -> list[tuple[str, int]]:
    shown = group_shown(broker.groups.group_owner(group_id), broker.access)
    return [
        (principal, code)
        for principal, who in _classes(shown)
        for code, op in GROUP_OPERATIONS.items()
        if group_allowed(who, op, shown)
    ]


def _cluster_acls(broker) -> list[tuple[str, int]]:
    return [(p, CREATE) for p, who in _classes(broker.access) if may_create(who, broker.access)]


def describe_acls(broker, request, advertised):
    m = schema(DESCRIBE_ACLS, request.version)
    body = request.body
    resources = []
    if broker.access is not None:
        for kind, name, acls in _resources(broker, advertised, body):
            entries = tuple(
                make(
                    m.AclDescription,
                    principal=principal,
                    host="*",
                    operation=code,
                    permission_type=ALLOW,
                )
                for principal, code in acls
                if body.principal_filter in (None, principal)
                and body.host_filter in (None, "*")
                and body.operation in (ANY, code)
                and body.permission_type in (ANY, ALLOW)
            )
            if entries:
                resources.append(
                    make(
                        m.DescribeAclsResource,
                        resource_type=kind,
                        resource_name=name,
                        pattern_type=LITERAL,
                        acls=entries,
                    )
                )
    return make(
        m.DescribeAclsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        resources=tuple(resources),
    )


def _resources(broker, advertised, body):
    """(resource type, name, [(principal, operation)]) of what the filter
    names and the client may describe."""
    if body.pattern_type_filter not in (ANY, MATCH, LITERAL):
        return
    wanted = body.resource_name_filter

    def named(name: str) -> bool:
        return wanted is None or wanted == name

    kinds = body.resource_type_filter
    if kinds in (ANY, TOPIC):
        for topic in broker.store.topics():
            visible = topic not in INTERNAL_TOPICS and named(topic)
            if visible and allows(broker, advertised, DESCRIBE, topic):
                yield TOPIC, topic, _topic_acls(broker, topic)
    if kinds in (ANY, GROUP):
        for group in broker.groups.all_groups():
            if named(group.group_id) and group_allows(
                broker, advertised, GroupOp.READ, group.group_id
            ):
                yield GROUP, group.group_id, _group_acls(broker, group.group_id)
    if kinds in (ANY, CLUSTER) and named(CLUSTER_NAME):
        yield CLUSTER, CLUSTER_NAME, _cluster_acls(broker)


def create_acls(broker, request, advertised):
    m = schema(CREATE_ACLS, request.version)
    results = tuple(
        make(
            m.AclCreationResult,
            error_code=ErrorCode.policy_violation,
            error_message=REFUSED,
        )
        for _ in request.body.creations
    )
    return make(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=results)


def delete_acls(broker, request, advertised):
    m = schema(DELETE_ACLS, request.version)
    results = tuple(
        make(
            m.DeleteAclsFilterResult,
            error_code=ErrorCode.policy_violation,
            error_message=REFUSED,
            matching_acls=(),
        )
        for _ in request.body.filters
    )
    return make(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=results)


HANDLERS = {DESCRIBE_ACLS: describe_acls, CREATE_ACLS: create_acls, DELETE_ACLS: delete_acls}
