"""logfs at the transport's floor: every data path beside a do-nothing file system
written in C on libfuse's low-level API (benchmarks/cnullfs.c, compiled by this
script), the pyfuse3 one (nullfs.py) and a plain file, side by side in one run.

The C write-through file system is the C null whose ``sink`` answers a write() only
once its bytes are appended to a file (cnullfs.c with COPY_TO): the floor of any file
system that answers a write() once what it was given is in a file, as logfs does.

Every figure runs its targets once per round in rotating order; the table gives
medians (range) and, for each daemon, its CPU per unit of work from
/proc/<pid>/stat (user + system, every thread: the machine's load moves it less
than the rates). Figures:

    line       one 100-byte line per write(): logfs (default mode), logfs -o acks=0,
               logfs -o io_uring (where the kernel has FUSE over io_uring: the run
               turns the fuse module's enable_uring on, and back), C null, C
               write-through, pyfuse3 null, plain file
    nginx      nginx's access_log, ab -k -c 16: the same targets
    append     cat of 100-byte lines into append (the nulls, C write-through: sink)
    bin        cat of 100-byte append.bin frames into append.bin: the same targets
    batches    16 KiB producer batches in 1 MiB write()s into append.batches
    stream     cat stream of those lines, again (the kernel holds them) and read first,
               vs cat of the plain file (and the nulls' source)
    segments   cat segments/*.log vs cat of the same files in DATA
    fetch      Kafka Fetch of 1 MiB per partition vs a null Kafka server (the same
               answers, nothing else done) and sendfile of the segment

Then the checks: each ratio the targets of docs/benchmarks.md name, against the goal and
against the figure recorded there (the table between the ``floor-checks`` marks). A
check that fell below its recorded figure by more than its noise band is flagged and
makes the command exit 1; ``--record`` writes this run's ratios as the new figures.
Below them, the bounds (`BOUNDS`): the C write-through file system against the C null,
the most a daemon that answers a write() only once its bytes are in a file reaches in
this run, beside the goals.

    python benchmarks/bench_floor.py [--rounds 3] [--lines 1000000] [--writes 20000]
        [--requests 20000] [--fetch-mib 128] [--only line,nginx,...] [--record]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_kafka  # noqa: E402
from bench_legacy import LINE_WRITER, Nginx, count_lines, timed  # noqa: E402
from figures import Figure  # noqa: E402
from mount_helpers import uring_switch  # noqa: E402  (tests/helpers: put on the path by mounts.py)
from mounts import CNullDaemon, NullDaemon, build_cnullfs, logfs_mount  # noqa: E402
from run import CHUNK_WRITER, make_batches, make_frames, make_lines, sh, sh_out  # noqa: E402

from logfs.core.client import mountinfo  # noqa: E402
from logfs.core.log import Store  # noqa: E402

DOCS = HERE.parent / "docs" / "benchmarks.md"
FIGURES = ("line", "nginx", "append", "bin", "batches", "stream", "segments", "fetch")
# (check, figure, numerator, denominator, goal or None); "cpu:" compares CPU per unit,
# the anchor's over logfs's, so that higher is better for every check.
CHECKS = (
    ("line: logfs / C null", "line", "logfs", "C null", 0.8),
    ("line CPU: C null / logfs", "cpu:line", "C null", "logfs", 0.8),
    ("line, acks=0: logfs / plain", "line", "logfs acks=0", "plain file", 0.8),
    ("line, io_uring: logfs / C null", "line", "logfs io_uring", "C null", 1.0),
    ("line CPU, io_uring: C null / logfs", "cpu:line", "C null", "logfs io_uring", None),
    ("line: logfs / C write-through", "line", "logfs", "C write-through", None),
    ("line CPU: C write-through / logfs", "cpu:line", "C write-through", "logfs", None),
    ("nginx: logfs / C null", "nginx", "logfs", "C null", 0.8),
    ("nginx, acks=0: logfs / plain", "nginx", "logfs acks=0", "plain file", 0.8),
    ("nginx, io_uring: logfs / C null", "nginx", "logfs io_uring", "C null", 1.0),
    ("nginx: logfs / C write-through", "nginx", "logfs", "C write-through", None),
    ("append: logfs / C null", "append", "logfs", "C null", 0.6),
    ("append CPU: C null / logfs", "cpu:append", "C null", "logfs", None),
    ("append: logfs / C write-through", "append", "logfs", "C write-through", None),
    ("append.bin: logfs / C null", "bin", "logfs", "C null", None),
    ("append.bin CPU: C null / logfs", "cpu:bin", "C null", "logfs", None),
    ("append.bin: logfs / C write-through", "bin", "logfs", "C write-through", None),
    ("batches: logfs / C null", "batches", "logfs", "C null", 0.5),
    ("batches CPU: C null / logfs", "cpu:batches", "C null", "logfs", None),
    ("batches: logfs / C write-through", "batches", "logfs", "C write-through", None),
    ("stream: logfs / plain", "stream", "logfs", "plain file", 0.5),
    ("stream, first read: logfs / plain", "stream", "logfs, first read", "plain file", None),
    ("stream CPU: C null / logfs", "cpu:stream", "C null", "logfs, first read", None),
    ("segments: logfs / plain", "segments", "logfs", "plain file", 0.9),
    ("fetch: logfs / sendfile", "fetch", "logfs", "sendfile", 0.8),
    ("fetch: null server / sendfile", "fetch", "null server", "sendfile", None),
    ("fetch: logfs / null server", "fetch", "logfs", "null server", None),
)

# The most a daemon reaches against the C null file system (check, figure, numerator,
# denominator, goal), whatever it does between a write()'s request and its answer,
# while a returned write() is in a file: the C write-through file system does nothing
# else. Printed beside the checks, so that a goal above the bound shows as such.
BOUNDS = (
    ("line: C write-through / C null", "line", "C write-through", "C null", 0.8),
    ("line CPU: C null / C write-through", "cpu:line", "C null", "C write-through", 0.8),
    ("nginx: C write-through / C null", "nginx", "C write-through", "C null", 0.8),
    ("append: C write-through / C null", "append", "C write-through", "C null", 0.6),
    ("batches: C write-through / C null", "batches", "C write-through", "C null", 0.5),
)


def bound_rows(figures: dict[str, Figure]) -> list[str]:
    """The table of `BOUNDS` for the figures of this run."""
    table = ["| bound: a write() answered once in a file | this run | goal | verdict |",
             "|---|---|---|---|"]  # fmt: skip
    for bound, figure, top, bottom, goal in BOUNDS:
        on_cpu, name = figure.startswith("cpu:"), figure.removeprefix("cpu:")
        if name not in figures:
            continue
        ratio = figures[name].median(top, on_cpu) / figures[name].median(bottom, on_cpu)
        verdict = "the goal is above the bound" if ratio < goal else ""
        table.append(f"| {bound} | {ratio:.2f} | {goal} | {verdict} |")
    return table


def recorded_checks(path: Path = DOCS) -> dict[str, tuple[float | None, float]]:
    """check -> (recorded ratio or None, noise band) from the ``floor-checks`` table."""
    text = path.read_text()
    block = text.split("<!-- floor-checks -->")[1].split("<!-- /floor-checks -->")[0]
    recorded = {}
    for line in block.splitlines()[3:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3:
            recorded[cells[0]] = (float(cells[1]) if cells[1] else None, float(cells[2]))
    return recorded


def check_rows(figures: dict[str, Figure], recorded) -> tuple[list[str], list[str], list[str]]:
    """The checks' table, the table to record, and the checks that fell."""
    table = ["| check | this run | recorded | band | goal | verdict |", "|---|---|---|---|---|---|"]
    keep = ["| check | recorded | band | goal |", "|---|---|---|---|"]
    fell = []
    for check, figure, top, bottom, goal in CHECKS:
        on_cpu, aim = figure.startswith("cpu:"), "" if goal is None else goal
        old, band = recorded.get(check, (None, 0.25))
        try:
            fig = figures[figure.removeprefix("cpu:")]
            ratio = fig.median(top, on_cpu) / fig.median(bottom, on_cpu)
        except KeyError:  # not measured in this run
            keep.append(f"| {check} | {old if old is not None else ''} | {band} | {aim} |")
            continue
        verdict = [] if goal is None else ["met" if ratio >= goal else "not met"]
        if old is not None and ratio < old * (1 - band):
            verdict.append(f"**fell** below {old * (1 - band):.2f}")
            fell.append(check)
        shown = f"{old:.2f}" if old is not None else "none"
        table.append(f"| {check} | {ratio:.2f} | {shown} | {band} | {aim} | {'; '.join(verdict)} |")
        keep.append(f"| {check} | {ratio:.2f} | {band} | {aim} |")
    return table, keep, fell


