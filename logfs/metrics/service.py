"""A daemon's metrics, whole: the books the faces feed (`Metrics`), the families
rendered from them and from the store (`Families`), the process's descriptors,
memory and CPU (`prometheus_client`'s process collector, Prometheus's usual
``process_*`` names) and the endpoint that serves them (`Endpoint`)."""

from __future__ import annotations

from collections.abc import Callable

import trio
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from ..core.errors import LogfsError
from ..core.log import Store
from ..groups import Coordinator
from .endpoint import Endpoint, parse_address
from .families import Families
from .recorder import Metrics


class MetricsService:
    """The metrics of a daemon over ``store``, served on ``address`` (``[HOST:]PORT``).

    Raises:
        LogfsError: a bad address, or one that cannot be bound (taken, not this
            machine's).
    """

    def __init__(
        self,
        address: str,
        store: Store,
        groups: Coordinator | None,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.metrics = Metrics()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(Families(self.metrics, store, groups, ready))
        self.registry.register(ProcessCollector(registry=None))
        host, port = parse_address(address)
        try:
            self.endpoint = Endpoint(host, port, self.render, self.metrics.refused)
        except OSError as e:
            raise LogfsError(f"metrics={address}: {e.strerror or e}") from None

    @property
    def address(self) -> tuple[str, int]:
        return self.endpoint.address

    def render(self) -> bytes:
        """The exposition, in Prometheus's text format."""
        return generate_latest(self.registry)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self.endpoint.run(task_status=task_status)

    def close(self) -> None:
        self.endpoint.socket.close()
