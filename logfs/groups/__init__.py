"""Consumer groups: Kafka's group coordinator over the store, whatever face a
request comes through: the classic protocol and KIP-848's consumer protocol
(modern_coordinator.py), whose groups share one namespace and offsets.

The coordinator (rebalance rounds, generations, sessions), the group and
member state, the committed offsets and their storage in the compacted
internal topic ``__consumer_offsets`` in Kafka's own key and value formats,
deletion, and the report ``logfs describe --groups`` prints. Imports what
core's rooms export and trio; never a face and never kio: a refusal is a
`GroupError` carrying Kafka's error code as an int (`KafkaCode`, from the one
table of errors in core). The Kafka listener's group requests and the mount's
``groups/`` files are two faces of one `Coordinator`, built by the daemon.

The transaction coordinator's state lives here too (transactions.py): transactional
ids, their producer ids and epochs, ``__transaction_state`` (txn_log.py) and the
offsets committed inside transactions (txn_offsets.py).
"""

from .consumer_offsets import Committed
from .coordinator import MAX_GROUP_SIZE, Coordinator
from .heartbeats import Heartbeat, HeartbeatAnswer
from .modern import ConsumerGroup, ConsumerMember
from .report import describe_groups, group_lines
from .settings import OPTIONS as GROUP_OPTIONS
from .settings import GroupSettings
from .state import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Group, GroupError, Member, Round
from .store import MAX_METADATA
from .transactions import TransactionCoordinator
from .txn_state import ProducerIds, TransactionError, Txn

__all__ = [
    "COMPLETING",
    "DEAD",
    "EMPTY",
    "GROUP_OPTIONS",
    "MAX_GROUP_SIZE",
    "MAX_METADATA",
    "PREPARING",
    "ProducerIds",
    "STABLE",
    "Committed",
    "ConsumerGroup",
    "ConsumerMember",
    "Coordinator",
    "Group",
    "GroupError",
    "GroupSettings",
    "Heartbeat",
    "HeartbeatAnswer",
    "Member",
    "Round",
    "TransactionCoordinator",
    "TransactionError",
    "Txn",
    "describe_groups",
    "group_lines",
]
