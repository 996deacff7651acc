"""logfs: Apache Kafka's log storage layer as a mountable filesystem."""

from .core.errors import LogfsError
from .core.producer import Producer
from .core.record import Record
from .core.store import Store

__all__ = ["LogfsError", "Producer", "Record", "Store"]
__version__ = "0.1.0"
