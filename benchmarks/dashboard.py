"""The picture of docs/grafana/logfs-dashboard.json: its panels drawn with matplotlib
from what a real Prometheus answered, not a Grafana screenshot (no Grafana here).

A daemon with a mount, a Kafka listener and ``-o metrics=`` is scraped every second by
Prometheus (Debian's package) while, for ``--seconds``: shell writers append lines
through the mount (a burst in the middle), kafka-python produces to two partitions,
a consumer group reads behind them and commits, and a client sends a request that
the listener refuses. Then each panel's queries are asked of Prometheus's
``/api/v1/query_range`` over the run, one point a second, and drawn in the
dashboard's grid.

    .venv/bin/python benchmarks/dashboard.py [--seconds 120] [--out FILE.png]

Needs matplotlib (not a dependency of logfs: ``.venv/bin/pip install matplotlib``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from mounts import logfs_mount  # noqa: E402

DASHBOARD = HERE.parent / "docs" / "grafana" / "logfs-dashboard.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pattern: str, log: Path) -> str:
    deadline = time.monotonic() + 30
    while not (found := re.search(pattern, log.read_text())):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pattern!r} not in {log}")
        time.sleep(0.05)
    return found[1]


@contextlib.contextmanager
def prometheus(tmp: Path, target: str):
    config = tmp / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: logfs\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    port = free_port()
    with open(tmp / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [shutil.which("prometheus") or "/usr/bin/prometheus", f"--config.file={config}",
             f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=5):
                break
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def workload(mnt: Path, bootstrap: str, seconds: float) -> None:
    """Writers, a producer, a lagging consumer group and a refused request, for ``seconds``."""
    from kafka import KafkaConsumer, KafkaProducer

    (mnt / "web").mkdir()
    (mnt / "orders").mkdir()
    (mnt / "orders" / "1").mkdir()
    stop = time.monotonic() + seconds

    def shell() -> None:
        while time.monotonic() < stop:
            middle = abs(stop - time.monotonic() - seconds / 2) < seconds / 8
            lines = 2000 if middle else 300
            script = f"for i in $(seq {lines}); do echo GET /$i 200 >> {mnt}/web/0/append; done"
            subprocess.run(["bash", "-c", script], check=True)
            time.sleep(1)

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        i = 0
        while time.monotonic() < stop:
            for _ in range(200):
                producer.send("orders", value=b"order %d" % i, partition=i % 2)
                i += 1
            producer.flush()
            time.sleep(0.5)
        producer.close()

    def consume() -> None:
        consumer = KafkaConsumer(
            "orders", bootstrap_servers=bootstrap, group_id="billing",
            auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=150,
        )  # fmt: skip
        while time.monotonic() < stop:
            consumer.poll(timeout_ms=500)
            consumer.commit()
            time.sleep(0.8)  # slower than the producer: the lag grows
        consumer.close()

    def refused() -> None:
        host, port = bootstrap.rsplit(":", 1)
        while time.monotonic() < stop:
            with socket.create_connection((host, int(port))) as s:
                s.sendall(b"\x7f\xff\xff\xff")  # a frame size past the bound: closed
                with contextlib.suppress(OSError):
                    s.recv(1)
            time.sleep(2)

    threads = [threading.Thread(target=f) for f in (shell, produce, consume, refused)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def query_range(url: str, expr: str, start: float, end: float) -> list[dict]:
    params = {"query": expr, "start": start, "end": end, "step": 1}
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}") as a:
        reply = json.load(a)
    if reply["status"] != "success":
        raise RuntimeError(f"{expr}: {reply}")
    return reply["data"]["result"]


def legend(template: str, labels: dict) -> str:
    text = re.sub(r"\{\{(\w+)\}\}", lambda m: labels.get(m[1], ""), template)
    return " " + text if text.startswith("_") else text  # matplotlib hides "_" labels


def render(url: str, start: float, end: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = json.loads(DASHBOARD.read_text())["panels"]
    rows = (len(panels) + 2) // 3
    fig, axes = plt.subplots(rows, 3, figsize=(18, 3.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        for target in panel["targets"]:
            for series in query_range(url, target["expr"], start, end):
                times = [float(t) - start for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                ax.plot(times, values, label=legend(target["legendFormat"], series["metric"]))
        ax.set_title(panel["title"], fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.text(0.99, 0.98, panel["fieldConfig"]["defaults"]["unit"], transform=ax.transAxes,
                ha="right", va="top", fontsize=7, color="gray")  # fmt: skip
        ax.tick_params(labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="upper left")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    fig.suptitle(
        "logfs dashboard (docs/grafana/logfs-dashboard.json), each panel's PromQL asked of "
        "a real Prometheus scraping logfs -o metrics=, drawn with matplotlib",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(out, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--out", type=Path, default=DASHBOARD.with_suffix(".png"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="logfs-dashboard-") as name:
        tmp = Path(name)
        (tmp / "mnt").mkdir()
        log = tmp / "daemon.log"
        options = ("kafka=127.0.0.1:0", "metrics=127.0.0.1:0")
        with logfs_mount(tmp / "data", tmp / "mnt", log, *options):
            target = wait_for(r"serving metrics on http://(\S+)/metrics", log)
            bootstrap = wait_for(r"serving Kafka's protocol on (\S+)", log)
            with prometheus(tmp, target) as url:
                time.sleep(5)
                start = time.time()
                workload(tmp / "mnt", bootstrap, args.seconds)
                time.sleep(5)
                end = time.time()
                render(url, start, end, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
