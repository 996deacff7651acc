"""Mirrors between a data directory and a Kafka cluster (docs/operations.md): `MirrorOut`
forwards the local partitions to the cluster's, exactly once, in transactions that carry
its position (outbound.py, target.py); `MirrorIn` copies a cluster's partitions in, a
follower whose logs are byte for byte the leader's (inbound.py, source.py), both over one
kind of connection (cluster.py), each request routed to its partition's leader or its
coordinator (routing.py). It imports what core's rooms export, and never trio
or a face: it runs in a thread of a daemon (`logfs mount`, `logfs serve` with
``-o mirror.to=`` or ``-o mirror.from=``), or, mirroring out, as a process of its own
(`logfs mirror`)."""

from .inbound import MirrorIn
from .outbound import MirrorOut
from .process import mirror_main
from .settings import OPTIONS, FollowerSettings, MirrorSettings
from .status import RetentionFloors, describe_lines, read_statuses
from .target import TargetError

__all__ = [
    "OPTIONS",
    "FollowerSettings",
    "MirrorIn",
    "MirrorOut",
    "RetentionFloors",
    "MirrorSettings",
    "TargetError",
    "describe_lines",
    "mirror_main",
    "read_statuses",
]
