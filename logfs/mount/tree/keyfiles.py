"""The keys of compacted topics as the mount shows them (``<topic>/keys/``).

A key's file name is `key_name` of the key (core/log/keys.py); its content is
the key's latest value. `Keys` answers which keys are live and where, which
names a key has, and which keys were appended to since the mount last asked,
so that the kernel's cached attributes of those files can be dropped.
"""

from __future__ import annotations

from ...core.log import Log, Store, key_name, name_key


class Keys:
    """Live keys of ``store``'s compacted topics, and the mount's bookkeeping of them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: set[tuple[str, ...]] = set()  # keys/<name> created, not yet written
        self.in_use: set[str] = set()  # topics whose keys/ the kernel may cache

    def live(self, topic: str) -> list[dict[bytes, int]]:
        """Each partition's live keys (`Log.live_keys`); from now on the logs
        note the keys appended to, for `changed`."""
        out = []
        for p in range(self.store.topics().get(topic, 0)):
            out.append(self.store.log(topic, p).live_keys(watch=True))
        self.in_use.add(topic)
        return out

    def changed(self, topic: str) -> list[str]:
        """The names of the keys appended to since the last call (only for a
        topic whose keys/ the kernel may hold)."""
        if topic not in self.in_use:
            return []
        out = []
        for p in range(self.store.topics().get(topic, 0)):
            out.extend(key_name(key) for key in self.store.log(topic, p).take_changed_keys())
        return out

    def key_of(self, topic: str, name: str) -> bytes | None:
        """The key ``keys/<name>`` names, if any (core/log/keys.py)."""
        key = name_key(name)
        if key is None and "%~" in name:  # a long key's hashed name: look among the keys
            for live in self.live(topic):
                for candidate in live:
                    if key_name(candidate) == name:
                        return candidate
        return key

    def latest(self, topic: str, key: bytes) -> tuple[Log, int] | None:
        """The log and offset of ``key``'s latest record in ``topic``, if live."""
        for p, live in enumerate(self.live(topic)):
            offset = live.get(key)
            if offset is not None:
                return self.store.log(topic, p), offset
        return None

    def names(self, topic: str) -> list[str]:
        """The names of ``topic``'s live keys, sorted (the listing of keys/)."""
        live = set()
        for keys in self.live(topic):
            live.update(keys)
        return sorted(key_name(k) for k in live)