def record(keep: list[str], path: Path = DOCS) -> None:
    """The ``floor-checks`` table replaced by ``keep``; the rest of ``path`` as it was."""
    head, rest = path.read_text().split("<!-- floor-checks -->")
    tail = rest.split("<!-- /floor-checks -->")[1]
    path.write_text(
        f"{head}<!-- floor-checks -->\n" + "\n".join(keep) + f"\n<!-- /floor-checks -->{tail}"
    )


def fresh(path: Path) -> Path:
    """``path``, emptied (the plain-file targets start from nothing every run)."""
    path.unlink(missing_ok=True)
    path.touch()
    return path


def recycle(scratch: Path, size: int) -> None:
    """Write ``size`` bytes into ``scratch`` and delete it, so that the next run's
    writes go into memory just freed, whichever the target. Memory a guest of a
    virtual machine leaves free for a few seconds may go back to the host (free
    page reporting), and the next write into it pays the host's page fault: on
    this machine a file written into such memory grows at about 0.45 GB/s, into
    memory just freed at 5-6 GB/s (docs/benchmarks.md). The plain file's own runs
    free as much just before (`fresh`); logfs keeps what it is given."""
    block = b"\0" * (1 << 20)
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(0, size, len(block)):
            os.write(fd, block)
    finally:
        os.close(fd)
        scratch.unlink()


