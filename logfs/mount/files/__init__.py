"""The mount's open files: what one open() of a node holds until release(),
and what it does with what is written to it.

`OpenFile` (openfile.py) is the base of every kind and `Shared` what an open
file reaches of the mount (the tree's `View`); the files whose content the
mount generates (generated.py: snapshots, a key's edited copy, config
edits, stream read-ahead); the append files (appendfile.py) with their
framing (framing.py) and the buffered mode's (buffered.py); the memory
they share per mount, bounded (memory.py).

The lowest of the mount's rooms: it imports core's exports and the mount's
errnos, never the tree or the request layer above it.
"""

from .appendfile import AppendFile
from .buffered import ATTR_TIMEOUT, BufferedAppends
from .framing import BatchFramer, LengthFramer, LineFramer
from .generated import (
    ConfigFile,
    KeyFile,
    SnapshotFile,
    StreamFile,
    config_text,
    key_value_limit,
    state_text,
)
from .memory import PARTIAL_LINES_BYTES, Pool, RecordCache
from .openfile import OpenFile, Shared

__all__ = [
    "ATTR_TIMEOUT",
    "AppendFile",
    "BatchFramer",
    "BufferedAppends",
    "ConfigFile",
    "KeyFile",
    "LengthFramer",
    "LineFramer",
    "OpenFile",
    "PARTIAL_LINES_BYTES",
    "Pool",
    "RecordCache",
    "Shared",
    "SnapshotFile",
    "StreamFile",
    "config_text",
    "key_value_limit",
    "state_text",
]
