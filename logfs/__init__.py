"""logfs: Apache Kafka's log storage layer as a mountable filesystem."""

from .core.client import Producer
from .core.errors import LogfsError
from .core.format import Record
from .core.log import Store

__all__ = ["LogfsError", "Producer", "Record", "Store"]
__version__ = "0.1.0"
