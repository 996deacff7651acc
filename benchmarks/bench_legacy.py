"""Writers that write a line at a time: nginx, Python ``logging``, one line per ``write()``.

Every target in the same interleaved rounds, medians, one table of ratios:

    nginx          1 worker, ``access_log`` to a file, a static page, driven by
                   ``ab -k -c 16`` over loopback; the access log off, on a plain
                   file, on the do-nothing FUSE file system (nullfs.py's sink),
                   on ``MNT/<t>/0/append`` in the default mode (acks=1) and in
                   the buffered mode (acks=0), and on nullfs with the writeback
                   cache and no extended attributes ("null, writeback": what the
                   buffered mode would reach without the kernel's per-write()
                   security.capability lookup)
    logging        a ``logging.FileHandler`` writing 200,000 records: a plain file,
                   logfs acks=1 and acks=0, "null, writeback"
    one line       one 100-byte ``write()`` per line from Python: a plain file,
                   nullfs, logfs acks=1 and acks=0, "null, writeback"; and the
                   daemon CPU time per write() of logfs acks=1 and nullfs

With ``--baseline CHECKOUT`` another checkout of logfs (built, with its own
``.venv``) is mounted beside this one in the default mode and is one more target
of every scenario, "baseline": before and after a change measured side by side
in the same rounds, with a column of each target's rate over the baseline's and,
for one line per write(), the baseline daemon's CPU per write() too.

With ``--metrics`` one more mount in the default mode serves ``-o metrics=`` and is
scraped every second for the whole run, as Prometheus would: for one line per
write(), "acks=1, metrics" is one more target, with a column of each rate over
acks=1's (the cost of the FUSE request histograms and the append counters).

After the rounds every request and record is checked to be in the log exactly
once (the buffered mount's files are closed, so everything has reached it).

    python benchmarks/bench_legacy.py [--rounds 5] [--requests 20000] [--records 200000]
        [--only nginx,logging,line] [--baseline /path/to/other/checkout] [--metrics]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from mounts import CheckoutDaemon, NullDaemon, logfs_mount  # noqa: E402

LOGGING_WRITER = """
import logging, sys, time
handler = logging.FileHandler(sys.argv[1])
handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
logger = logging.getLogger("bench")
logger.addHandler(handler)
logger.setLevel(logging.INFO)
logger.propagate = False
t = time.perf_counter()
for i in range(int(sys.argv[2])):
    logger.info("request %d served in %d us", i, i % 997)
handler.close()
print(time.perf_counter() - t)
"""
LINE_WRITER = """
import os, sys, time
line = b"x" * 99 + b"\\n"
t = time.perf_counter()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for _ in range(int(sys.argv[2])):
    os.write(fd, line)
os.close(fd)
print(time.perf_counter() - t)
"""
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """One nginx (1 worker, a static page) logging every request to ``access_log``
    (None: no access log)."""

    def __init__(self, root: Path, access_log: str | None) -> None:
        self.root = root
        self.port = free_port()
        root.mkdir(parents=True)
        (root / "www").mkdir()
        (root / "www" / "index.html").write_text("hello\n")
        temp = "\n".join(
            f"    {kind}_temp_path {root}/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        log = f"access_log {access_log};" if access_log else "access_log off;"
        (root / "nginx.conf").write_text(
            f"""user root root;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
{temp}
    {log}
    server {{ listen 127.0.0.1:{self.port}; root {root}/www; }}
}}
"""
        )
        self.run = [NGINX, "-p", str(root), "-c", str(root / "nginx.conf")]

    def __enter__(self) -> Nginx:
        subprocess.run(self.run, check=True, capture_output=True)
        return self

    def __exit__(self, *exc) -> None:
        master = int((self.root / "nginx.pid").read_text())
        subprocess.run([*self.run, "-s", "quit"], capture_output=True)
        deadline = time.monotonic() + 20
        while os.path.exists(f"/proc/{master}") and time.monotonic() < deadline:
            time.sleep(0.05)
        if os.path.exists(f"/proc/{master}"):
            os.kill(master, 9)

    def ab(self, requests: int, concurrency: int) -> float:
        """Requests per second ``ab -k`` reaches."""
        url = f"http://127.0.0.1:{self.port}/index.html"
        out = subprocess.run(
            ["ab", "-q", "-k", "-n", str(requests), "-c", str(concurrency), url],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
        if failed:
            raise RuntimeError(f"ab: {failed} failed requests\n{out}")
        return float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))


def rounds_of(variants: dict, rounds: int) -> dict[str, list[float]]:
    """Each variant once per round, the order rotating; every round's value."""
    values: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            values[name].append(variants[name]())
    return values


def timed(script: str, *args: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", script, *args], check=True, capture_output=True, text=True
    )
    return float(out.stdout)


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def spread(values: list[float]) -> str:
    return f"{min(values):,.0f}–{max(values):,.0f}"


