"""The benchmark suite: every scenario next to its baseline, one table.

Each scenario runs logfs and its baselines in the same rounds, interleaved (so
machine noise hits them alike), and reports medians: logfs's rate, each
baseline's, logfs as a fraction of the baseline, and records/s.

    append 100 B   cat FILE > MNT/t/0/append   vs  cat FILE > plain file (same disk)
                                                vs  cat FILE > a do-nothing FUSE fs (nullfs.py)
    append 1 KiB   the same with 1 KiB lines
    small writes   one write() per line from Python, same three targets
    batches        16 KiB RecordBatch v2 batches of 100 B values in 1 MiB write()s
                   to MNT/b/0/append.batches   vs  the same write()s to nullfs
                                               vs  nullfs writing them to a file
    stream read    cat MNT/r/0/stream > /dev/null  vs  cat of a plain file of the same lines
                                                   vs  cat of nullfs's source file of that size
    first stat     stat of a big stream right after mounting (its size is counted once)
    offset/<n>     open+read+close of random offset/<n> from a separate process
                                                   vs  the same on nullfs's source file
    partitions     N concurrent cat into N partitions (1, 10, 100) vs into N plain files
    legacy         nginx (ab), Python logging and one line per write() in both modes
                   (acks=1, acks=0) vs a plain file and nullfs (bench_legacy.py)
    lookup         in-process log.read(n) p50/p99 at growing sizes (bench_lookup.py)
    recovery       validation of a large active segment vs a plain read (bench_recovery.py)
    spark          (--spark) Spark batch read vs spark.read.text and a no-decoding Python
                   source (bench_spark.py), and
                   Spark writing beside a live mount vs unmounted (bench_spark_write.py)

    python benchmarks/run.py            scaled-down sizes: a few minutes
    python benchmarks/run.py --full     full sizes (1M-line files, lookup at 10M, ...)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_cleaner  # noqa: E402
import bench_legacy  # noqa: E402
import bench_lookup  # noqa: E402
import bench_recovery  # noqa: E402
from mounts import NullDaemon, logfs_mount  # noqa: E402

from logfs import Store  # noqa: E402
from logfs.core.format.record import encode_batch  # noqa: E402
from logfs.daemon import keep_freed_memory  # noqa: E402
from logfs.mount.files import BatchFramer, LineFramer  # noqa: E402
from logfs.mount.files.framing import frame  # noqa: E402

SMALL_WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
line = b"x" * 99 + b"\\n"
for _ in range(int(sys.argv[2])):
    os.write(fd, line)
os.close(fd)
"""
RANDOM_READER = """
import random, sys, time
base, count, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
paths = [base.replace("{}", str(rng.randrange(count))) for _ in range(n)]
t = time.perf_counter()
for path in paths:
    with open(path, "rb") as f:
        f.read()
print(time.perf_counter() - t)
"""
# Writes a file's bytes in write()s of the sizes given; prints the seconds of
# open + writes + close. Each write() comes from its own page-aligned buffer:
# with direct_io the kernel sends an unaligned 1 MiB write() as two requests
# (it spans 257 pages, max_write is 256), which would split a batch.
CHUNK_WRITER = """
import mmap, os, sys, time
target, source, sizes = sys.argv[1], sys.argv[2], map(int, sys.argv[3].split(","))
chunks = []
with open(source, "rb") as f:
    for size in sizes:
        chunk = mmap.mmap(-1, size)
        chunk[:] = f.read(size)
        chunks.append(chunk)
t = time.perf_counter()
fd = os.open(target, os.O_WRONLY)
for chunk in chunks:
    assert os.write(fd, chunk) == len(chunk)
os.close(fd)
print(time.perf_counter() - t)
"""
BATCH_BYTES = 16384  # the producer's default batch.size
WRITE_BYTES = 1 << 20  # max_write: the largest write() that reaches the daemon whole


def make_lines(path: Path, count: int, size: int) -> None:
    with open(path, "wb") as f:
        for start in range(0, count, 100_000):
            n = min(100_000, count - start)
            f.write(b"".join(b"%0*d\n" % (size - 1, i) for i in range(start, start + n)))


def make_frames(path: Path, count: int, size: int) -> None:
    """``count`` ``append.bin`` frames of ``size``-byte values into ``path``."""
    with open(path, "wb") as f:
        for start in range(0, count, 100_000):
            n = min(100_000, count - start)
            f.write(b"".join(frame(b"%0*d" % (size, i)) for i in range(start, start + n)))


