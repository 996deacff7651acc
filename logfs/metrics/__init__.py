"""The daemon's Prometheus metrics (``-o metrics=[HOST:]PORT``), with Kafka's
names where Kafka has them (docs/operations.md lists them).

The faces are handed the daemon's `Metrics` and tell it what they do (a request
answered, records appended, bytes sent); a scrape renders those books and the
numbers the store and the group coordinator keep in memory. Imports core and
groups, never a face: the daemon wires it.
"""

from .endpoint import parse_address
from .recorder import Metrics
from .service import MetricsService

__all__ = ["Metrics", "MetricsService", "parse_address"]
