"""What the listener lets its clients make the daemon spend, all connections
together (docs/kafka.md, Limits):

- `RequestMemory`: the bytes of request frames held at once
  (Kafka's ``queued.max.request.bytes``). A connection whose frame does not fit
  waits, unread, until earlier frames are answered: the kernel's socket buffer
  holds the rest and TCP tells the client to slow down; the daemon does not grow.
  One client holds at most half the budget (or one frame, if larger), so a
  client that declares large frames and sends them slowly leaves the other
  half to everyone else.
- `ConnectionSlots`: connections per client. A loopback client is counted by
  the uid that owns its socket (peers.py), as every local user shares
  127.0.0.1; any other client by its address (Kafka's ``max.connections.per.ip``).
  root is not counted.
- `FailedAuthentications`: Kafka's ``connection.failed.authentication.delay.ms``,
  kept per client as slots are: a client's failed authentications are answered
  one delay apart, however many connections it opens, so guessing passwords
  goes no faster than one guess a delay.

Everything here lives on the event loop; nothing is shared with a thread.
"""

from __future__ import annotations

from collections.abc import Hashable

import trio

QUEUED_MAX_REQUEST_BYTES = 128 * 1024 * 1024
CONNECTIONS_MAX_IDLE_MS = 10 * 60 * 1000  # Kafka's default
MAX_CONNECTIONS_PER_IP = 100
MAX_CONNECTIONS_PER_USER = 100
FAILED_AUTHENTICATION_DELAY_MS = 100  # Kafka's default

# An option of the daemon -> the `Listener` argument it sets, the unit, the default.
LISTENER_BUDGETS = {
    "queued.max.request.bytes": ("queued_max_request_bytes", 1, QUEUED_MAX_REQUEST_BYTES),
    "connections.max.idle.ms": ("idle_timeout", 1e-3, CONNECTIONS_MAX_IDLE_MS),
    "max.connections.per.ip": ("max_connections_per_ip", 1, MAX_CONNECTIONS_PER_IP),
    "kafka.max.connections.per.user": ("max_connections_per_user", 1, MAX_CONNECTIONS_PER_USER),
    "connection.failed.authentication.delay.ms": (
        "failed_authentication_delay",
        1e-3,
        FAILED_AUTHENTICATION_DELAY_MS,
    ),
}


class RequestMemory:
    """A byte budget for request frames: `hold` waits until ``size`` bytes fit,
    in the budget and in the client's share of it.

    A frame larger than the whole budget waits for the budget to be empty and
    then holds all of it, so it is served alone rather than never. A client
    holding nothing may take one frame of any size that fits; beyond that its
    frames together stay within half the budget.

    Args:
        total: the budget in bytes.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        self.by_client: dict[Hashable, int] = {}  # what each client key holds
        self.waiting = 0  # connections waiting for bytes, for statistics()
        self._freed = trio.lowlevel.ParkingLot()

    def charge(self, size: int) -> int:
        """What a frame of ``size`` bytes takes of the budget."""
        return min(size, self.total)

    def _fits(self, charge: int, key: Hashable) -> bool:
        if self.held + charge > self.total:
            return False
        mine = self.by_client.get(key, 0)
        return not mine or mine + charge <= self.total // 2

    async def hold(self, size: int, key: Hashable = None) -> int:
        """Take ``size`` bytes (at most the budget) for client ``key`` once they
        fit; what was taken, to give back to `release`."""
        charge = self.charge(size)
        if not self._fits(charge, key):
            self.waiting += 1
            try:
                while not self._fits(charge, key):
                    await self._freed.park()
            finally:
                self.waiting -= 1
        self.held += charge
        self.by_client[key] = self.by_client.get(key, 0) + charge
        return charge

    def release(self, charge: int, key: Hashable = None) -> None:
        """Give back what `hold` took for ``key``."""
        if not charge:
            return
        self.held -= charge
        left = self.by_client.get(key, 0) - charge
        if left > 0:
            self.by_client[key] = left
        else:
            self.by_client.pop(key, None)
        if self.waiting:
            self._freed.unpark_all()

    def statistics(self) -> dict[str, int]:
        return {"total": self.total, "held": self.held, "waiting": self.waiting}


def client_key(uid: int | None, address: str) -> Hashable:
    """Who a connection is counted against: its uid when the kernel told it, else
    its address."""
    return ("uid", uid) if uid is not None else ("ip", address)


class ConnectionSlots:
    """Connections held per client key (`client_key`).

    Args:
        per_ip: connections one address may hold (a client whose uid is not known).
        per_user: connections one local uid may hold (loopback clients).
    """

    def __init__(self, per_ip: int, per_user: int) -> None:
        self.per_ip = per_ip
        self.per_user = per_user
        self.held: dict[Hashable, int] = {}

    def take(self, key: Hashable) -> str | None:
        """Count one more connection for ``key``; None, or why it is refused
        (nothing counted then)."""
        kind, who = key
        if kind == "uid" and who == 0:
            return None  # root: the daemon's administrator
        cap = self.per_user if kind == "uid" else self.per_ip
        count = self.held.get(key, 0)
        if count >= cap:
            name = f"uid {who}" if kind == "uid" else who
            return f"{name} holds {count} connections (at most {cap})"
        self.held[key] = count + 1
        return None

    def give(self, key: Hashable) -> None:
        """One connection of ``key`` closed (one `take` returned None for it)."""
        if key == ("uid", 0):
            return
        left = self.held.get(key, 0) - 1
        if left > 0:
            self.held[key] = left
        else:
            self.held.pop(key, None)


class FailedAuthentications:
    """When a failed authentication may be answered (and its connection closed).

    Each client key has the time its next failure may be answered; a failure
    waits until then and pushes it one delay further. Keys whose time has passed
    are forgotten as new failures come, so the table holds at most the clients
    that failed within the last delay or are waiting.

    Args:
        delay: seconds between two failures' answers for one client.
    """

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._next: dict[Hashable, float] = {}

    def due(self, key: Hashable) -> float:
        """The time (trio's clock) at which this failure of ``key`` may be answered."""
        now = trio.current_time()
        if len(self._next) > 64:
            self._next = {k: t for k, t in self._next.items() if t > now}
        at = max(now, self._next.get(key, now)) + self.delay
        self._next[key] = at
        return at

    async def wait(self, key: Hashable) -> None:
        """Sleep until this failure of ``key`` may be answered."""
        await trio.sleep_until(self.due(key))
