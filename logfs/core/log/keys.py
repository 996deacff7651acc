"""The live keys of a compacted partition, and keys as file names.

`live_keys` builds, in one compiled pass over a partition's batches, a dict
from each live key (its latest record is not a tombstone) to that record's
offset; `index_batches` keeps it current with batches as they are appended.
A partition's `LiveKeys` holds it (built on first use, dropped when retention
deletes segments; cleaning never removes a key's latest record, so it stays
right), and the keys appended to since a watcher last took them. With
transactions the keys are those of committed records below the last stable
offset (isolation.py): while a transaction is open appends drop the map, and a
marker does too; it is built again on the next use.
Memory: one Python dict entry, one bytes object and one int per key.

Key names (the mount's ``<topic>/keys/``), so that every key has exactly one
name and every name one key:

- a key's bytes are its name, except ``%``, ``/`` and NUL, which are written
  ``%25``, ``%2F`` and ``%00``, and a leading ``.``, written ``%2E`` (so no
  key is ``.``, ``..`` or hidden);
- the empty key is ``%``;
- a name that would be longer than 255 bytes is its first 200 bytes (never
  cutting an escape), ``%~`` and 32 hex digits of the key's SHA-256.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable

from ..errors import CorruptRecordError
from ..format.record import read_header, records_section
from ._keymap import map_keys

NAME_MAX = 255
_SPECIAL = re.compile(rb"[%/\x00]|^\.")
_ESCAPE = re.compile(rb"%([0-9A-F]{2})")


def key_name(key: bytes) -> str:
    """The file name of ``key`` (module docstring)."""
    if not key:
        return "%"
    name = _SPECIAL.sub(lambda m: b"%%%02X" % m[0][0], key)
    if len(name) > NAME_MAX:
        cut = name[:200]
        cut = cut[: cut.rfind(b"%")] if b"%" in cut[-2:] else cut  # no half escape
        name = cut + b"%~" + hashlib.sha256(key).hexdigest()[:32].encode()
    return os.fsdecode(name)


def name_key(name: str) -> bytes | None:
    """The key named ``name``; None for a long key's hashed name (look it up
    among the keys) or a name no key has."""
    raw = os.fsencode(name)
    if raw == b"%":
        return b""
    if b"%~" in raw:
        return None
    key = _ESCAPE.sub(lambda m: bytes([int(m[1], 16)]), raw)
    return key if key_name(key) == name else None


def index_batches(
    latest: dict[bytes, int], batches: Iterable[bytes | memoryview], changed: set[bytes] | None
) -> None:
    """Apply appended batches (offsets assigned, CRC valid) to ``latest``, and
    add the keys they hold to ``changed`` unless it is None (for the mount:
    its cached attributes of those keys' files are stale)."""
    for batch in batches:
        header = read_header(batch)
        if header.is_control:
            continue
        body = records_section(batch, header)
        bad = map_keys(body, header.records_count, header.base_offset, 0, latest, True, changed)
        if bad >= 0:
            raise CorruptRecordError(f"batch at offset {header.base_offset}: record {bad}")


def live_keys(segments, log_start_offset: int, view=None) -> dict[bytes, int]:
    """The live keys of a partition's ``segments`` and their latest offsets (of
    the records ``view`` shows, a `Visibility`: committed ones)."""
    latest: dict[bytes, int] = {}
    for segment in segments:
        for _, header, batch in segment.batches(0):
            hidden = header.is_control if view is None else view.hides(header)
            if hidden or header.last_offset < log_start_offset:
                continue
            body = records_section(batch, header)
            bad = map_keys(
                body, header.records_count, header.base_offset, log_start_offset, latest, True
            )
            if bad >= 0:
                raise CorruptRecordError(
                    f"{segment.log_path}: batch at offset {header.base_offset}: record {bad}"
                )
    return latest


class LiveKeys:
    """A partition's live keys, built on first use and then kept current by
    appends; and, once someone watches (the mount, whose cached attributes
    of ``keys/`` files go stale), the keys appended to since it last took them."""

    def __init__(self) -> None:
        self._latest: dict[bytes, int] | None = None
        self._changed: set[bytes] | None = None  # None: nobody watches

    def get(
        self, segments, log_start_offset: int, *, watch: bool = False, view=None
    ) -> dict[bytes, int]:
        """The live keys of ``segments`` from ``log_start_offset`` on (built
        now unless kept, of the records ``view`` shows); ``watch`` starts noting
        the keys appended to."""
        if watch and self._changed is None:
            self._changed = set()
        if self._latest is None:
            self._latest = live_keys(segments, log_start_offset, view)
        return self._latest

    @property
    def quiet(self) -> bool:
        """Whether appends have nothing to tell: no keys kept, no changed keys
        waiting for a watcher (the one-line fast path appends only then)."""
        return self._latest is None and not self._changed

    def appended(self, batches: Iterable[bytes | memoryview]) -> None:
        """Apply appended batches (offsets assigned, CRC valid), if kept."""
        if self._latest is not None:
            index_batches(self._latest, batches, self._changed)

    def drop(self) -> None:
        """Forget the keys (segments were deleted): rebuilt on the next `get`."""
        self._latest = None

    def take_changed(self) -> set[bytes]:
        """The keys appended to since the last call (empty if nobody watches)."""
        changed = self._changed or set()
        if self._changed:
            self._changed = set()
        return changed
