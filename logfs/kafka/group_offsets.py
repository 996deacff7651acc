"""The group coordinator's offset requests: OffsetCommit, OffsetFetch and
OffsetDelete, translated to the groups room's `Coordinator` (`Broker.groups`)
and its answers back (group_api.py answers the others). Whether the client may
read the topics (Kafka's rule for committing too) is the listener's to say."""

from __future__ import annotations

from ..core.access import GroupOp
from ..core.errors import KafkaCode
from ..groups import GroupError
from .access import READ, allows, claim_group, group_allows
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
    group_id = body.group_id
    claimed = claim_group(broker, advertised, group_id)  # a new group is its maker's
    try:
        if not group_allows(broker, advertised, GroupOp.JOIN, group_id):
            codes = dict.fromkeys(wanted, ErrorCode.group_authorization_failed)
        else:  # Kafka's rule: committing is reading the topic
            refused = {tp for tp in wanted if not allows(broker, advertised, READ, tp[0])}
            codes = broker.groups.commit_offsets(
                group_id,
                body.generation_id_or_member_epoch,
                body.member_id,
                getattr(body, "group_instance_id", None),
                {tp: v for tp, v in wanted.items() if tp not in refused},
                modern_api=request.version >= 9,
            ) if len(refused) < len(wanted) else {}  # fmt: skip
            codes |= dict.fromkeys(refused, ErrorCode.topic_authorization_failed)
    finally:
        if claimed:
            broker.groups.settle_group(group_id)
    topics = _answers(m.OffsetCommitResponseTopic, m.OffsetCommitResponsePartition, body, codes)
    return make(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def _fetched_topics(broker, advertised, m, names, asked, committed):
    """One group's OffsetFetch topics: ``asked`` [(topic, [partitions])] or, for
    None, every partition the group has ``committed`` of the topics the client
    may read (Kafka leaves the others out; those asked answer
    TOPIC_AUTHORIZATION_FAILED)."""
    readable = {}

    def allowed(topic: str) -> bool:
        if topic not in readable:
            readable[topic] = allows(broker, advertised, READ, topic)
        return readable[topic]

    if asked is None:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(committed):
            if allowed(topic):
                by_topic.setdefault(topic, []).append(p)
        asked = list(by_topic.items())
    topic_cls, partition_cls = names
    out = []
    for topic, partitions in asked:
        ok = allowed(topic)
        code = ErrorCode.none if ok else ErrorCode.topic_authorization_failed
        rows = []
        for p in partitions:
            c = committed.get((topic, p)) if ok else None
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
    if request.version >= 8:
        names = (m.OffsetFetchResponseTopics, m.OffsetFetchResponsePartitions)
        groups = []
        for g in body.groups:
            asked = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
            member = getattr(g, "member_id", None), getattr(g, "member_epoch", -1)
            try:  # a consumer group's member asks at its epoch (v9+)
                if not group_allows(broker, advertised, GroupOp.READ, g.group_id):
                    raise GroupError(KafkaCode.GROUP_AUTHORIZATION_FAILED)
                committed, code = broker.groups.committed(g.group_id, *member), ErrorCode.none
            except GroupError as e:
                committed, code, asked = {}, error_code(e), []
            groups.append(
                make(
                    m.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    topics=_fetched_topics(broker, advertised, m, names, asked, committed),
                    error_code=code,
                )
            )
        return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    names = (m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition)
    asked = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    if not group_allows(broker, advertised, GroupOp.READ, body.group_id):
        return make(
            m.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=(),
            error_code=ErrorCode.group_authorization_failed,
        )
    committed = broker.groups.committed(body.group_id)
    return make(
        m.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=_fetched_topics(broker, advertised, m, names, asked, committed),
        error_code=ErrorCode.none,
    )


def offset_delete(broker, request, advertised):
    m = schema(OFFSET_DELETE, request.version)
    body = request.body
    asked = [(topic.name, p.partition_index) for topic in body.topics for p in topic.partitions]
    if not group_allows(broker, advertised, GroupOp.DELETE, body.group_id):
        return make(
            m.OffsetDeleteResponse,
            error_code=ErrorCode.group_authorization_failed,
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    refused = {tp for tp in asked if not allows(broker, advertised, READ, tp[0])}
    try:
        codes = broker.groups.delete_offsets(
            body.group_id, [tp for tp in asked if tp not in refused]
        )
    except GroupError as e:  # GROUP_ID_NOT_FOUND
        return make(
            m.OffsetDeleteResponse,
            error_code=error_code(e),
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    codes = {**codes, **dict.fromkeys(refused, ErrorCode.topic_authorization_failed)}
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
