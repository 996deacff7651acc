"""Consumer groups kept in ``__consumer_offsets`` (modern_records.py): every
change the protocol makes is written as Kafka's coordinator writes it, and a
restart replays the topic into the groups as they were: epochs, members,
targets, assignments. Members then go on with their epochs if they
heartbeat within a session timeout of the restart, else they are fenced.

Records name topics by id; a topic whose id no longer names a topic (it was
deleted) drops out of what is restored. Group metadata is advisory, as the
classic groups' is: a write that fails is logged and the group goes on in
memory (committed offsets, written apart, are never lost so).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from ..core.errors import LogfsError
from . import consumer_offsets
from . import modern_records as rec
from .modern import ConsumerGroup, ConsumerMember, Partitions
from .reconcile import Progress

logger = logging.getLogger(__name__)


class ModernBooks:
    """Writes a coordinator's consumer groups' changes and reads them back.

    Args:
        store: the store that holds ``__consumer_offsets`` and the topics.
    """

    def __init__(self, store) -> None:
        self.store = store
        self.pending: list[tuple[bytes, bytes | None]] = []

    # ------------------------------------------------------------ writing

    def _ids(self, partitions: Partitions) -> dict[uuid.UUID, list[int]]:
        ids, topics = self.store.topic_ids, self.store.topics()
        return {ids.id_of(t): sorted(ps) for t, ps in partitions.items() if t in topics}

    def _put(self, kind: int, group: ConsumerGroup, member: str | None, value) -> None:
        self.pending.append((rec.key(kind, group.group_id, member), value))

    def member(self, group: ConsumerGroup, m: ConsumerMember) -> None:
        value = rec.member_value(
            rec.MemberRecord(
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                m.topics,
                m.regex,
                m.rebalance_ms,
                m.assignor,
                None if m.classic is None else (m.classic[0], tuple(m.classic[1])),
            )
        )
        self._put(rec.MEMBER, group, m.member_id, value)

    def current(self, group: ConsumerGroup, m: ConsumerMember) -> None:
        p = m.progress
        value = rec.current_value(
            rec.CurrentRecord(
                p.epoch, p.previous_epoch, p.state, self._ids(p.assigned), self._ids(p.revoking)
            )
        )
        self._put(rec.CURRENT, group, m.member_id, value)

    def target(self, group: ConsumerGroup, members: Iterable[str]) -> None:
        for member_id in members:
            value = rec.target_value(self._ids(group.target.get(member_id, {})))
            self._put(rec.TARGET, group, member_id, value)
        self._put(rec.TARGET_EPOCH, group, None, rec.epoch_value(group.assignment_epoch))

    def epoch(self, group: ConsumerGroup) -> None:
        self._put(rec.GROUP_EPOCH, group, None, rec.epoch_value(group.epoch))

    def metadata(self, group: ConsumerGroup) -> None:
        self._put(rec.PARTITION_METADATA, group, None, rec.metadata_value(group.metadata))

    def removed(self, group: ConsumerGroup, member_id: str) -> None:
        for kind in (rec.CURRENT, rec.TARGET, rec.MEMBER):
            self._put(kind, group, member_id, None)

    def deleted(self, group: ConsumerGroup) -> None:
        """The group is gone: tombstones for whatever of it is left."""
        for member_id in group.members:
            self.removed(group, member_id)
        for kind in (rec.TARGET_EPOCH, rec.PARTITION_METADATA, rec.GROUP_EPOCH):
            self._put(kind, group, None, None)

    def write(self) -> None:
        """Append what changed, as one batch."""
        records, self.pending = self.pending, []
        try:
            consumer_offsets.append(self.store, records)
        except (LogfsError, OSError) as e:
            logger.warning("consumer group records not written: %s", e)

    # ------------------------------------------------------------ reading back

    def restore(self, modern: dict, deadline: float = 0.0) -> list[ConsumerGroup]:
        """The consumer groups ``modern`` (`consumer_offsets.Loaded.modern`) describes;
        every member's session ends at ``deadline`` (trio's clock) unless it heartbeats."""
        groups: dict[str, ConsumerGroup] = {}

        def group(name: str) -> ConsumerGroup:
            return groups.setdefault(name, ConsumerGroup(name))

        ids = self.store.topic_ids
        names = {}

        def named(partitions: dict[uuid.UUID, list[int]]) -> Partitions:
            out = {}
            for topic_id, ps in partitions.items():
                if topic_id not in names:
                    names[topic_id] = ids.name_of(topic_id)
                if names[topic_id] is not None and ps:
                    out[names[topic_id]] = frozenset(ps)
            return out

        members: dict[tuple[str, str], ConsumerMember] = {}
        for (kind, name, member_id), value in modern.items():
            try:
                g = group(name)
                if kind == rec.GROUP_EPOCH:
                    g.epoch = rec.read_epoch(value)
                elif kind == rec.TARGET_EPOCH:
                    g.assignment_epoch = rec.read_epoch(value)
                elif kind == rec.PARTITION_METADATA:
                    g.metadata = rec.read_metadata(value)
                elif kind == rec.TARGET:
                    g.target[member_id] = named(rec.read_target(value))
                elif kind == rec.MEMBER:
                    m = members.setdefault((name, member_id), ConsumerMember(member_id))
                    r = rec.read_member(value)
                    m.instance_id, m.rack_id, m.client_id, m.client_host = r[:4]
                    m.topics, m.regex, m.rebalance_ms, m.assignor = r[4:8]
                    m.classic = None if r.classic is None else (r.classic[0], list(r.classic[1]))
                elif kind == rec.CURRENT:
                    m = members.setdefault((name, member_id), ConsumerMember(member_id))
                    c = rec.read_current(value)
                    m.progress = Progress(
                        c.state, c.epoch, c.previous_epoch, named(c.assigned), named(c.revoking)
                    )
            except (ValueError, IndexError, UnicodeDecodeError) as e:
                logger.warning("consumer group %s: a record is unreadable (%s)", name, e)
        for (name, _), m in members.items():
            m.deadline = deadline
            groups[name].add(m)
        return list(groups.values())
