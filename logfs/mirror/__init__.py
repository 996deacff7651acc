"""Mirrors between a data directory and a Kafka cluster (docs/operations.md): `MirrorOut`
forwards the local partitions to the cluster's, exactly once, in transactions that carry
its position (outbound.py, target.py). It imports what core's rooms export, and never trio
or a face: it runs in a thread of a daemon (`logfs mount`, `logfs serve` with
``-o mirror.to=``) or as a process of its own (`logfs mirror`)."""

from .outbound import MirrorOut
from .process import mirror_main
from .settings import OPTIONS, MirrorSettings
from .status import RetentionFloors, describe_lines, read_statuses
from .target import TargetError

__all__ = [
    "OPTIONS",
    "MirrorOut",
    "RetentionFloors",
    "MirrorSettings",
    "TargetError",
    "describe_lines",
    "mirror_main",
    "read_statuses",
]
