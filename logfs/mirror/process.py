"""``logfs mirror DATA kafka://...``: a mirror as a process of its own, beside a daemon
that owns DATA or with none (it reads DATA read-only and takes no lock). It runs until
SIGINT or SIGTERM; what fails on the cluster's side is logged on stderr and tried again,
so it never stops by itself once its settings are good."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Mapping

from ..core.log import Store
from .outbound import MirrorOut
from .settings import MirrorSettings

logger = logging.getLogger("logfs")


def mirror_main(data: str, to: str, options: Mapping[str, str]) -> int:
    """Mirror ``data`` to ``to`` until a signal; 0 then.

    Raises:
        InvalidConfigError: a bad option.
        LogfsError: DATA is not a data directory.
    """
    settings = MirrorSettings.from_options({**options, "mirror.to": to})
    Store(data, read_only=True).close()  # LogfsError now if DATA is not a data directory
    mirror = MirrorOut(data, settings)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("logfs mirror: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

    def stop(signum, frame) -> None:
        logger.info("%s: stopping", signal.Signals(signum).name)
        mirror.stop()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    logger.info("mirroring %s to %s as %s", data, settings.to, settings.id)
    mirror.run()
    return 0