def measure(tmp: Path, args) -> list[tuple[str, str, str, str]]:
    """Mount logfs in both modes and nullfs under ``tmp``, run the scenarios
    ``args.only`` names, and return the table's rows."""
    rows: list[tuple[str, ...]] = []
    for d in ("d1", "m1", "d0", "m0", "null", "nullwb", "db", "mb", "dm", "mm"):
        (tmp / d).mkdir()
    m1, m0, null, nullwb = tmp / "m1", tmp / "m0", tmp / "null", tmp / "nullwb"
    baseline = getattr(args, "baseline", None)
    mb = tmp / "mb" if baseline else None
    with contextlib.ExitStack() as stack:
        acks1 = stack.enter_context(logfs_mount(tmp / "d1", m1, tmp / "acks1.log"))
        acks0 = stack.enter_context(logfs_mount(tmp / "d0", m0, tmp / "acks0.log", "acks=0"))
        nullfs = stack.enter_context(NullDaemon(null, tmp / "null.log", 0))
        stack.enter_context(NullDaemon(nullwb, tmp / "nullwb.log", 0, writeback=True))
        pids = {"acks=1": acks1.pid, "acks=0": acks0.pid, "null": nullfs.proc.pid}
        if mb is not None:
            other = CheckoutDaemon(baseline, tmp / "db", mb, log=tmp / "baseline.log")
            pids["baseline"] = stack.enter_context(other).pid
        mm = None
        if getattr(args, "metrics", False):
            mm = tmp / "mm"
            log = tmp / "metrics.log"
            scraped = stack.enter_context(logfs_mount(tmp / "dm", mm, log, "metrics=127.0.0.1:0"))
            pids["acks=1, metrics"] = scraped.pid
            stack.enter_context(Scraper(log))
        for m in filter(None, (m1, m0, mb, mm)):
            for topic in ("web", "app", "line"):
                (m / topic).mkdir()
        if "nginx" in args.only:
            rows += bench_nginx(tmp, m1, m0, null, nullwb, args, mb)
        if "logging" in args.only:
            rows += bench_logging(tmp, m1, m0, nullwb, args, mb)
        if "line" in args.only:
            rows += bench_line(tmp, m1, m0, null, nullwb, args, pids, mb, mm)
    return rows


class Scraper:
    """GET /metrics every second from the daemon whose log says where it serves them."""

    def __init__(self, log: Path) -> None:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"serving metrics on (http://\S+)", log.read_text())):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no metrics address in {log}")
            time.sleep(0.05)
        self.url = found[1]
        self.stopped = threading.Event()
        self.scrapes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(1.0):
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                answer.read()
            self.scrapes += 1

    def __enter__(self) -> Scraper:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join()
        print(f"metrics: {self.scrapes} scrapes of {self.url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20_000, help="per nginx run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--records", type=int, default=200_000, help="per logging run")
    parser.add_argument("--lines", type=int, default=20_000, help="per one-line-write() run")
    parser.add_argument("--only", default="nginx,logging,line")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another logfs checkout (with its .venv) mounted beside this one as a target",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="one more default-mode mount with -o metrics=, scraped every second",
    )
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])
    )
    with tempfile.TemporaryDirectory(prefix="logfs-legacy-") as name:
        rows = measure(Path(name), args)
    columns = max(len(r) for r in rows)
    rows = [r + ("",) * (columns - len(r)) for r in rows]
    width = [max(len(r[i]) for r in rows) for i in range(columns)]
    print(f"legacy writers: {args.rounds} interleaved rounds, medians (range)")
    if args.baseline:
        print(f"baseline: {args.baseline} ({describe_checkout(args.baseline)})")
        print(f"this: {HERE.parent} ({describe_checkout(HERE.parent)})")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, width, strict=True)) + " |")


