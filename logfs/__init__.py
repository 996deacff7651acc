"""logfs: Apache Kafka's log storage layer as a mountable filesystem."""

import os
import sys

if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0]) == "logfs":
    # A process of logfs's own: `python -m logfs.cli`, `python -m logfs.daemon` (while -m
    # looks for its module, Python sets argv[0] to "-m") or the `logfs` command. kio, the
    # Kafka messages' library, imports hypothesis wherever it is installed (the test
    # dependencies), only to offer test strategies for its types: a second of CPU at the
    # start of every command and daemon, for nothing they use.
    sys.modules.setdefault("hypothesis", None)

from .core.client import Producer
from .core.errors import LogfsError
from .core.format import Record
from .core.log import Store

__all__ = ["LogfsError", "Producer", "Record", "Store"]
__version__ = "0.1.0"
