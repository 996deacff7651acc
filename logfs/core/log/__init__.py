"""The partition log and the data directory: `Log` (one topic-partition), its
parts over one `PartitionState` (reads, appends, the one-line fast path,
flushes) and its collaborators (what is unflushed, the failure state, live
keys, streams of lines), the log cleaner, the partitioner, and `Store`
(topics, their settings and owners, partitions, checkpoints, the writer lock)."""

from . import cleaner
from .cleaner import Throttle, clean_store
from .keys import key_name, name_key
from .lines import FromStream, PartitionStream, Uncounted
from .owners import Owner
from .partition import Log
from .store import Store
from .topics import LIMIT_OPTIONS, Limits
from .unflushed import FlushTicket

__all__ = [
    "LIMIT_OPTIONS",
    "FlushTicket",
    "Limits",
    "FromStream",
    "Log",
    "Owner",
    "PartitionStream",
    "Store",
    "Throttle",
    "Uncounted",
    "clean_store",
    "cleaner",
    "key_name",
    "name_key",
]
