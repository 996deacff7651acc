"""The group coordinator's offset requests: OffsetCommit, OffsetFetch and
OffsetDelete, over `groups.Coordinator` (group_api.py answers the others)."""

from __future__ import annotations

import struct

from ..core.errors import LogfsError
from .access import READ
from .codes import NO_THROTTLE, error_code
from .group_log import Committed
from .group_state import GroupError
from .groups import MAX_METADATA
from .protocol import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, ErrorCode, make, schema


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
    if not broker.allows(advertised, READ):  # Kafka's rule: committing is reading the topic
        group, refused = None, ErrorCode.topic_authorization_failed
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
    topics = _answers(m.OffsetCommitResponseTopic, m.OffsetCommitResponsePartition, body, codes)
    return make(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


def _fetched_topics(broker, m, names, group_id, asked, allowed):
    """One group's OffsetFetch topics: ``asked`` [(topic, [partitions])] or, for
    None, every partition the group has committed."""
    committed = broker.groups.committed(group_id)
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
            groups.append(
                make(
                    m.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    topics=_fetched_topics(broker, m, names, g.group_id, asked, allowed),
                    error_code=ErrorCode.none,
                )
            )
        return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    names = (m.OffsetFetchResponseTopic, m.OffsetFetchResponsePartition)
    asked = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    return make(
        m.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=_fetched_topics(broker, m, names, body.group_id, asked, allowed),
        error_code=ErrorCode.none,
    )


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
            if not broker.allows(advertised, READ):
                codes[tp] = ErrorCode.topic_authorization_failed
            elif topic.name in subscribed:
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
                    error_code=codes[(topic.name, p.partition_index)],
                )
                for p in topic.partitions
            ),
        )
        for topic in body.topics
    )