class Bench:
    """The mounted targets of one run: logfs in the default mode (``m1``, its data in
    ``d1``, its Kafka listener on), logfs with acks=0 (``m0``), the C null file
    system (``cn``) and the pyfuse3 one (``pn``); ``pids``, each daemon's."""

    def __init__(self, tmp: Path, args) -> None:
        self.tmp, self.args = tmp, args
        self.lines = tmp / "lines100"
        self.mb = self.lines.stat().st_size / 1e6
        self.d1, self.m1, self.m0, self.mu = tmp / "d1", tmp / "m1", tmp / "m0", tmp / "mu"
        self.cn, self.cw, self.pn = tmp / "cnull", tmp / "cwrite", tmp / "pynull"
        self.pids: dict[str, int] = {}

    def sinks(self, topic: str) -> dict[str, str]:
        """Where each file system takes writes: ``topic``'s partition 0, the sinks
        (the io_uring mount's where there is one)."""
        ring = (
            {"logfs io_uring": f"{self.mu}/{topic}/0/append"}
            if "logfs io_uring" in self.pids
            else {}
        )
        return {
            "logfs": f"{self.m1}/{topic}/0/append",
            "logfs acks=0": f"{self.m0}/{topic}/0/append",
            **ring,
            **self.nulls(),
        }

    def nulls(self) -> dict[str, str]:
        """The sinks of the file systems that are not logfs."""
        return {
            "C null": f"{self.cn}/sink",
            "C write-through": f"{self.cw}/sink",
            "pyfuse3 null": f"{self.pn}/sink",
        }

    def line(self) -> Figure:
        n = self.args.writes
        f = Figure("one 100-byte line per write()", "writes/s", n, "µs/write", 1e6)
        for name, sink in self.sinks("line").items():
            f.target(name, lambda s=sink: timed(LINE_WRITER, s, str(n)), self.pids[name])
        plain = self.tmp / "plain-line.out"
        f.target("plain file", lambda: timed(LINE_WRITER, str(fresh(plain)), str(n)))
        f.measure(self.args.rounds)
        expect(self.m1 / "line", self.args.rounds * n)
        return f

    def nginx(self) -> Figure:
        n = self.args.requests
        f = Figure("nginx access_log, ab -k -c 16", "req/s", n, "µs/request", 1e6)
        targets = {**self.sinks("web"), "plain file": str(self.tmp / "plain-access.log")}
        servers = {
            name: Nginx(self.tmp / f"nginx-{i}", path)
            for i, (name, path) in enumerate(targets.items())
        }
        with contextlib.ExitStack() as running:
            for server in servers.values():
                running.enter_context(server)
                server.ab(1000, 16)  # warm up: connections, the page cache
            for name, server in servers.items():
                f.target(name, lambda s=server: n / s.ab(n, 16), self.pids.get(name))
            f.measure(self.args.rounds)
        expect(self.m1 / "web", self.args.rounds * n + 1000)
        return f

    def append(self) -> Figure:
        lines = self.lines
        f = Figure(f"cat of {self.args.lines:,} 100-byte lines into append", "MB/s", self.mb,
                   "ms/MB", 1e3)  # fmt: skip
        targets = {"logfs": f"{self.m1}/t/0/append", **self.nulls()}
        for name, target in targets.items():
            f.target(name, lambda t=target: sh(f"cat {lines} > {t}"), self.pids[name])
        plain = self.tmp / "plain-append.out"
        f.target("plain file", lambda: sh(f"cat {lines} > {fresh(plain)}"))
        f.measure(self.args.rounds, lambda: recycle(self.tmp / "scratch", 2 * lines.stat().st_size))
        expect(self.m1 / "t", self.args.rounds * self.args.lines)
        return f

    def bin(self) -> Figure:
        path = self.tmp / "frames100"
        make_frames(path, self.args.lines, 100)
        f = Figure(f"cat of {self.args.lines:,} 100-byte frames into append.bin", "MB/s",
                   path.stat().st_size / 1e6, "ms/MB", 1e3)  # fmt: skip
        targets = {"logfs": f"{self.m1}/f/0/append.bin", **self.nulls()}
        for name, target in targets.items():
            f.target(name, lambda t=target: sh(f"cat {path} > {t}"), self.pids[name])
        plain = self.tmp / "plain-bin.out"
        f.target("plain file", lambda: sh(f"cat {path} > {fresh(plain)}"))
        f.measure(self.args.rounds, lambda: recycle(self.tmp / "scratch", 2 * path.stat().st_size))
        expect(self.m1 / "f", self.args.rounds * self.args.lines)
        return f

    def batches(self) -> Figure:
        path = self.tmp / "batches100"
        count, writes = make_batches(path, self.args.lines, 100)
        sizes = ",".join(map(str, writes))
        f = Figure(f"{count:,} 16 KiB batches into append.batches, 1 MiB write()s", "MB/s",
                   path.stat().st_size / 1e6, "ms/MB", 1e3)  # fmt: skip
        targets = {"logfs": f"{self.m1}/b/0/append.batches", **self.nulls()}
        for name, target in targets.items():
            f.target(
                name, lambda t=target: timed(CHUNK_WRITER, t, str(path), sizes), self.pids[name]
            )
        plain = self.tmp / "plain-batches.out"
        f.target("plain file", lambda: timed(CHUNK_WRITER, str(fresh(plain)), str(path), sizes))
        f.measure(self.args.rounds, lambda: recycle(self.tmp / "scratch", 2 * path.stat().st_size))
        records = json.loads(sh_out(f"cat {self.m1}/b/0/state"))["records"]
        if records != self.args.rounds * self.args.lines:
            raise RuntimeError(f"append.batches: {records} records, {self.args.rounds} x sent")
        return f

    def stream(self) -> Figure:
        """A re-read of the stream (the kernel holds its lines, as it holds the
        plain file's) and a first read (nothing held: every line decoded)."""
        f = Figure("cat stream of those lines", "MB/s", self.mb, "ms/MB", 1e3)
        stream = f"{self.m1}/r/0/stream"
        sources = {"logfs": stream, "C null": f"{self.cn}/source",
                   "pyfuse3 null": f"{self.pn}/source", "plain file": self.lines}  # fmt: skip
        for name, source in sources.items():
            f.target(name, lambda s=source: sh(f"cat {s} > /dev/null"), self.pids.get(name))
        f.target("logfs, first read", lambda: first_read(stream), self.pids["logfs"])
        held(stream)
        return f.measure(self.args.rounds)

    def segments(self) -> Figure:
        m1, d1 = self.m1, self.d1
        mb = sum(p.stat().st_size for p in (d1 / "r-0").glob("*.log")) / 1e6
        f = Figure("cat segments/*.log", "MB/s", mb, "ms/MB", 1e3)
        f.target(
            "logfs", lambda: sh(f"cat {m1}/r/0/segments/*.log > /dev/null"), self.pids["logfs"]
        )
        f.target("plain file", lambda: sh(f"cat {d1}/r-0/*.log > /dev/null"))
        return f.measure(self.args.rounds)