def sh(script: str) -> float:
    t = time.perf_counter()
    subprocess.run(["bash", "-c", script], check=True)
    return time.perf_counter() - t


class Table:
    """Rows of: scenario, logfs, baseline, logfs/baseline, records/s."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, ...]] = []

    def add(self, *row: str) -> None:
        self.rows.append(row)
        print("  " + " | ".join(row), flush=True)

    def print(self) -> None:
        head = ("scenario", "logfs", "baseline", "logfs / baseline", "logfs records/s")
        widths = [max(len(r[i]) for r in [head, *self.rows]) for i in range(len(head))]
        line = "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"
        print("\n" + line)
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in self.rows:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def rounds_of(variants: dict, rounds: int) -> dict[str, float]:
    """Run each variant once per round, rotating the order; medians of seconds."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(variants[name]())
    return {name: statistics.median(t) for name, t in times.items()}


def rate(count: float, seconds: float, unit: str = "") -> str:
    per = count / seconds
    return f"{per / 1e6:.2f} M{unit}/s" if per >= 1e6 else f"{per / 1e3:.1f} k{unit}/s"


def bench_appends(table, tmp, mnt, null, args) -> None:
    plain = tmp / "plain.out"
    for label, path, count in (
        ("append 100 B lines (cat)", tmp / "lines100", args.lines),
        ("append 1 KiB lines (cat)", tmp / "lines1k", args.lines // 10),
    ):
        mb = path.stat().st_size / 1e6

        def to_plain(path=path):
            plain.unlink(missing_ok=True)
            return sh(f"cat {path} > {plain}")

        t = rounds_of(
            {
                "logfs": lambda path=path: sh(f"cat {path} > {mnt}/t/0/append"),
                "plain": to_plain,
                "null": lambda path=path: sh(f"cat {path} > {null}/sink"),
            },
            args.rounds,
        )
        add_three(table, label, t, mb, count)
        seconds = statistics.median(in_process_append(path, tmp) for _ in range(args.rounds))
        table.add(
            f"{label}, in-process ceiling",
            f"{mb / seconds:.0f} MB/s",
            "framing + append_packed, 1 MiB chunks, no FUSE",
            f"{seconds / t['logfs']:.2f}",
            rate(count, seconds) + " (no FUSE)",
        )
    writer = [sys.executable, "-c", SMALL_WRITER]
    n = args.small_writes

    def run_writer(target: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([*writer, target, str(n)], check=True)
        return time.perf_counter() - t0

    def small_plain():
        plain.unlink(missing_ok=True)
        return run_writer(str(plain))

    t = rounds_of(
        {
            "logfs": lambda: run_writer(f"{mnt}/t/0/append"),
            "plain": small_plain,
            "null": lambda: run_writer(f"{null}/sink"),
        },
        args.rounds,
    )
    add_three(table, "small writes (1 line per write())", t, n * 100 / 1e6, n)
    plain.unlink(missing_ok=True)


def in_process_append(path: Path, tmp: Path) -> float:
    """The mount's append work without FUSE: what bounds the mount's rate."""
    chunks = []
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            chunks.append(chunk)
    with tempfile.TemporaryDirectory(dir=tmp) as data, Store(data) as store:
        store.create_topic("t", 1)
        log = store.log("t", 0)
        framer = LineFramer(max_bytes=1 << 20)
        t0 = time.perf_counter()
        for chunk in chunks:
            packed, framer.pending = framer.feed(chunk)
            log.append_packed(packed.data, packed.lengths)
        return time.perf_counter() - t0


def make_batches(path: Path, count: int, size: int) -> tuple[int, list[int]]:
    """``count`` values of ``size`` bytes as uncompressed batches of at most
    BATCH_BYTES (base offset 0, as a producer builds them) into ``path``: the
    number of batches and the write() sizes, whole batches of up to WRITE_BYTES."""
    per_batch = 1  # a producer closes a batch when the next record would not fit
    while len(encode_batch(0, [b"x" * size] * (per_batch + 1))) <= BATCH_BYTES:
        per_batch += 1
    writes = [0]
    batches = 0
    with open(path, "wb") as f:
        for start in range(0, count, per_batch):
            n = min(per_batch, count - start)
            batch = encode_batch(0, [b"%0*d" % (size, i) for i in range(start, start + n)])
            f.write(batch)
            batches += 1
            if writes[-1] + len(batch) > WRITE_BYTES:
                writes.append(0)
            writes[-1] += len(batch)
    return batches, writes


def bench_batches(table, tmp, mnt, null, args) -> None:
    """Producer batches into ``append.batches`` vs the same write()s to nullfs."""
    path, count = tmp / "batches100", args.lines
    batches, writes = make_batches(path, count, 100)
    mb = path.stat().st_size / 1e6
    sizes = ",".join(map(str, writes))
    sh(f"mkdir -p {mnt}/b")

    def writer(target: str) -> float:
        cmd = [sys.executable, "-c", CHUNK_WRITER, target, str(path), sizes]
        return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    t = rounds_of(
        {
            "logfs": lambda: writer(f"{mnt}/b/0/append.batches"),
            "null": lambda: writer(f"{null}/sink"),
            "copy": lambda: writer(f"{null}/copy"),
        },
        args.rounds,
    )
    records = json.loads(sh_out(f"cat {mnt}/b/0/state"))["records"]
    if records != count * args.rounds:
        raise RuntimeError(f"append.batches holds {records} records, {count * args.rounds} sent")
    label = (
        f"append.batches ({batches:,} x {mb * 1e6 / batches / 1024:.0f} KiB batches, "
        f"{len(writes)} x 1 MiB write())"
    )
    table.add(
        label,
        f"{mb / t['logfs']:.0f} MB/s",
        f"null FUSE {mb / t['null']:.0f} MB/s, {rate(count, t['null'])} records",
        f"{t['null'] / t['logfs']:.2f}",
        rate(count, t["logfs"]),
    )
    table.add(
        "append.batches, floor: FUSE + one write() to a file",
        "",
        f"null FUSE writing to a file {mb / t['copy']:.0f} MB/s",
        f"{t['copy'] / t['logfs']:.2f}",
        rate(count, t["copy"]) + " (copy)",
    )
    seconds = statistics.median(in_process_batches(path, writes, tmp) for _ in range(args.rounds))
    table.add(
        "append.batches, in-process ceiling",
        f"{mb / seconds:.0f} MB/s",
        "BatchFramer + append_batches, same writes, no FUSE",
        f"{seconds / t['logfs']:.2f}",
        rate(count, seconds) + " (no FUSE)",
    )


def in_process_batches(path: Path, writes: list[int], tmp: Path) -> float:
    """The mount's work for ``append.batches`` without FUSE."""
    chunks = []
    with open(path, "rb") as f:
        for size in writes:
            chunks.append(f.read(size))
    with tempfile.TemporaryDirectory(dir=tmp) as data, Store(data) as store:
        store.create_topic("b", 1)
        log = store.log("b", 0)
        framer = BatchFramer(max_bytes=log.config.max_message_bytes)
        t0 = time.perf_counter()
        for chunk in chunks:
            framed, framer.pending = framer.feed(chunk)
            log.append_batches(framed.batches)
        return time.perf_counter() - t0


def add_three(table, label, t, mb, count) -> None:
    table.add(
        label,
        f"{mb / t['logfs']:.0f} MB/s",
        f"plain {mb / t['plain']:.0f} MB/s",
        f"{t['plain'] / t['logfs']:.2f}",
        rate(count, t["logfs"]),
    )
    table.add(
        f"{label}, transport limit",
        "",
        f"null FUSE {mb / t['null']:.0f} MB/s",
        f"{t['null'] / t['logfs']:.2f}",
        rate(count, t["null"]) + " (null)",
    )


def bench_reads(table, tmp, mnt, null, args) -> None:
    source = tmp / "lines100"
    sh(f"mkdir -p {mnt}/r && cat {source} > {mnt}/r/0/append")
    mb = source.stat().st_size / 1e6
    t = rounds_of(
        {
            "logfs": lambda: sh(f"cat {mnt}/r/0/stream > /dev/null"),
            "plain": lambda: sh(f"cat {source} > /dev/null"),
            "null": lambda: sh(f"cat {null}/source > /dev/null"),
        },
        args.rounds,
    )
    add_three(table, "stream read (cat stream)", t, mb, args.lines)
    reads = args.offset_reads

    def reader(pattern: str) -> float:
        cmd = [sys.executable, "-c", RANDOM_READER, pattern, str(args.lines), str(reads)]
        return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    t = rounds_of(
        {
            "logfs": lambda: reader(f"{mnt}/r/0/offset/{{}}"),
            "null": lambda: reader(f"{null}/records/{{}}"),
        },
        args.rounds,
    )
    table.add(
        "random offset/<n> open+read+close",
        rate(reads, t["logfs"], " reads"),
        f"null FUSE {rate(reads, t['null'], ' reads')}",
        f"{t['null'] / t['logfs']:.2f}",
        rate(reads, t["logfs"]),
    )


def bench_first_stat(table, tmp, data, mnt, daemon_log, args) -> None:
    """Remount, then time the first stat of the biggest stream (t/0)."""
    with logfs_mount(data, mnt, daemon_log):
        sh(f"cat {mnt}/t/0/state > /dev/null")  # resolves the path, so only the count is timed
        result = {}

        def first_stat():
            t0 = time.perf_counter()
            result["size"] = os.stat(mnt / "t" / "0" / "stream").st_size
            result["first"] = time.perf_counter() - t0

        counting = threading.Thread(target=first_stat)
        counting.start()
        time.sleep(0.02)
        t0 = time.perf_counter()
        os.stat(mnt / "t" / "0" / "state")  # another request while the stream is counted
        other = time.perf_counter() - t0
        counting.join()
        size, first = result["size"], result["first"]
        t0 = time.perf_counter()
        os.stat(mnt / "t" / "0" / "stream")
        second = time.perf_counter() - t0
        records = int(sh_out(f"cat {mnt}/t/0/state").split('"records": ')[1].split(",")[0])
    table.add(
        f"first stat of a stream after mount ({records:,} records, {size / 1e6:.0f} MB)",
        f"{first * 1000:.0f} ms",
        f"second stat {second * 1000:.1f} ms",
        f"stat of state meanwhile {other * 1000:.1f} ms",
        rate(records, first) + " counted",
    )


def sh_out(script: str) -> str:
    return subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout


def bench_partitions(table, tmp, mnt, args) -> None:
    for n in args.partitions:
        per = args.lines // n
        parts = tmp / f"parts{n}"
        parts.mkdir(exist_ok=True)
        make_lines(parts / "part", per, 100)
        sh(f"mkdir -p {mnt}/p{n} && mkdir -p {mnt}/p{n}/{max(0, n - 1)}")

        def logfs(n=n, parts=parts):
            return sh(
                " ".join(f"cat {parts}/part > {mnt}/p{n}/{i}/append &" for i in range(n)) + " wait"
            )

        def plain(n=n, parts=parts):
            sh(f"rm -f {parts}/out.*")
            return sh(" ".join(f"cat {parts}/part > {parts}/out.{i} &" for i in range(n)) + " wait")

        t = rounds_of({"logfs": logfs, "plain": plain}, args.rounds)
        mb = per * n * 100 / 1e6
        table.add(
            f"append over {n} partition(s) ({n} concurrent cat)",
            f"{mb / t['logfs']:.0f} MB/s",
            f"plain {mb / t['plain']:.0f} MB/s",
            f"{t['plain'] / t['logfs']:.2f}",
            rate(per * n, t["logfs"]),
        )
        sh(f"rm -rf {parts}")


def bench_core(table, args) -> None:
    samples = bench_lookup.measure(
        args.lookup_sizes, args.lookup_reads, args.rounds, lambda m: None
    )
    base = statistics.median(samples[args.lookup_sizes[0]])
    for size in args.lookup_sizes:
        p50 = statistics.median(samples[size])
        p99 = bench_lookup.percentile(samples[size], 0.99)
        table.add(
            f"in-process log.read(n), {size:,} records",
            f"p50 {p50:.0f} us, p99 {p99:.0f} us",
            f"p50 at {args.lookup_sizes[0]:,}: {base:.0f} us",
            f"{base / p50:.2f}",
            rate(1, p50 / 1e6) + " (one thread)",
        )
    records = args.clean_records
    mb, clean, copy = bench_cleaner.measure(records, records // 20, args.rounds)
    c, p = statistics.median(clean), statistics.median(copy)
    table.add(
        f"cleaning a compacted partition ({records:,} records, 1 in 20 kept)",
        f"{mb / c:.0f} MB/s",
        f"plain copy {mb / p:.0f} MB/s",
        f"{p / c:.3f}",
        rate(records, c),
    )
    mb, recover, read = bench_recovery.measure(args.recovery_mib, args.rounds)
    r, b = statistics.median(recover), statistics.median(read)
    table.add(
        f"recovery of a {mb:.0f} MB active segment",
        f"{mb / r:.0f} MB/s",
        f"plain read {mb / b:.0f} MB/s",
        f"{b / r:.2f}",
        rate(mb * 1e6 / 136, r),
    )


def bench_legacy_rows(table, tmp, args) -> None:
    """bench_legacy.py's table, smaller: its ratios in the baseline columns."""
    legacy = argparse.Namespace(
        rounds=args.rounds,
        requests=20_000 if args.full else 5_000,
        concurrency=16,
        records=200_000 if args.full else 50_000,
        lines=args.small_writes,
        only={"nginx", "logging", "line"},
    )
    (tmp / "legacy").mkdir()
    section = ""
    for label, value, of_plain, of_null, *_ in bench_legacy.measure(tmp / "legacy", legacy):
        if not label.startswith(" "):  # a section's head: its unit
            section, unit = label, value
            continue
        value = f"{value} {unit}"
        label = f"{section}: {label.strip()}"
        ratio = ", ".join(
            filter(None, [of_plain and f"plain {of_plain}", of_null and f"null {of_null}"])
        )
        table.add(f"legacy {label}", value, "", ratio, "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full sizes (slower)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also Spark (slow)")
    parser.add_argument(
        "--only",
        default="",
        help="comma list: append,batches,read,stat,partitions,legacy,core",
    )
    args = parser.parse_args()
    keep_freed_memory()  # as the daemon does, for the in-process figures
    # The daemons run `python -m logfs.cli`: this checkout's, from any directory.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])
    )
    full = args.full
    args.lines = 1_000_000 if full else 500_000
    args.small_writes = 100_000 if full else 20_000
    args.offset_reads = 20_000 if full else 5_000
    args.partitions = [1, 10, 100]
    args.lookup_sizes = [100_000, 1_000_000, 10_000_000] if full else [100_000, 1_000_000]
    args.lookup_reads = 20_000 if full else 6_000
    args.recovery_mib = 512 if full else 128
    args.clean_records = 1_000_000 if full else 200_000
    only = set(filter(None, args.only.split(","))) or {
        "append",
        "batches",
        "read",
        "stat",
        "partitions",
        "legacy",
        "core",
    }
    table = Table()
    random.seed(1)
    with tempfile.TemporaryDirectory(prefix="logfs-run-") as name:
        tmp = Path(name)
        data, mnt, null = tmp / "data", tmp / "mnt", tmp / "null"
        for d in (data, mnt, null):
            d.mkdir()
        make_lines(tmp / "lines100", args.lines, 100)
        make_lines(tmp / "lines1k", args.lines // 10, 1024)
        print(f"logfs benchmark suite: {args.rounds} interleaved rounds, medians", flush=True)
        fuse = {"append", "batches", "read", "partitions"} & only
        if fuse:
            size = (tmp / "lines100").stat().st_size
            with (
                logfs_mount(data, mnt, tmp / "logfs.log"),
                NullDaemon(null, tmp / "null.log", size, copy_to=tmp / "null-copy.out"),
            ):
                sh(f"mkdir {mnt}/t")
                if "append" in only:
                    bench_appends(table, tmp, mnt, null, args)
                if "batches" in only:
                    bench_batches(table, tmp, mnt, null, args)
                if "read" in only:
                    bench_reads(table, tmp, mnt, null, args)
                if "partitions" in only:
                    bench_partitions(table, tmp, mnt, args)
        if "stat" in only:
            if not (data / "t-0").exists():
                with logfs_mount(data, mnt, tmp / "logfs.log"):
                    sh(f"mkdir {mnt}/t && cat {tmp}/lines100 > {mnt}/t/0/append")
            bench_first_stat(table, tmp, data, mnt, tmp / "logfs.log", args)
        if "legacy" in only:
            bench_legacy_rows(table, tmp, args)
        if "core" in only:
            bench_core(table, args)
    table.print()
    if args.spark:
        records = 2_000_000 if full else 500_000
        for script in ("bench_spark.py", "bench_spark_write.py"):
            subprocess.run(
                [sys.executable, str(HERE / script), "--records", str(records),
                 "--rounds", str(args.rounds)],
                check=True,
            )  # fmt: skip


if __name__ == "__main__":
    main()
