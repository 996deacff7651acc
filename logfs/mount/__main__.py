"""``python -m logfs.mount STATUS_FD DATA MNT OPTIONS_JSON``: the mount daemon."""

import sys

from .daemon import daemon_main

sys.exit(daemon_main(sys.argv[1:]))