def measure(tmp: Path, args) -> dict[str, Figure]:
    """Build the C null file system, mount the file systems, run the figures
    ``args.only`` names; always unmounts."""
    make_lines(tmp / "lines100", args.lines, 100)
    bench = Bench(tmp, args)
    d0, du = tmp / "d0", tmp / "du"
    for d in (bench.d1, bench.m1, d0, bench.m0, du, bench.mu, bench.cn, bench.cw, bench.pn):
        d.mkdir()
    fetch_end = 0
    if "fetch" in args.only:
        bench_kafka.fill(bench.d1, "fetched", bench_kafka.one_batch(), args.fetch_mib << 20)
        with Store(bench.d1) as store:
            fetch_end = store.log("fetched", 0).next_offset
    program = build_cnullfs(tmp)
    size = bench.lines.stat().st_size
    figures: dict[str, Figure] = {}
    with contextlib.ExitStack() as stack:
        mounted = {
            "logfs": logfs_mount(bench.d1, bench.m1, tmp / "logfs.log", "kafka=127.0.0.1:0"),
            "logfs acks=0": logfs_mount(d0, bench.m0, tmp / "acks0.log", "acks=0"),
            "C null": CNullDaemon(program, bench.cn, tmp / "cnull.log", size),
            "C write-through": CNullDaemon(
                program, bench.cw, tmp / "cwrite.log", size, copy_to=tmp / "cwrite.out"
            ),
            "pyfuse3 null": NullDaemon(bench.pn, tmp / "pynull.log", size),
        }
        if {"line", "nginx"} & args.only and stack.enter_context(uring_switch(True)):
            mounted["logfs io_uring"] = logfs_mount(du, bench.mu, tmp / "uring.log", "io_uring")
        for name, daemon in mounted.items():
            bench.pids[name] = stack.enter_context(daemon).pid
        ring = [bench.mu] if "logfs io_uring" in mounted else []
        if ring and not mounted["logfs io_uring"].said("FUSE requests come over io_uring", 10):
            raise RuntimeError(f"logfs -o io_uring did not take the ring: see {tmp / 'uring.log'}")
        for m in (bench.m1, bench.m0, *ring):
            for topic in ("line", "web", "t", "f", "b", "r"):
                (m / topic).mkdir()
        for name in ("line", "nginx", "append", "bin", "batches"):
            if name in args.only:
                figures[name] = getattr(bench, name)()
        if {"stream", "segments"} & args.only:
            sh(f"cat {bench.lines} > {bench.m1}/r/0/append")
        for name in ("stream", "segments"):
            if name in args.only:
                figures[name] = getattr(bench, name)()
        if "fetch" in args.only:
            figures["fetch"] = measure_fetch(bench.d1, bench.pids["logfs"], fetch_end, args.rounds)
    return figures


