"""A second logfs (``logfs serve`` with TLS and SCRAM) standing in for the cluster a
mirror ships to."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka_helpers import Served
from mirror_helpers import PASSWORD, USER


@pytest.fixture
def cluster(tmp_path, pki):
    """The cluster: its listener (``served``, which a test may replace by a restarted
    one), and the ``-o`` options of a mirror that ships to it."""
    users = tmp_path / "cluster-users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    users.chmod(0o600)
    password = tmp_path / "mirror-password"
    password.write_text(PASSWORD + "\n")
    password.chmod(0o600)
    served = Served(
        tmp_path / "cluster",
        f"kafka.sasl.users={users}",
        f"kafka.ssl.certfile={pki.cert}",
        f"kafka.ssl.keyfile={pki.key}",
    )
    cluster = SimpleNamespace(served=served, pki=pki, data=tmp_path / "cluster")
    served.start()
    try:
        cluster.options = {
            "mirror.to": f"kafka://{served.bootstrap}",
            "mirror.security.protocol": "SASL_SSL",
            "mirror.sasl.mechanism": "SCRAM-SHA-512",
            "mirror.sasl.username": USER,
            "mirror.sasl.password.file": str(password),
            "mirror.ssl.cafile": str(pki.ca),
            "mirror.id": "edge-1",
            "mirror.timeout.ms": "10000",
        }
        yield cluster
    finally:
        cluster.served.__exit__()  # the one running now: a test may have restarted it
