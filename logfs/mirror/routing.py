"""Where a mirror's requests go in a Kafka cluster of several brokers, as Kafka's own
clients route them (cluster.py sends them, target.py and source.py choose the route).

The books (`Routes`), all learnt from the cluster's answers:

- brokers: node id -> (host, port), from Metadata (and FindCoordinator, whose answer
  names its broker); at most `MAX_BROKERS`, the rest of an answer ignored;
- leaders: (topic, partition) -> node id, from Metadata (-1: no leader now), those
  of the topics asked for (a Metadata answer of every topic replaces them all);
- coordinators: (key type, key) -> node id, from FindCoordinator: key type 0 a
  group's coordinator, 1 a transactional id's.

A connection per broker, opened on the first request routed to it; at most
`MAX_CONNECTIONS` open at once, the least recently used closed to open another. So
whatever a cluster answers, a mirror holds a bounded table and a bounded number of
sockets. The bootstrap connection (the address the mirror was given) asks Metadata,
FindCoordinator, CreateTopics and DescribeConfigs, which any broker answers.

A cluster whose Metadata names one broker (a single-broker Kafka, a logfs listener:
the leader of every partition and every coordinator) is reached over the bootstrap
connection for everything, as if there were no routing: no FindCoordinator, no
second connection, whatever host the broker advertises.

Nothing here is retried: a failure of any request (a broker unreachable, an answer
NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR) reaches the mirror, which drops the
connections and every route (`forget`) and starts its round again, asking Metadata
and FindCoordinator anew. A follower's Fetch or ListOffsets answering a partition
NOT_LEADER_OR_FOLLOWER forgets that partition's leader only (`stale`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..core.client import wire

Wire = wire.Wire
BOOTSTRAP = -1  # the route of the bootstrap connection (Kafka's node ids are >= 0)
NO_LEADER = None  # the route of a partition without a reachable leader now
MAX_BROKERS = 1024  # brokers kept from one cluster's answers
MAX_CONNECTIONS = 16  # broker connections open at once
GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types


def _usable(host: object, port: object) -> bool:
    """Whether a broker's advertised address can be connected to as given."""
    return (
        isinstance(host, str)
        and 0 < len(host) <= 255
        and not any(c in host for c in ",/ \t\r\n")
        and isinstance(port, int)
        and 0 < port < 65536
    )


class Routes:
    """The brokers, leaders and coordinators a cluster named, and one connection per
    broker (module docstring).

    Args:
        bootstrap: the connection to the address the mirror was given.
        connect: a new (unopened) connection to ``kafka://HOST:PORT``.
    """

    def __init__(self, bootstrap: Wire, connect: Callable[[str], Wire]) -> None:
        self.bootstrap = bootstrap
        self.connect = connect
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.coordinators: dict[tuple[int, str], int] = {}
        self.wires: OrderedDict[int, Wire] = OrderedDict()
        self.known = False  # a Metadata answer was learnt since the last `forget`

    @property
    def single(self) -> bool:
        """Whether the cluster named one broker (or none): everything goes to bootstrap."""
        return len(self.brokers) <= 1

    def learn(self, answer, every_topic: bool = False) -> None:
        """A Metadata answer's brokers and its partitions' leaders (``every_topic``: the
        answer named every topic, so the leaders of topics it does not name are dropped)."""
        brokers: dict[int, tuple[str, int]] = {}
        for broker in answer.brokers:
            if len(brokers) >= MAX_BROKERS:
                break
            if _usable(broker.host, broker.port):
                brokers[int(broker.node_id)] = (broker.host, int(broker.port))
        for node in set(self.wires) - set(brokers):  # gone, or moved: connect afresh
            self.wires.pop(node).close()
        for node, address in brokers.items():
            if node in self.wires and self.brokers.get(node) != address:
                self.wires.pop(node).close()
        self.brokers = brokers
        if every_topic:
            self.leaders = {}
        for topic in answer.topics:
            if topic.error_code != wire.NONE:
                continue
            for p in topic.partitions:
                self.leaders[(topic.name, int(p.partition_index))] = int(p.leader_id)
        self.known = True

    def learn_coordinator(self, key_type: int, key: str, answer) -> int | None:
        """A FindCoordinator answer: the coordinator's node id, its broker kept."""
        node, host, port = int(answer.node_id), answer.host, answer.port
        if node < 0 or not _usable(host, port):
            return NO_LEADER
        if node not in self.brokers and len(self.brokers) >= MAX_BROKERS:
            return NO_LEADER
        if self.brokers.get(node, (host, port)) != (host, port) and node in self.wires:
            self.wires.pop(node).close()
        self.brokers[node] = (host, int(port))
        self.coordinators[(key_type, key)] = node
        return node

    def unknown(self, partitions: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """Those of ``partitions`` whose leader is not known (or was forgotten)."""
        return [tp for tp in partitions if tp not in self.leaders]

    def leader(self, tp: tuple[str, int]) -> int | None:
        """The route of ``tp``: `BOOTSTRAP` on a single broker, its leader's node id,
        or `NO_LEADER` (none now, or one whose address cannot be used)."""
        if self.single:
            return BOOTSTRAP
        node = self.leaders.get(tp, -1)
        return node if node in self.brokers else NO_LEADER

    def by_leader(self, partitions: Iterable[tuple[str, int]]) -> dict[int | None, list]:
        """``partitions`` grouped by their route (`leader`), in the order given."""
        out: dict[int | None, list] = {}
        for tp in partitions:
            out.setdefault(self.leader(tp), []).append(tp)
        return out

    def stale(self, tp: tuple[str, int]) -> None:
        """Forget ``tp``'s leader: the next request for it asks Metadata first."""
        self.leaders.pop(tp, None)

    def wire(self, node: int) -> Wire:
        """The connection of route ``node``, made on first use (`MAX_CONNECTIONS`)."""
        if node == BOOTSTRAP:
            return self.bootstrap
        found = self.wires.get(node)
        if found is not None:
            self.wires.move_to_end(node)
            return found
        while len(self.wires) >= MAX_CONNECTIONS:
            self.wires.popitem(last=False)[1].close()
        host, port = self.brokers[node]
        self.wires[node] = made = self.connect(
            f"{wire.SCHEME}[{host}]:{port}" if ":" in host else f"{wire.SCHEME}{host}:{port}"
        )
        return made

    def forget(self) -> None:
        """Close every broker's connection and drop every route (not the bootstrap
        connection: its owner closes it)."""
        while self.wires:
            self.wires.popitem()[1].close()
        self.brokers, self.leaders, self.coordinators = {}, {}, {}
        self.known = False

    def statistics(self) -> dict[str, int]:
        """How many brokers, leaders and connections the books hold now."""
        return {
            "brokers": len(self.brokers),
            "leaders": len(self.leaders),
            "connections": len(self.wires),
        }
