"""A daemon's metrics, whole: the books the faces feed (`Metrics`), the families
rendered from them and from the store (`Families`), the process's descriptors,
memory and CPU (`prometheus_client`'s process collector, Prometheus's usual
``process_*`` names) and the endpoint that serves them (`Endpoint`). A scrape
reads the numbers on the event loop and leaves the text to a worker thread."""

from __future__ import annotations

from collections.abc import Callable

import trio
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import Metric

from ..core.errors import LogfsError
from ..core.log import Store
from ..groups import Coordinator
from .endpoint import Endpoint, parse_address
from .families import Families, Reading
from .recorder import Metrics


class Snapshot:
    """Families read at one scrape, rendered like a registry's."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


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
        self.families = Families(self.metrics, store, groups, ready)
        self.process = ProcessCollector(registry=None)
        self.registry.register(self.families)
        self.registry.register(self.process)
        host, port = parse_address(address)
        try:
            self.endpoint = Endpoint(host, port, self.scrape, self.metrics.refused)
        except OSError as e:
            raise LogfsError(f"metrics={address}: {e.strerror or e}") from None

    @property
    def address(self) -> tuple[str, int]:
        return self.endpoint.address

    def render(self) -> bytes:
        """The exposition, in Prometheus's text format, made in this thread."""
        return generate_latest(self.registry)

    async def scrape(self) -> bytes:
        """The exposition: the numbers copied on the event loop, where nothing changes
        them meanwhile, the families and their text made in a worker thread, so that a
        scrape of many partitions holds up requests as little as it can."""
        reading = self.families.read()
        return await trio.to_thread.run_sync(self._text, reading)

    def _text(self, reading: Reading) -> bytes:
        families = [*self.families.families(reading), *self.process.collect()]
        return generate_latest(Snapshot(families))

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self.endpoint.run(task_status=task_status)

    def close(self) -> None:
        self.endpoint.socket.close()
