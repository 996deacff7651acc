"""The partition log and the data directory: `Log` (one topic-partition) and
its collaborators (flushes, failure state, live keys, reads, streams of
lines), the one-line fast path (`append_line`), the log cleaner, the
partitioner, and `Store` (topics and their settings, partitions,
checkpoints, the writer lock)."""

from . import cleaner
from ._small import append_line, write_line
from .cleaner import Throttle, clean_store
from .flushing import FlushTicket
from .keys import key_name, name_key
from .lines import FromStream, PartitionStream, Uncounted
from .partition import Log
from .store import Store
from .topics import LIMIT_OPTIONS, Limits

__all__ = [
    "LIMIT_OPTIONS",
    "FlushTicket",
    "Limits",
    "FromStream",
    "Log",
    "PartitionStream",
    "Store",
    "Throttle",
    "Uncounted",
    "append_line",
    "clean_store",
    "cleaner",
    "key_name",
    "name_key",
    "write_line",
]
