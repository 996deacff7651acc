"""The groups a coordinator keeps: loaded from ``__consumer_offsets`` at the first
request after a start (consumer_offsets.py), their committed offsets written there before
they are acknowledged, and forgotten once they have neither members nor offsets.
coordinator.py runs Kafka's rebalancing protocol over them.

Committing follows Kafka's coordinator: an offset is for a partition that exists, its
metadata is at most `MAX_METADATA` bytes, and a commit of many partitions is one batch, all
written or none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from ..core.config import now_ms
from ..core.errors import KafkaCode, LogfsError, kafka_code_of
from ..core.log import Store
from . import consumer_offsets
from .consumer import PROTOCOL_TYPE, subscribed_topics
from .consumer_offsets import Committed
from .modern import ConsumerGroup
from .modern_books import ModernBooks
from .owners import GroupOwners, OwnedGroups
from .settings import GroupSettings
from .state import COMPLETING, DEAD, Group, GroupError

logger = logging.getLogger(__name__)

MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes

TopicPartition = tuple[str, int]


class GroupStore(OwnedGroups):
    """Every group of the store, its members and committed offsets, kept in memory and
    written to ``__consumer_offsets``; the rebalancing protocol over them is `Coordinator`'s.

    Args:
        store: the store whose topics offsets are committed for, and which
            holds ``__consumer_offsets``.
        clock: wall-clock milliseconds for commit timestamps.
        settings: the ``group.*`` broker settings.
    """

    def __init__(
        self,
        store: Store,
        clock: Callable[[], int] = now_ms,
        settings: GroupSettings = GroupSettings(),  # noqa: B008 - immutable
    ) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings
        self.groups: dict[str, Group | ConsumerGroup] = {}
        self.loaded = False
        # offsets of transactions open when last stopped, by producer id (txn_offsets.py)
        self.txn_pending: dict[int, dict] = {}
        self.owners = GroupOwners(store.path, read_only=store.read_only)  # owners.py

    # ------------------------------------------------------------ loading and saving

    def load(self) -> None:
        """Read ``__consumer_offsets`` once (the store is recovered by now)."""
        if self.loaded:
            return
        self.loaded = True  # the topic itself is created by the first write to it
        loaded = consumer_offsets.load(self.store, self.txn_pending)
        try:
            deadline = trio.current_time() + self.settings.consumer_session_ms / 1000
        except RuntimeError:  # outside a trio run (a tool): no session runs out
            deadline = 0.0
        for group in ModernBooks(self.store).restore(loaded.modern, deadline):
            self.groups[group.group_id] = group
        for (group_id, topic, partition), committed in loaded.offsets.items():
            group = self.groups.get(group_id) or self._group(group_id)
            group.offsets[(topic, partition)] = committed
        for group_id, stored in loaded.groups.items():
            if not isinstance(self.groups.get(group_id), ConsumerGroup):
                group = self._group(group_id)
                group.restore(stored)
                self.forget_if_idle(group)
        self.owners.load(self.groups)
        logger.info("loaded %d consumer groups from %s", len(self.groups), consumer_offsets.TOPIC)

    def _save_group(self, group: Group) -> None:
        value = group.stored(self.clock())
        try:
            consumer_offsets.append(
                self.store,
                [(consumer_offsets.group_key(group.group_id), consumer_offsets.group_value(value))],
            )
        except (LogfsError, OSError) as e:  # metadata is advisory; offsets are not
            logger.warning("group %s: metadata not written: %s", group.group_id, e)

    # ------------------------------------------------------------ groups

    def _group(self, group_id: str) -> Group:
        """The classic group of that id, made if need be. A consumer group without
        members becomes one (its offsets kept), as in Kafka; one with members is
        refused: its members speak the consumer protocol."""
        group = self.groups.get(group_id)
        if isinstance(group, Group):
            return group
        if group is not None and group.members:
            raise GroupError(
                KafkaCode.INCONSISTENT_GROUP_PROTOCOL,
                f"Group {group_id} is a consumer group with members of the consumer protocol.",
            )
        classic = self.groups[group_id] = Group(group_id)
        if group is not None:
            books = ModernBooks(self.store)
            books.deleted(group)
            books.write()
            classic.offsets = group.offsets
        return classic

    def forget_if_idle(self, group: Group | ConsumerGroup) -> bool:
        """Forget a group with nothing to keep (no members, no offsets): whether it was."""
        if group.is_idle() and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
            return True
        return False

    def drop_classic_metadata(self, group: Group) -> None:
        """A classic group without members becomes a consumer group: its metadata goes."""
        try:
            consumer_offsets.append(
                self.store, [(consumer_offsets.group_key(group.group_id), None)]
            )
        except (LogfsError, OSError) as e:
            logger.warning("group %s: metadata not removed: %s", group.group_id, e)

    def _known(self, group_id: str, member_id: str, instance_id: str | None):
        """The group and member a request names, or Kafka's refusal (a member of a
        consumer group is unknown to the classic protocol's requests)."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        member = group.members.get(member_id) if group else None
        static = group.instance(instance_id) if group else None
        if static is not None and static.member_id != member_id:
            raise GroupError(KafkaCode.FENCED_INSTANCE_ID)
        if member is None:
            raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
        return group, member

    def group(self, group_id: str) -> Group | None:
        """The group of that id, if the coordinator knows it."""
        self.load()
        return self.groups.get(group_id)

    def all_groups(self) -> list[Group]:
        """Every group the coordinator knows, in the order they came."""
        self.load()
        return list(self.groups.values())

    # ------------------------------------------------------------ offsets

    def check_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id,
        modern_api: bool = True,
        partitions=None,
    ):
        """The group an OffsetCommit may commit for, or Kafka's refusal. A
        commit without a member (generation -1) is for a group without members;
        a consumer group's member commits at its member epoch (``modern_api``:
        OffsetCommit v9+, which such members must use), or at an older one for
        ``partitions`` it has held since (`ConsumerGroup.check_commit`)."""
        self.load()
        if not group_id:
            raise GroupError(KafkaCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            group.check_commit(member_id, generation, modern_api, partitions)
            return group
        if generation < 0 and not member_id:
            group = self._group(group_id)
            if group.members:
                raise GroupError(KafkaCode.UNKNOWN_MEMBER_ID)
            return group
        group, member = self._known(group_id, member_id, instance_id)
        if generation != group.generation:
            raise GroupError(KafkaCode.ILLEGAL_GENERATION)
        # While members rejoin, the generation ending may still commit what it
        # processed (so the next owner of a partition does not read it again);
        # between the join and the leader's assignment nobody owns anything.
        if group.state == COMPLETING:
            raise GroupError(KafkaCode.REBALANCE_IN_PROGRESS)
        member.touch()
        return group

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[TopicPartition, tuple[int, int, str]],
        modern_api: bool = True,
    ) -> dict[TopicPartition, int]:
        """OffsetCommit: commit ``offsets`` ((topic, partition) -> (offset,
        leader epoch, metadata)) for the member; each partition's Kafka error
        code (NONE where committed)."""
        try:
            group = self.check_commit(
                group_id, generation, member_id, instance_id, modern_api, offsets.keys()
            )
        except GroupError as e:
            return dict.fromkeys(offsets, e.kafka_code)
        codes: dict[TopicPartition, int] = {}
        wanted: dict[TopicPartition, Committed] = {}
        now = self.clock()
        for tp, (offset, epoch, metadata) in offsets.items():
            if not self._partition_known(*tp):
                codes[tp] = KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > MAX_METADATA:
                codes[tp] = KafkaCode.OFFSET_METADATA_TOO_LARGE
            else:
                wanted[tp] = Committed(offset, epoch, metadata, now)
        try:
            self.commit(group, wanted)
            codes.update(dict.fromkeys(wanted, KafkaCode.NONE))
        except (LogfsError, OSError) as e:
            codes.update(dict.fromkeys(wanted, kafka_code_of(e)))
        return codes

    def commit(self, group: Group, offsets: dict[TopicPartition, Committed]) -> None:
        """Write committed offsets (one batch) and then keep them.

        Raises:
            LogfsError, OSError: the store refused the write; nothing is kept.
        """
        consumer_offsets.append(
            self.store,
            [
                (
                    consumer_offsets.offset_key(group.group_id, t, p),
                    consumer_offsets.offset_value(c),
                )
                for (t, p), c in offsets.items()
            ],
        )
        group.offsets.update(offsets)
        if self.groups.get(group.group_id) is not group:
            self.groups[group.group_id] = group
        self.forget_if_idle(group)

    def apply_committed(self, group_id: str, offsets: dict[TopicPartition, Committed]) -> None:
        """Offsets already in ``__consumer_offsets`` take effect: those of a
        committed transaction (txn_offsets.py)."""
        self.load()
        group = self.groups.get(group_id) or self._group(group_id)
        group.offsets.update(offsets)
        self.forget_if_idle(group)

    def commit_offset(self, group_id: str, topic: str, partition: int, offset: int) -> None:
        """Commit one offset for a group without members, as an OffsetCommit
        with generation -1 does (the mount's ``groups/<group>`` files).

        Raises:
            GroupError: the group has members (they own its commits).
            LogfsError, OSError: the store refused the write.
        """
        group = self.check_commit(group_id, -1, "", None)
        self.commit(group, {(topic, partition): Committed(offset, -1, "", self.clock())})

    def groups_of(self, topic: str, partition: int) -> list[str]:
        """The groups with an offset committed for the partition, sorted."""
        self.load()
        tp = (topic, partition)
        return sorted(g.group_id for g in self.groups.values() if tp in g.offsets)

    def committed(
        self, group_id: str, member_id: str | None = None, member_epoch: int = -1
    ) -> dict[TopicPartition, Committed]:
        """The group's committed offsets (none for a group the coordinator does not know).

        Raises:
            GroupError: a consumer group's member asks at a stale epoch (OffsetFetch v9+
                names the member), or is no member (Kafka's checks).
        """
        self.load()
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            group.check_fetch(member_id, member_epoch)
        return dict(group.offsets) if group else {}

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """OffsetDelete: forget the group's offsets of ``partitions`` (tombstones
        in the topic); each partition's Kafka error code. A topic the group's
        consumers subscribe to keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC).

        Raises:
            GroupError: GROUP_ID_NOT_FOUND.
        """
        group = self.group(group_id)
        if group is None:
            raise GroupError(KafkaCode.GROUP_ID_NOT_FOUND)
        subscribed = self._subscribed(group)
        codes: dict[TopicPartition, int] = {}
        for tp in partitions:
            if tp[0] in subscribed:
                codes[tp] = KafkaCode.GROUP_SUBSCRIBED_TO_TOPIC
            elif not self._partition_known(*tp):
                codes[tp] = KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                codes[tp] = KafkaCode.NONE
        gone = [tp for tp, code in codes.items() if code == KafkaCode.NONE]
        try:
            consumer_offsets.append(
                self.store, [(consumer_offsets.offset_key(group_id, t, p), None) for t, p in gone]
            )
        except (LogfsError, OSError) as e:
            codes.update(dict.fromkeys(gone, kafka_code_of(e)))
            return codes
        for tp in gone:
            group.offsets.pop(tp, None)
        self.forget_if_idle(group)
        return codes

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups for one group: its offsets and metadata get tombstones.

        Raises:
            GroupError: GROUP_ID_NOT_FOUND, or NON_EMPTY_GROUP while it has members.
            LogfsError, OSError: the store refused the write; nothing changed.
        """
        self.load()
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(KafkaCode.GROUP_ID_NOT_FOUND)
        if group.members or (isinstance(group, Group) and group.pending):
            raise GroupError(KafkaCode.NON_EMPTY_GROUP)
        records = [(consumer_offsets.offset_key(group_id, t, p), None) for t, p in group.offsets]
        if isinstance(group, ConsumerGroup):
            books = ModernBooks(self.store)
            books.deleted(group)
            records += books.pending
        else:
            records.append((consumer_offsets.group_key(group_id), None))
        consumer_offsets.append(self.store, records)
        if isinstance(group, Group):
            group.state = DEAD
        del self.groups[group_id]

    def _partition_known(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.store.topics().get(topic, 0)

    @staticmethod
    def _subscribed(group: Group | ConsumerGroup) -> set[str]:
        """The topics a consumer group's members subscribe to."""
        if isinstance(group, ConsumerGroup):
            return group.subscribed_topics()
        if group.protocol_type != PROTOCOL_TYPE:
            return set()
        return set().union(
            *(subscribed_topics(m.metadata(group.protocol)) for m in group.members.values())
        )
