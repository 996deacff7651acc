"""Mirror out: a data directory's backlog forwarded to a ``logfs serve`` on 127.0.0.1
(standing in for the cluster), plaintext and TLS with SCRAM-SHA-512, each from a
fresh cluster; the rounds of one `MirrorOut` are timed until it has nothing left.

    python benchmarks/bench_mirror.py [--partitions 4] [--records 100000] [--value-bytes 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))
from kafka_helpers import Served, make_pki  # noqa: E402

from logfs.core.log import Store  # noqa: E402
from logfs.mirror import MirrorOut, MirrorSettings  # noqa: E402

USER, PASSWORD = "root", "bench secret"


def fill(data: Path, partitions: int, records: int, value_bytes: int) -> None:
    with Store(data) as store:
        store.create_topic("bench", partitions)
        value = b"x" * value_bytes
        for p in range(partitions):
            log = store.log("bench", p)
            for _ in range(0, records, 1000):
                log.append([value] * 1000)


def drain(data: Path, options: dict) -> tuple[int, float, int]:
    mirror = MirrorOut(str(data), MirrorSettings.from_options(options))
    started, rounds = time.monotonic(), 0
    try:
        while mirror.round():
            rounds += 1
    finally:
        mirror.close()
    return mirror.forwarded, time.monotonic() - started, rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--records", type=int, default=100_000, help="per partition")
    parser.add_argument("--value-bytes", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp:
        root = Path(tmp)
        fill(root / "edge", args.partitions, args.records, args.value_bytes)
        pki = make_pki((root / "pki").mkdir() or root / "pki")
        users = root / "users"
        users.write_text(f"{USER}:{PASSWORD}\n")
        (root / "password").write_text(PASSWORD + "\n")
        secure = {
            "mirror.security.protocol": "SASL_SSL", "mirror.sasl.mechanism": "SCRAM-SHA-512",
            "mirror.sasl.username": USER, "mirror.sasl.password.file": str(root / "password"),
            "mirror.ssl.cafile": str(pki.ca),
        }  # fmt: skip
        cases = [
            ("plaintext", (), {}),
            ("TLS+SCRAM", (f"kafka.sasl.users={users}", f"kafka.ssl.certfile={pki.cert}",
                           f"kafka.ssl.keyfile={pki.key}"), secure),
        ]  # fmt: skip
        for name, served_options, mirror_options in cases:
            with Served(root / f"cluster-{name}", *served_options) as served:
                options = {"mirror.to": f"kafka://{served.bootstrap}", "mirror.id": "bench"}
                records, seconds, rounds = drain(root / "edge", {**options, **mirror_options})
            mb = records * args.value_bytes / 1e6
            print(
                f"{name:10} {records} records ({mb:.0f} MB of values) in {seconds:.2f} s: "
                f"{records / seconds:,.0f} records/s, {mb / seconds:.1f} MB/s, "
                f"{rounds} transactions"
            )


if __name__ == "__main__":
    main()
