"""ApiVersions and Metadata: what this broker serves, and the store's topics
with this node as the one broker and the leader of every partition."""

from __future__ import annotations

import uuid

import trio

from ..core.config import INTERNAL_TOPICS
from ..core.errors import AccessDeniedError, LogfsError, TopicExistsError
from .access import DESCRIBE, allows, new_topic_owner, require_create
from .codes import CLUSTER_ID, LEADER_EPOCH, NO_THROTTLE, NODE_ID, error_code
from .protocol import API_VERSIONS, DESCRIBE_CLUSTER, METADATA, SERVED, ErrorCode, make, schema

NO_TOPIC_ID = uuid.UUID(int=0)


def _api_keys(m) -> tuple:
    return tuple(
        make(m.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(SERVED.items())
    )


def api_versions(broker, request, advertised):
    m = schema(API_VERSIONS, request.version)
    return make(
        m.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(m),
        throttle_time=NO_THROTTLE,
    )


def api_versions_unsupported():
    """Kafka's answer to an ApiVersions version it does not serve: version 0's
    layout, UNSUPPORTED_VERSION and the versions it does serve, so that the
    client retries with one of them."""
    m = schema(API_VERSIONS, 0)
    return m.ApiVersionsResponse(error_code=ErrorCode.unsupported_version, api_keys=_api_keys(m))


async def metadata(broker, request, advertised):
    m = schema(METADATA, request.version)
    store = broker.store
    ids = store.topic_ids
    wanted = request.body.topics
    if wanted is None or (request.version == 0 and not wanted):
        # All topics (v0: an empty list means all) the client may describe but
        # internal ones, which are described only when named.
        names = [
            t
            for t in store.topics()
            if t not in INTERNAL_TOPICS and allows(broker, advertised, DESCRIBE, t)
        ]
    else:
        names = [t.name for t in wanted if t.name is not None]
    allow = getattr(request.body, "allow_auto_topic_creation", True)
    topics = [_by_id(broker, advertised, m, t.topic_id) for t in wanted or () if t.name is None]
    creations = broker.auto_create_per_request
    for name in names:
        code = ErrorCode.none
        count = store.topics().get(name, 0)
        internal = name in INTERNAL_TOPICS
        if not count and allow and broker.auto_create and not internal and creations > 0:
            creations -= 1
            try:
                require_create(broker, advertised, name)
                owner = new_topic_owner(broker, advertised)
                new = store.begin_topic(name, partitions=broker.partitions, owner=owner)
                try:  # its files made in a worker thread, others answered meanwhile
                    await trio.to_thread.run_sync(new.build)
                finally:
                    store.finish(new)
            except TopicExistsError:  # being made for another request: ask again
                code = ErrorCode.leader_not_available
            except (LogfsError, OSError) as e:
                code = error_code(e)
            count = store.topics().get(name, 0)  # (deleted meanwhile: unknown)
        elif count and not allows(broker, advertised, DESCRIBE, name):
            code, count = error_code(AccessDeniedError(name)), 0
        if not count and code == ErrorCode.none:
            # A topic another request is making is there in a moment: ask again (Kafka
            # answers so while a new topic's leaders are elected).
            made = store.being_made(name) and allows(broker, advertised, DESCRIBE, name)
            code = ErrorCode.leader_not_available if made else ErrorCode.unknown_topic_or_partition
        partitions = _partitions(m, count)
        topics.append(
            make(
                m.MetadataResponseTopic,
                error_code=code,
                name=name,
                topic_id=ids.id_of(name) if count and request.version >= 10 else NO_TOPIC_ID,
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
            )
        )
    host, port = advertised.host, advertised.port
    broker_entry = make(m.MetadataResponseBroker, node_id=NODE_ID, host=host, port=port)
    return make(
        m.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=(broker_entry,),
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        topics=tuple(topics),
    )


def _partitions(m, count: int) -> tuple:
    return tuple(
        make(
            m.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=NODE_ID,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=(NODE_ID,),
            isr_nodes=(NODE_ID,),
            offline_replicas=(),
        )
        for p in range(count)
    )


def _by_id(broker, advertised, m, topic_id):
    """A topic asked for by its id (v10+, as consumers of KIP-848 groups ask for the topics
    of their assignment): UNKNOWN_TOPIC_ID when no topic has it (it was deleted)."""
    store = broker.store
    name = store.topic_ids.name_of(topic_id) if topic_id is not None else None
    count = store.topics().get(name, 0) if name is not None else 0
    code = ErrorCode.none if count else ErrorCode.unknown_topic_id
    if count and not allows(broker, advertised, DESCRIBE, name):
        code, count = ErrorCode.topic_authorization_failed, 0
    return make(
        m.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=_partitions(m, count),
    )


def describe_cluster(broker, request, advertised):
    """This node, the cluster's one broker and its controller (KIP-700)."""
    m = schema(DESCRIBE_CLUSTER, request.version)
    host, port = advertised.host, advertised.port
    node = make(
        m.DescribeClusterBroker, broker_id=NODE_ID, host=host, port=port, rack=None, is_fenced=False
    )
    return make(
        m.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=getattr(request.body, "endpoint_type", 1),
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        brokers=(node,),
        cluster_authorized_operations=-(2**31),
    )