def measure_fetch(data: Path, pid: int, end: int, rounds: int) -> Figure:
    """Fetch of the partition ``fetched`` to ``end`` through the listener vs a null
    server's answers and sendfile of its segment."""
    deadline = time.monotonic() + 30
    while (found := mountinfo.read_record(data)) is None or not found.kafka:
        if time.monotonic() > deadline:
            raise RuntimeError("the Kafka listener did not start")
        time.sleep(0.05)
    host, _, port = found.kafka.rpartition(":")
    address = (host, int(port))
    segment = next((data / "fetched-0").glob("*.log"))
    bench_kafka.fetch_all(address, "fetched", end)  # warm up: the page cache, the imports
    f = Figure("Kafka Fetch, 1 MiB per partition", "MiB/s", segment.stat().st_size / 2**20,
               "ms/MiB", 1e3)  # fmt: skip
    with bench_kafka.null_fetch_server(segment, "fetched") as (null, null_pid):
        f.target("logfs", lambda: timed_fn(bench_kafka.fetch_all, address, "fetched", end), pid)
        f.target(
            "null server", lambda: timed_fn(bench_kafka.fetch_all, null, "fetched", end), null_pid
        )
        f.target("sendfile", lambda: timed_fn(bench_kafka.sendfile_limit, segment))
        return f.measure(rounds)


