"""How a consumer group member's assignment moves towards its target (KIP-848's
reconciliation, the rules of Kafka's ``CurrentAssignmentBuilder``), as a pure
function of the member's state, the target and the partitions' owners.

A member is in one of three states (Kafka's numbers, as its records keep them):

- STABLE (0): it has what it should have at its epoch;
- UNREVOKED_PARTITIONS (1): it must give up partitions first: it stays at its
  epoch until its heartbeat no longer reports them owned;
- UNRELEASED_PARTITIONS (2): it is at the target epoch but some partitions of
  its target are still held by another member (which must revoke them first);
  they are added once free.

A partition is free when no member holds it, assigned or pending revocation
(``owner_epoch`` answers -1). A member never gets a partition another member
still holds, so no partition is ever read by two members at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2

Partitions = Mapping[str, frozenset[int]]


class Progress(NamedTuple):
    """A member's assignment state."""

    state: int
    epoch: int
    previous_epoch: int
    assigned: dict[str, frozenset[int]]
    revoking: dict[str, frozenset[int]]


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the member (by what its heartbeat reports) still owns one of
    ``partitions``; a heartbeat that reports nothing proves nothing."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & ps for topic, ps in partitions.items())


def reconcile(
    now: Progress,
    target_epoch: int,
    target: Partitions,
    owner_epoch: Callable[[str, int], int],
    owned: Partitions | None,
) -> Progress:
    """The member's next state; ``now`` itself when nothing changes.

    Args:
        now: its state.
        target_epoch: the group's target assignment epoch.
        target: its partitions in the target assignment.
        owner_epoch: the epoch of the member holding a partition, -1 if none.
        owned: what its heartbeat reports it owns (None: not reported).
    """
    if now.state == STABLE:
        if now.epoch == target_epoch:
            return now
        return _next(now, now.epoch, target_epoch, target, owner_epoch, owned)
    if now.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, now.revoking):
            return now
        return _next(now, now.epoch + 1, target_epoch, target, owner_epoch, owned)
    return _next(now, now.epoch, target_epoch, target, owner_epoch, owned)


def _next(now, epoch, target_epoch, target, owner_epoch, owned) -> Progress:
    kept: dict[str, frozenset[int]] = {}
    revoking: dict[str, frozenset[int]] = {}
    adding: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(now.assigned):
        want = target.get(topic, frozenset())
        have = now.assigned.get(topic, frozenset())
        if have & want:
            kept[topic] = have & want
        if have - want:
            revoking[topic] = have - want
        new = {p for p in want - have if owner_epoch(topic, p) == -1}
        unreleased |= len(new) < len(want - have)
        if new:
            adding[topic] = frozenset(new)
    if revoking and _owns_any(owned, revoking):
        # First the revocation: the member stays at its epoch until it confirms it.
        return _progress(now, UNREVOKED_PARTITIONS, epoch, kept, revoking)
    for topic, ps in adding.items():
        kept[topic] = kept.get(topic, frozenset()) | ps
    state = UNRELEASED_PARTITIONS if unreleased else STABLE
    return _progress(now, state, target_epoch, kept, {})


def _progress(now: Progress, state: int, epoch: int, assigned, revoking) -> Progress:
    """The new state (its previous epoch the one it leaves), or ``now`` if the same."""
    if (state, epoch, assigned, revoking) == (now.state, now.epoch, now.assigned, now.revoking):
        return now
    return Progress(state, epoch, now.epoch, assigned, revoking)
