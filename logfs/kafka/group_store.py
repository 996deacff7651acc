"""The groups a coordinator keeps: loaded from ``__consumer_offsets`` at the first
request after a start (group_log.py), their committed offsets written there before they are
acknowledged, and forgotten once they have neither members nor offsets. groups.py runs Kafka's
rebalancing protocol over them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.config import now_ms
from ..core.errors import LogfsError
from ..core.log import Store
from . import group_log
from .group_log import Committed
from .group_state import COMPLETING, DEAD, Group, GroupError
from .protocol import ErrorCode

logger = logging.getLogger(__name__)


class GroupStore:
    """Every group of the store, its members and committed offsets, kept in memory and
    written to ``__consumer_offsets``; the rebalancing protocol over them is `Coordinator`'s.

    Args:
        store: the store whose topics offsets are committed for, and which
            holds ``__consumer_offsets``.
        clock: wall-clock milliseconds for commit timestamps.
    """

    def __init__(self, store: Store, clock: Callable[[], int] = now_ms) -> None:
        self.store = store
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.loaded = False

    # ------------------------------------------------------------ loading and saving

    def load(self) -> None:
        """Read ``__consumer_offsets`` once (the store is recovered by now)."""
        if self.loaded:
            return
        self.loaded = True  # the topic itself is created by the first write to it
        stored_groups, offsets = group_log.load(self.store)
        for (group_id, topic, partition), committed in offsets.items():
            self._group(group_id).offsets[(topic, partition)] = committed
        for group_id, stored in stored_groups.items():
            group = self._group(group_id)
            group.restore(stored)
            self._forget_if_idle(group)
        logger.info("loaded %d consumer groups from %s", len(self.groups), group_log.TOPIC)

    def _save_group(self, group: Group) -> None:
        value = group.stored(self.clock())
        try:
            group_log.append(
                self.store, [(group_log.group_key(group.group_id), group_log.group_value(value))]
            )
        except (LogfsError, OSError) as e:  # metadata is advisory; offsets are not
            logger.warning("group %s: metadata not written: %s", group.group_id, e)

    # ------------------------------------------------------------ groups

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        return group

    def _forget_if_idle(self, group: Group) -> None:
        idle = not group.members and not group.pending and not group.offsets
        if idle and group.round is None and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def _known(self, group_id: str, member_id: str, instance_id: str | None):
        """The group and member a request names, or Kafka's refusal."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        static = group.instance(instance_id) if group else None
        if static is not None and static.member_id != member_id:
            raise GroupError(ErrorCode.fenced_instance_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return group, member

    # ------------------------------------------------------------ offsets

    def check_commit(self, group_id: str, generation: int, member_id: str, instance_id):
        """The group an OffsetCommit may commit for, or Kafka's refusal. A
        commit without a member (generation -1) is for a group without members."""
        self.load()
        if not group_id:
            raise GroupError(ErrorCode.invalid_group_id)
        if generation < 0 and not member_id:
            group = self._group(group_id)
            if group.members:
                raise GroupError(ErrorCode.unknown_member_id)
            return group
        group, member = self._known(group_id, member_id, instance_id)
        if generation != group.generation:
            raise GroupError(ErrorCode.illegal_generation)
        # While members rejoin, the generation ending may still commit what it
        # processed (so the next owner of a partition does not read it again);
        # between the join and the leader's assignment nobody owns anything.
        if group.state == COMPLETING:
            raise GroupError(ErrorCode.rebalance_in_progress)
        member.touch()
        return group

    def commit(self, group: Group, offsets: dict[tuple[str, int], Committed]) -> None:
        """Write committed offsets (one batch) and then keep them.

        Raises:
            LogfsError, OSError: the store refused the write; nothing is kept.
        """
        group_log.append(
            self.store,
            [
                (group_log.offset_key(group.group_id, t, p), group_log.offset_value(c))
                for (t, p), c in offsets.items()
            ],
        )
        group.offsets.update(offsets)
        if self.groups.get(group.group_id) is not group:
            self.groups[group.group_id] = group
        self._forget_if_idle(group)

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
        return sorted(g.group_id for g in self.groups.values() if (topic, partition) in g.offsets)

    def committed(self, group_id: str) -> dict[tuple[str, int], Committed]:
        self.load()
        group = self.groups.get(group_id)
        return dict(group.offsets) if group else {}

    def delete_offsets(self, group: Group, partitions: list[tuple[str, int]]) -> None:
        group_log.append(
            self.store,
            [(group_log.offset_key(group.group_id, t, p), None) for t, p in partitions],
        )
        for tp in partitions:
            group.offsets.pop(tp, None)
        self._forget_if_idle(group)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups for one group: its offsets and metadata get tombstones."""
        self.load()
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.group_id_not_found)
        if group.members or group.pending:
            raise GroupError(ErrorCode.non_empty_group)
        records = [(group_log.offset_key(group_id, t, p), None) for t, p in group.offsets]
        group_log.append(self.store, [*records, (group_log.group_key(group_id), None)])
        group.state = DEAD
        del self.groups[group_id]
