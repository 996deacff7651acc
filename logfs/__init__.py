"""logfs: Apache Kafka's log storage layer as a mountable filesystem."""

from .errors import LogfsError
from .record import Record
from .store import Store

__all__ = ["LogfsError", "Record", "Store"]
__version__ = "0.1.0"
