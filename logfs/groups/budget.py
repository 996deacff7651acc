"""What classic group members' protocol metadata may cost: JoinGroup's
subscriptions are held for as long as a member lives, so they are bounded
per member (``group.member.metadata.max.bytes``) and over every group of the
daemon (``group.metadata.max.bytes``), and let go when a member leaves, times
out, is dropped from a round, or its connection closes before it synced.

Each member is counted as `MEMBER_OVERHEAD` bytes plus its protocols' names and
metadata, so that members with empty metadata are bounded too. The count
grows at each join and is taken again exactly at each sweep of the
coordinator (`recount`), so a member gone is let go within a sweep; between
two sweeps the count is never below what is held.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.errors import KafkaCode
from .state import GroupError

MEMBER_OVERHEAD = 1024
MEMBER_METADATA_MAX_BYTES = 1024 * 1024
METADATA_MAX_BYTES = 64 * 1024 * 1024


def cost(protocols: Iterable[tuple[str, bytes]]) -> int:
    """What a member with ``protocols`` counts for."""
    return MEMBER_OVERHEAD + sum(len(name) + len(meta or b"") for name, meta in protocols)


class MetadataBudget:
    """The count of members' metadata against its two bounds.

    Args:
        per_member: the most one member's protocols may count for.
        total: the most every member together may count for.
    """

    def __init__(self, per_member: int, total: int) -> None:
        self.per_member = per_member
        self.total = total
        self.held = 0

    def check(self, protocols: list[tuple[str, bytes]]) -> int:
        """What a member with ``protocols`` counts for.

        Raises:
            GroupError: INVALID_REQUEST for a member over its bound.
        """
        size = cost(protocols)
        if size > self.per_member:
            raise GroupError(
                KafkaCode.INVALID_REQUEST,
                f"a member's protocol metadata of {size} bytes "
                f"(group.member.metadata.max.bytes is {self.per_member})",
            )
        return size

    def admit(self, protocols: list[tuple[str, bytes]], replacing: int = 0) -> None:
        """Count a member joining with ``protocols`` in place of ``replacing``
        bytes it held before.

        Raises:
            GroupError: INVALID_REQUEST for a member over its bound,
                GROUP_MAX_SIZE_REACHED when the daemon's budget is spent.
        """
        size = self.check(protocols)
        if self.held - replacing + size > self.total:
            raise GroupError(
                KafkaCode.GROUP_MAX_SIZE_REACHED,
                f"group members hold {self.held} bytes of metadata "
                f"(group.metadata.max.bytes is {self.total})",
            )
        self.held += size - replacing

    def recount(self, members: Iterable[list[tuple[str, bytes]]]) -> None:
        """Take the count again from every member's protocols."""
        self.held = sum(cost(protocols) for protocols in members)


def member_protocols(groups) -> Iterable[list[tuple[str, bytes]]]:
    """Every member's protocols in ``groups``: a classic group's members', and a
    consumer group's classic members' (kept as ``classic``)."""
    for group in groups:
        for member in group.members.values():
            protocols = getattr(member, "protocols", None)
            if protocols is None:  # a consumer group's member
                classic = getattr(member, "classic", None)
                protocols = classic[1] if classic is not None else None
            if protocols is not None:
                yield protocols
