"""``python -m logfs.mount STATUS_FD DATA MNT OPTIONS_JSON``: the mount's daemon
process under its former name, for scripts that start it so; ``logfs mount``
starts ``python -m logfs.daemon``. An entry point, like the command line: the
daemon room wires the faces, the mount face itself never imports it."""

import sys

from logfs.daemon import daemon_main

sys.exit(daemon_main(sys.argv[1:]))
