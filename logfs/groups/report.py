"""``logfs describe DATA --groups``: each consumer group as
``__consumer_offsets`` keeps it (read-only, beside a running daemon or not):
its type (``classic``, or ``consumer`` for KIP-848's protocol), its state,
its members and what they hold, and per partition the committed offset,
the log end offset and the lag, as ``kafka-consumer-groups --describe``
prints them. A classic group is shown as of its last rebalance; a consumer
group as of its last recorded heartbeat, its generation being its epoch."""

from __future__ import annotations

from ..core.log import Store
from . import consumer_offsets
from .consumer import assigned_partitions
from .modern_books import ModernBooks


def describe_groups(store: Store) -> list[dict]:
    """Every group with metadata or committed offsets, sorted by name."""
    stored, offsets, modern = consumer_offsets.load(store)
    consumer = {g.group_id: g for g in ModernBooks(store).restore(modern)}
    names = sorted(set(stored) | set(consumer) | {g for g, _, _ in offsets})
    topics = store.topics()
    out = []
    for name in names:
        if name in consumer:
            group = _consumer_group(consumer[name])
        else:
            group = _classic_group(stored.get(name))
        owner = {tp: m["member_id"] for m in group["members"] for tp in map(tuple, m["assignment"])}
        rows = []
        for (g, topic, p), committed in sorted(offsets.items()):
            if g != name:
                continue
            end = store.log(topic, p).next_offset if p < topics.get(topic, 0) else None
            rows.append(
                {
                    "topic": topic,
                    "partition": p,
                    "committed_offset": committed.offset,
                    "log_end_offset": end,
                    "lag": None if end is None else max(end - committed.offset, 0),
                    "member_id": owner.get((topic, p)),
                }
            )
        out.append({"group": name, **group, "offsets": rows})
    return out


def _classic_group(meta) -> dict:
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "assignment": [[t, p] for t, p in assigned_partitions(m.assignment)],
        }
        for m in (meta.members if meta else ())
    ]
    return {
        "type": "classic",
        "state": ("Stable" if meta.members else "Empty") if meta else "Empty",
        "protocol_type": meta.protocol_type if meta else "",
        "generation": meta.generation if meta else 0,
        "protocol": meta.protocol if meta else None,
        "members": members,
    }


def _consumer_group(group) -> dict:
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_epoch": m.epoch,
            "assignment": sorted([t, p] for t, ps in m.progress.assigned.items() for p in ps),
        }
        for m in group.members.values()
    ]
    return {
        "type": "consumer",
        "state": group.state,
        "protocol_type": "consumer",
        "generation": group.epoch,
        "protocol": None,
        "members": members,
    }


def group_lines(groups: list[dict]) -> list[str]:
    """`describe_groups` as ``logfs describe --groups`` prints it: a line per group,
    then a tab-indented line per member and per committed offset."""
    lines = []
    for g in groups:
        protocol = f"{g['protocol_type']}/{g['protocol'] or ''}".strip("/")
        lines.append(
            f"Group: {g['group']}\tType: {g['type']}\tState: {g['state']}\t"
            f"Protocol: {protocol}\tGeneration: {g['generation']}\tMembers: {len(g['members'])}"
        )
        for m in g["members"]:
            assigned = ",".join(f"{t}-{p}" for t, p in m["assignment"])
            lines.append(
                f"\tMember: {m['member_id']}\tInstance: {m['group_instance_id'] or '-'}\t"
                f"ClientId: {m['client_id']}\tHost: {m['client_host'] or '-'}\t"
                f"Assigned: {assigned or '-'}"
            )
        for o in g["offsets"]:
            end = "-" if o["log_end_offset"] is None else o["log_end_offset"]
            lag = "-" if o["lag"] is None else o["lag"]
            lines.append(
                f"\tTopic: {o['topic']}\tPartition: {o['partition']}\t"
                f"CommittedOffset: {o['committed_offset']}\tLogEndOffset: {end}\t"
                f"Lag: {lag}\tMember: {o['member_id'] or '-'}"
            )
    return lines
