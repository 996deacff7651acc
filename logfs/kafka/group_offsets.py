"""The group coordinator's offset requests: OffsetCommit, OffsetFetch and
OffsetDelete, translated to the groups room's `Coordinator` (`Broker.groups`)
and its answers back (group_api.py answers the others). Whether the client may
read the topics (Kafka's rule for committing too) is the listener's to say."""

from __future__ import annotations

from ..groups import GroupError
from .access import READ
from .codes import NO_THROTTLE, error_code
from .protocol import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, ErrorCode, make, schema


def offset_commit(broker, request, advertised):
    m = schema(OFFSET_COMMIT, request.version)
    body = request.body
    wanted = {
        (topic.name, p.partition_index): (
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata or "",
        )
        for topic in body.topics
        for p in topic.partitions
    }
    if broker.allows(advertised, READ):
        codes = broker.groups.commit_offsets(
            body.group_id,
            body.generation_id_or_member_epoch,
            body.member_id,
            getattr(body, "group_instance_id", None),
            wanted,
            modern_api=request.version >= 9,
        )
    else:  # Kafka's rule: committing is reading the topic
        codes = dict.fromkeys(wanted, ErrorCode.topic_authorization_failed)
    topics = _answers(m.OffsetCommitResponseTopic, m.OffsetCommitResponsePartition, body, codes)
    return make(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def _fetched_topics(broker, m, names, group_id, asked, allowed, committed):
    """One group's OffsetFetch topics: ``asked`` [(topic, [partitions])] or, for
    None, every partition the group has ``committed``."""
    code = ErrorCode.none if allowed else ErrorCode.topic_authorization_failed
    if not allowed:
        committed = {}
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
                    error_code=code,
                )
            )
        out.append(make(topic_cls, name=topic, partitions=tuple(rows)))
    return tuple(out)


def offset_fetch(broker, request, advertised):
    m = schema(OFFSET_FETCH, request.version)
    body = request.body
    allowed = broker.allows(advertised, READ)
    if request.version >= 8:
        names = (m.OffsetFetchResponseTopics, m.OffsetFetchResponsePartitions)
        groups = []
        for g in body.groups:
            asked = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
            member = getattr(g, "member_id", None), getattr(g, "member_epoch", -1)
            try:  # a consumer group's member asks at its epoch (v9+)
                committed, code = broker.groups.committed(g.group_id, *member), ErrorCode.none
            except GroupError as e:
                committed, code, asked = {}, error_code(e), []
            groups.append(
                make(
                    m.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    topics=_fetched_topics(broker, m, names, g.group_id, asked, allowed, committed),
                    error_code=code,
                )
            )
        return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    names = (m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition)
    asked = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    committed = broker.groups.committed(body.group_id)
    return make(
        m.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=_fetched_topics(broker, m, names, body.group_id, asked, allowed, committed),
        error_code=ErrorCode.none,
    )


def offset_delete(broker, request, advertised):
    m = schema(OFFSET_DELETE, request.version)
    body = request.body
    asked = [(topic.name, p.partition_index) for topic in body.topics for p in topic.partitions]
    allowed = broker.allows(advertised, READ)
    try:
        codes = broker.groups.delete_offsets(body.group_id, asked if allowed else [])
    except GroupError as e:  # GROUP_ID_NOT_FOUND
        return make(
            m.OffsetDeleteResponse,
            error_code=error_code(e),
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    if not allowed:
        codes = dict.fromkeys(asked, ErrorCode.topic_authorization_failed)
    topics = _answers(m.OffsetDeleteResponseTopic, m.OffsetDeleteResponsePartition, body, codes)
    return make(
        m.OffsetDeleteResponse,
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=topics,
    )


def _answers(topic_type, partition_type, body, codes: dict[tuple[str, int], int]) -> tuple:
    """The response's topics: each partition the request named, with its error code."""
    return tuple(
        make(
            topic_type,
            name=topic.name,
            partitions=tuple(
                make(
                    partition_type,
                    partition_index=p.partition_index,
                    error_code=ErrorCode(codes[(topic.name, p.partition_index)]),
                )
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
