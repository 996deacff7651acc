"""``logfs serve`` that kills itself with SIGKILL inside the transaction
coordinator's two-phase end, at a chosen point: once it has written Prepare* to
``__transaction_state`` and then MARKERS transaction markers (0: right after the
prepare, before any marker).

Usage: ``python txn_crash.py MARKERS serve DATA --listen HOST:PORT [-o ...]``

The coordinator's functions are wrapped from outside, in this process only:
nothing in logfs knows of it. The kill is the daemon's own SIGKILL, so nothing
after it runs (no clean shutdown, no snapshot, no flush).
"""

from __future__ import annotations

import os
import signal
import sys

from logfs.cli import main
from logfs.core.log import Log
from logfs.groups import transactions
from logfs.groups.txn_log import PREPARE_ABORT, PREPARE_COMMIT


def arm(markers: int) -> None:
    """Die after the prepare and ``markers`` markers after it."""
    left: list[int] = []  # markers still to let through, once a prepare is written

    def die_when_due() -> None:
        if left and left[0] == 0:
            sys.stderr.write(f"txn_crash: killed after the prepare and {markers} markers\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    write = transactions.TransactionCoordinator._write

    def prepared_then_die(self, txn, status):
        write(self, txn, status)
        if status in (PREPARE_COMMIT, PREPARE_ABORT) and not left:
            left.append(markers)
            die_when_due()

    append_marker = Log.append_marker

    def marker_then_die(self, *args, **kwargs):
        offset = append_marker(self, *args, **kwargs)
        if left:
            left[0] -= 1
            die_when_due()
        return offset

    transactions.TransactionCoordinator._write = prepared_then_die
    Log.append_marker = marker_then_die


if __name__ == "__main__":
    arm(int(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