def first_read(path: str) -> float:
    """Seconds of a ``cat`` of ``path`` once the kernel let go of what it held
    of it; it holds it again afterwards (`held`)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    seconds = sh(f"cat {path} > /dev/null")
    held(path)
    return seconds


def held(path: str) -> None:
    """Have the kernel hold ``path`` as it holds a file read again and again: a
    page read a second time moves to its active list, which costs that read."""
    for _ in range(2):
        sh(f"cat {path} > /dev/null")


def timed_fn(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def expect(partition_dir: Path, count: int) -> None:
    """Every line written is in the partition, once."""
    logged = count_lines(partition_dir / "0" / "stream")
    if logged != count:
        raise RuntimeError(f"{partition_dir}: {logged} records of {count}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lines", type=int, default=1_000_000, help="100-byte lines for cat")
    parser.add_argument("--writes", type=int, default=20_000, help="one-line write()s per run")
    parser.add_argument("--requests", type=int, default=20_000, help="nginx requests per run")
    parser.add_argument("--fetch-mib", type=int, default=128)
    parser.add_argument("--only", default=",".join(FIGURES))
    parser.add_argument("--record", action="store_true", help="write the ratios into the docs")
    args = parser.parse_args()
    args.only = set(args.only.split(","))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])
    )
    with tempfile.TemporaryDirectory(prefix="logfs-floor-", dir=Path.home()) as name:
        figures = measure(Path(name), args)
    print(f"\nlogfs at the transport's floor: {args.rounds} interleaved rounds, medians (range)")
    for figure in figures.values():
        print("\n" + "\n".join(figure.rows()))
    table, keep, fell = check_rows(figures, recorded_checks())
    print("\n" + "\n".join(table))
    if len(bounds := bound_rows(figures)) > 2:
        print("\n" + "\n".join(bounds))
    if args.record:
        record(keep)
        print(f"\nrecorded in {DOCS}")
    elif fell:
        print(f"\n{len(fell)} check(s) fell below the recorded figures: {', '.join(fell)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
