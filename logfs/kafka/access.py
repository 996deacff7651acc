"""Who may do what on the listener: the mount's owners and modes, for the
client's real identity (core/access.py decides; docs/kafka.md, Who may do what).

Who a client is (`identity`): with SASL, the local user its principal names
(a principal that names none is nobody); without, a loopback client is the
user owning its socket (peers.py, looked up at accept) and any other client
nobody. Each Kafka operation is allowed exactly when the mount operation it
equals is (`TopicOp`, `GroupOp`); a refusal raises `AccessDeniedError`
(TOPIC_AUTHORIZATION_FAILED) or a `GroupError` of GROUP_AUTHORIZATION_FAILED.
A broker built without an authority (``access`` None: the embedding API's,
tests') lets every client do everything.
"""

from __future__ import annotations

from typing import NamedTuple

from ..core.access import (
    KAFKA_UMASK,
    NOBODY,
    SEARCH,
    GroupOp,
    Identity,
    TopicOp,
    allowed,
    group_allowed,
    group_shown,
    holds_records,
    may_create,
    may_delete,
    new_group_owner,
    new_owner,
    of_uid,
    of_user,
    permits,
    topic_owner,
)
from ..core.access import (
    READ as READ_BIT,
)
from ..core.config import INTERNAL_TOPICS
from ..core.errors import AccessDeniedError, InvalidTopicError, KafkaCode
from ..core.log import Owner
from ..groups import GroupError

DESCRIBE, READ, WRITE = TopicOp.DESCRIBE, TopicOp.READ, TopicOp.WRITE
DESCRIBE_CONFIGS, ALTER_CONFIGS = TopicOp.DESCRIBE_CONFIGS, TopicOp.ALTER_CONFIGS
ALTER, OWNER = TopicOp.ALTER, TopicOp.OWNER


class Client(NamedTuple):
    """Who sent a request: the address it reached, its principal (None when
    the listener does not authenticate), where it came from as Kafka shows a
    client's host (``/127.0.0.1``), the uid owning a loopback client's socket
    (None: not a loopback client, or not found), the local user it is
    (`identity_of`, found once per connection; None: found per request), and the
    listener's number for its connection (what group members joined over,
    `Broker.disconnected`)."""

    host: str
    port: int
    user: str | None = None
    peer: str = ""
    uid: int | None = None
    who: Identity | None = None
    connection: int | None = None


def identity_of(sasl: bool, user: str | None, uid: int | None) -> Identity:
    """The local user a client is: with ``sasl``, the one its principal
    ``user`` names; else the owner ``uid`` of its loopback socket; else nobody."""
    if sasl:
        return of_user(user)
    return NOBODY if uid is None else of_uid(uid)


def identity(broker, client: Client) -> Identity:
    """The local user ``client`` is."""
    if client.who is not None:
        return client.who
    return identity_of(broker.users is not None, client.user, client.uid)


def allows(broker, client: Client, op: TopicOp, topic: str) -> bool:
    """Whether ``client`` may do ``op`` to ``topic``. Of a topic that does not
    exist, whether it may look in the mount's root (the caller then answers
    that it does not exist, as ``ls`` would)."""
    root = broker.access
    if root is None:
        return True
    who = identity(broker, client)
    if topic not in INTERNAL_TOPICS and topic not in broker.store.topics():
        return permits(who, root, SEARCH)
    return allowed(who, op, root, topic_owner(broker.store, topic, root))


def require(broker, client: Client, op: TopicOp, topic: str) -> None:
    """Raises `AccessDeniedError` unless ``client`` may do ``op`` to ``topic``."""
    if not allows(broker, client, op, topic):
        raise AccessDeniedError(f"{_who(broker, client)} may not {op.value} (topic {topic!r})")


def require_create(broker, client: Client, topic: str) -> None:
    """CreateTopics and auto-creation: ``mkdir MNT/<topic>``."""
    root = broker.access
    if root is not None and not may_create(identity(broker, client), root):
        raise AccessDeniedError(f"{_who(broker, client)} may not create topic {topic!r}")


def new_topic_owner(broker, client: Client) -> Owner | None:
    """The owner of a topic ``client`` creates: the client, mode 0755 (a
    directory made with Kafka's umask); None without an authority (the topic
    follows DATA)."""
    if broker.access is None:
        return None
    return new_owner(identity(broker, client), 0o777 & ~KAFKA_UMASK)


def require_delete(broker, client: Client, topic: str) -> None:
    """DeleteTopics: ``rmdir MNT/<topic>``, POSIX's rules."""
    if topic in INTERNAL_TOPICS:  # the coordinators' own logs stay
        raise InvalidTopicError(f"{topic} is internal")
    root = broker.access
    if root is None or topic not in broker.store.topics():
        return
    store = broker.store
    owner = topic_owner(store, topic, root)
    why = may_delete(identity(broker, client), root, owner, holds_records(store, topic))
    if why is not None:
        raise AccessDeniedError(f"{_who(broker, client)} may not delete {topic!r} ({why.value})")


def group_allows(broker, client: Client, op: GroupOp, group_id: str) -> bool:
    """Whether ``client`` may do ``op`` to the consumer group ``group_id``."""
    root = broker.access
    if root is None:
        return True
    who = identity(broker, client)
    if not permits(who, root, SEARCH):  # as every path of the mount, a group's file too
        return False
    groups = broker.groups
    shown = None
    if groups.group_exists(group_id):
        shown = group_shown(groups.group_owner(group_id), root)
    return group_allowed(who, op, shown)


def require_group(broker, client: Client, op: GroupOp, group_id: str) -> None:
    """Raises `GroupError` (GROUP_AUTHORIZATION_FAILED) unless ``client`` may
    do ``op`` to the group."""
    if not group_allows(broker, client, op, group_id):
        raise GroupError(
            KafkaCode.GROUP_AUTHORIZATION_FAILED,
            f"{_who(broker, client)} may not {op.name.lower()} group {group_id!r}",
        )


def claim_group(broker, client: Client, group_id: str) -> bool:
    """Before a request that may make the group: the client owns it unless it
    exists; whether claimed (then `settle_group` after the request)."""
    if broker.access is None:
        return False
    return broker.groups.claim_group(group_id, new_group_owner(identity(broker, client)))


def may_cluster(broker, client: Client, op: TopicOp) -> bool:
    """The broker itself (its settings, DescribeCluster's details): read by
    whoever may read the mount's root, changed by DATA's owner."""
    root = broker.access
    if root is None:
        return True
    who = identity(broker, client)
    if op is OWNER:
        return who.is_root or who.uid == root.uid
    return permits(who, root, READ_BIT)


def _who(broker, client: Client) -> str:
    who = identity(broker, client)
    return f"{client.user or 'uid'} (uid {who.uid})" if client.user else f"uid {who.uid}"
