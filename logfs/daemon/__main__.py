"""``python -m logfs.daemon STATUS_FD DATA MNT OPTIONS_JSON``: the mount's
daemon process, as ``logfs mount`` starts it."""

import sys

from .commands import daemon_main

sys.exit(daemon_main(sys.argv[1:]))
