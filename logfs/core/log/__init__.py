"""The partition log and the data directory: `Log` (one topic-partition), its
streams of lines, its live keys, the log cleaner, the partitioner, and `Store`
(topics, partitions, checkpoints, the writer lock)."""

from . import cleaner
from .cleaner import Throttle, clean_store
from .keys import key_name, name_key
from .lines import FromStream, PartitionStream, Uncounted
from .partition import Log
from .store import Store

__all__ = [
    "FromStream",
    "Log",
    "PartitionStream",
    "Store",
    "Throttle",
    "Uncounted",
    "clean_store",
    "cleaner",
    "key_name",
    "name_key",
]