def describe_checkout(path: Path) -> str:
    """The commit a checkout is at, and whether its tree has changes."""
    done = subprocess.run(
        ["git", "-C", str(path), "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return done.stdout.strip() or "not a git checkout"


def bench_nginx(
    tmp: Path, m1: Path, m0: Path, null: Path, nullwb: Path, args, mb: Path | None = None
) -> list:
    targets = {
        "off": None,
        "plain": str(tmp / "plain-access.log"),
        "null": f"{null}/sink",
        "acks=1": f"{m1}/web/0/append",
        "acks=0": f"{m0}/web/0/append",
        "null, writeback": f"{nullwb}/sink",
    }
    if mb is not None:
        targets["baseline"] = f"{mb}/web/0/append"
    servers = {
        name: Nginx(tmp / f"nginx-{i}", path) for i, (name, path) in enumerate(targets.items())
    }
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            stack.enter_context(server)
        for server in servers.values():  # warm up: connections, the page cache
            server.ab(1000, args.concurrency)
        rates = rounds_of(
            {
                name: lambda s=server: s.ab(args.requests, args.concurrency)
                for name, server in servers.items()
            },
            args.rounds,
        )
    served = (args.rounds * args.requests) + 1000
    for m in filter(None, (m1, m0, mb)):
        logged = count_lines(m / "web" / "0" / "stream")
        if logged != served:
            raise RuntimeError(f"{m}: {logged} requests logged of {served}")
    return _ratio_rows("nginx access_log", "req/s", rates)


def bench_logging(
    tmp: Path, m1: Path, m0: Path, nullwb: Path, args, mb: Path | None = None
) -> list:
    plain = tmp / "plain-app.log"

    def to_plain() -> float:
        plain.unlink(missing_ok=True)
        return timed(LOGGING_WRITER, str(plain), str(args.records))

    targets = {
        "plain": to_plain,
        "acks=1": lambda: timed(LOGGING_WRITER, f"{m1}/app/0/append", str(args.records)),
        "acks=0": lambda: timed(LOGGING_WRITER, f"{m0}/app/0/append", str(args.records)),
        "null, writeback": lambda: timed(LOGGING_WRITER, f"{nullwb}/sink", str(args.records)),
    }
    if mb is not None:
        targets["baseline"] = lambda: timed(LOGGING_WRITER, f"{mb}/app/0/append", str(args.records))
    seconds = rounds_of(targets, args.rounds)
    for m in filter(None, (m1, m0, mb)):
        logged = count_lines(m / "app" / "0" / "stream")
        if logged != args.rounds * args.records:
            raise RuntimeError(f"{m}: {logged} records of {args.rounds * args.records}")
    return _rate_rows("Python logging (FileHandler)", "records/s", seconds, args.records)


def bench_line(
    tmp: Path,
    m1: Path,
    m0: Path,
    null: Path,
    nullwb: Path,
    args,
    pids: dict[str, int],
    mb: Path | None = None,
    mm: Path | None = None,
) -> list:
    """Also the daemon CPU time per write() of logfs and nullfs (and the
    baseline): what a request costs the daemon, apart from the wakeups and the
    machine's noise (for acks=0 including the write-backs, within the timed
    close())."""
    plain = tmp / "plain-line.out"
    cpu: dict[str, list[float]] = {name: [] for name in pids}

    def to_plain() -> float:
        plain.unlink(missing_ok=True)
        return timed(LINE_WRITER, str(plain), str(args.lines))

    def with_cpu(name: str, path: str) -> float:
        before = cpu_seconds(pids[name])
        seconds = timed(LINE_WRITER, path, str(args.lines))
        cpu[name].append((cpu_seconds(pids[name]) - before) / args.lines * 1e6)
        return seconds

    targets = {
        "plain": to_plain,
        "null": lambda: with_cpu("null", f"{null}/sink"),
        "acks=1": lambda: with_cpu("acks=1", f"{m1}/line/0/append"),
        "acks=0": lambda: with_cpu("acks=0", f"{m0}/line/0/append"),
        "null, writeback": lambda: timed(LINE_WRITER, f"{nullwb}/sink", str(args.lines)),
    }
    if mb is not None:
        targets["baseline"] = lambda: with_cpu("baseline", f"{mb}/line/0/append")
    if mm is not None:
        targets["acks=1, metrics"] = lambda: with_cpu("acks=1, metrics", f"{mm}/line/0/append")
    seconds = rounds_of(targets, args.rounds)
    for m in filter(None, (m1, mb, mm)):
        logged = count_lines(m / "line" / "0" / "stream")
        if logged != args.rounds * args.lines:
            raise RuntimeError(f"{m}: {logged} lines of {args.rounds * args.lines}")
    rows = _rate_rows("one line per write()", "writes/s", seconds, args.lines)
    head = ("daemon CPU per write()", "µs", "", "", "of baseline" if mb else "")
    rows.append(head + (("of acks=1",) if mm is not None else ()))
    med = {name: statistics.median(values) for name, values in cpu.items()}
    for name, values in cpu.items():
        of_baseline = f"{med[name] / med['baseline']:.2f}" if mb is not None else ""
        row = (f"  {name}", f"{med[name]:.1f} ({min(values):.1f}–{max(values):.1f})", "", "",
               of_baseline)  # fmt: skip
        if mm is not None:
            row += (f"{med[name] / med['acks=1']:.2f}",)
        rows.append(row)
    return rows


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rate_rows(label: str, unit: str, seconds: dict[str, list[float]], count: int) -> list:
    return _ratio_rows(label, unit, {name: [count / s for s in v] for name, v in seconds.items()})


def _ratio_rows(label: str, unit: str, rates: dict[str, list[float]]) -> list:
    """A section's rows: each target's median rate (range) and its ratios to the
    plain file, to nullfs and to the baseline checkout, where they were measured."""
    med = {name: statistics.median(v) for name, v in rates.items()}
    heads = {"plain": "of plain file", "null": "of null FUSE", "baseline": "of baseline"}
    heads["acks=1"] = "of acks=1"
    columns = ["plain", "null"] + (["baseline"] if "baseline" in med else [])
    columns += ["acks=1"] if "acks=1, metrics" in med else []
    rows = [(label, unit, *(heads[c] if c in med else "" for c in columns))]
    for name, values in rates.items():
        ratios = (f"{med[name] / med[c]:.2f}" if c in med else "" for c in columns)
        rows.append((f"  {name}", f"{med[name]:,.0f} ({spread(values)})", *ratios))
    return rows


if __name__ == "__main__":
    main()
