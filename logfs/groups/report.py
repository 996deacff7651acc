"""``logfs describe DATA --groups``: each consumer group as
``__consumer_offsets`` keeps it (read-only, beside a running daemon or not):
its state at the last rebalance, its members and what they were assigned,
and per partition the committed offset, the log end offset and the lag, as
``kafka-consumer-groups --describe`` prints them."""

from __future__ import annotations

from ..core.log import Store
from . import consumer_offsets
from .consumer import assigned_partitions


def describe_groups(store: Store) -> list[dict]:
    """Every group with metadata or committed offsets, sorted by name."""
    stored, offsets = consumer_offsets.load(store)
    names = sorted(set(stored) | {g for g, _, _ in offsets})
    topics = store.topics()
    out = []
    for name in names:
        meta = stored.get(name)
        members, owner = [], {}
        for m in meta.members if meta else ():
            partitions = assigned_partitions(m.assignment)
            members.append(
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": [[t, p] for t, p in partitions],
                }
            )
            owner.update(dict.fromkeys(partitions, m.member_id))
        rows = []
        for (group, topic, p), committed in sorted(offsets.items()):
            if group != name:
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
        out.append(
            {
                "group": name,
                "state": ("Stable" if meta.members else "Empty") if meta else "Empty",
                "protocol_type": meta.protocol_type if meta else "",
                "generation": meta.generation if meta else 0,
                "protocol": meta.protocol if meta else None,
                "members": members,
                "offsets": rows,
            }
        )
    return out
