"""KafkaJS (Node.js) against the listener: its admin client creates, lists
and deletes topics and reads offsets; its idempotent producer sends keyed
records with headers, uncompressed and gzip, checked against the Store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from kafka_helpers import Served, stored

from logfs.core.log import Store

SCRIPT = Path(__file__).resolve().parents[1] / "helpers" / "kafkajs" / "produce_admin.js"
# mount_scripts/install.sh (LOGFS_TEST_TOOLS=1) installs KafkaJS into the venv
NODE_MODULES = Path(sys.prefix) / "node" / "node_modules"


def test_kafkajs_producer_and_admin(tmp_path):
    assert shutil.which("node"), "node is not installed (mount_scripts/install.sh installs it)"
    assert (NODE_MODULES / "kafkajs").is_dir(), f"KafkaJS is not installed in {NODE_MODULES}"
    data = tmp_path / "data"
    with Served(data) as served:
        done = subprocess.run(
            ["node", str(SCRIPT), served.bootstrap],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["partitions"] == 2
    assert seen["topics"] == ["js"]  # "gone" was created and deleted again
    assert seen["offsets"] == [[0, "10", "0"], [1, "10", "0"]]
    assert seen["out"] == [[i % 2, i // 2] for i in range(20)]
    for p in (0, 1):
        records = stored(data, "js", p)
        assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
            (i // 2, f"k{i % 3}".encode(), f"value {i}".encode(), (("n", str(i).encode()),))
            for i in range(p, 20, 2)
        ]
    with Store(data, read_only=True) as store:
        assert store.topic_overrides("js") == {"retention.ms": "3600000"}
        assert "gone" not in store.topics()
