"""A Spark pipeline on a real local[2] SparkSession beside a real, live logfs mount.

A shell loop appends clicks through the mount while a streaming query, stopped and
restarted from its checkpoint, turns them into another topic of the same data directory;
a batch job writes an aggregate while the mount is live; and a daemon SIGKILLed under a
large Spark write leaves a directory that ``logfs check`` and kafka-python's independent
decoder both read to the end. Spark's writes reach DATA through the mount (the sink's
producer finds it by DATA/logfs-mount.json): the daemon holds DATA's lock throughout and
the sink is given ``lockTimeout=1``, so a write that fell back to the store would fail.
"""

from __future__ import annotations

import collections
import fcntl
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from mount_helpers import LOGFS, Daemon, force_unmount, sh, wait_live, wait_unmounted
from pyspark.sql import functions as F

from logfs import Store

pytestmark = [pytest.mark.spark, pytest.mark.mount, pytest.mark.timeout(240)]

# The shell writer: bursts of ten unique lines, alternating partitions, until told to stop
# (or a cap, so a test that dies early cannot leave it running for long). POSIX sh.
WRITER = r"""
i=0
while [ ! -e "$STOP" ] && [ "$i" -lt 40000 ]; do
    printf 'click-%d\n' $(seq "$i" $((i + 9))) >> "$MNT/clicks/$(( (i / 10) % 2 ))/append" || exit 1
    i=$((i + 10))
    sleep 0.02
done
echo "$i" > "$DONE"
"""


@pytest.fixture
def live(tmp_path):
    """A live mount of tmp_path/data on tmp_path/mnt (topics made by mkdir get 2 partitions);
    unmounted whatever happens."""
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "partitions=2") as daemon:
        assert wait_live(data) == str(mnt)
        yield data, mnt, daemon


def unmount(daemon: Daemon) -> None:
    """A clean shutdown: SIGTERM, exit status 0, gone from the mount table."""
    status = daemon.terminate()
    assert status == 0, daemon.output()
    assert wait_unmounted(daemon.mountpoint)


def scan(data: Path, topic: str) -> list[tuple[int, int, bytes]]:
    """``(partition, offset, value)`` of every record of ``topic``, read-only."""
    with Store(data, read_only=True) as store:
        if topic not in store.topics():
            return []
        return [
            (p, r.offset, r.value)
            for p in store.partitions(topic)
            for r in store.log(topic, p).scan()
        ]


def check_offline(data: Path) -> dict[str, list[bytes]]:
    """`logfs check DATA` exits 0, and kafka-python decodes every .log file of DATA to its
    last byte: every batch's CRC valid, every record readable, offsets contiguous from 0
    (nothing here is compacted or expired). Returns the values per ``topic-partition``."""
    done = subprocess.run([*LOGFS, "check", str(data)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    decoded = {}
    for directory in sorted(
        p for p in data.iterdir() if p.is_dir() and re.search(r"-\d+$", p.name)
    ):
        values, expected = [], 0
        for path in sorted(directory.glob("*.log")):
            memory = MemoryRecords(path.read_bytes())
            while memory.has_next():
                batch = memory.next_batch()
                assert batch.validate_crc(), f"{path}: batch at offset {batch.base_offset}"
                assert batch.base_offset == expected, path
                records = list(batch)  # raises on a record that does not decode
                assert [r.offset for r in records] == list(range(expected, batch.next_offset))
                values += [r.value for r in records]
                expected = batch.next_offset
            assert memory.valid_bytes() == memory.size_in_bytes(), f"{path}: a torn tail"
        decoded[directory.name] = values
    return decoded


def enrich(df):
    """The transform: the click upper-cased, tagged with where it came from."""
    return df.select(
        "key",
        F.concat(
            F.upper(F.col("value").cast("string")),
            F.lit("@"),
            F.col("partition").cast("string"),
            F.lit(":"),
            F.col("offset").cast("string"),
        ).alias("value"),
    )


def test_shell_appends_streamed_to_another_topic_across_restarts(spark, live, tmp_path):
    data, mnt, daemon = live
    checkpoint, stop, done = tmp_path / "checkpoint", tmp_path / "stop", tmp_path / "done"
    sh(f"mkdir {mnt}/clicks")  # `enriched` is created by the sink, through the mount
    writer = subprocess.Popen(
        ["sh", "-c", WRITER],
        env={**os.environ, "MNT": str(mnt), "STOP": str(stop), "DONE": str(done)},
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )

    def start(trigger: dict):
        return (
            enrich(
                spark.readStream.format("logfs")
                .options(path=str(data), subscribe="clicks", startingOffsets="earliest")
                .load()
            )
            .writeStream.format("logfs")
            .options(path=str(data), topic="enriched", lockTimeout="1")
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )

    def run_until_caught_up() -> None:
        query = start({"availableNow": True})
        assert query.awaitTermination(90), "an availableNow run did not finish"
        assert query.exception() is None

    try:
        deadline = time.monotonic() + 30
        while len(scan(data, "clicks")) < 50:
            assert writer.poll() is None, f"the writer exited with {writer.returncode}"
            assert time.monotonic() < deadline, "the shell writer appends nothing"
            time.sleep(0.1)
        query = start({"processingTime": "500 milliseconds"})
        deadline = time.monotonic() + 60
        while not scan(data, "enriched"):  # the first Python-source query starts slowly
            assert query.exception() is None and query.isActive
            assert time.monotonic() < deadline, "the first run wrote nothing"
            time.sleep(0.1)
        time.sleep(1.5)
        query.stop()  # possibly in the middle of a micro-batch
        assert query.exception() is None
        run_until_caught_up()  # restarted from the checkpoint, the writer still appending
        assert writer.poll() is None, "the writer stopped before the restarted run ended"
    finally:
        stop.touch()
        try:
            writer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0
    run_until_caught_up()  # everything appended is now in `enriched`

    appended = int(done.read_text())
    clicks = scan(data, "clicks")
    assert len(clicks) > 100  # not vacuous
    # The mount kept every shell line, exactly once, and the shell reads them back.
    assert sorted(v for _, _, v in clicks) == sorted(b"click-%d" % i for i in range(appended))
    for p in (0, 1):
        streamed = sh(f"cat {mnt}/clicks/{p}/stream").stdout.encode().splitlines()
        assert streamed == [v for q, _, v in clicks if q == p]

    expected = {b"%s@%d:%d" % (v.upper(), p, o) for p, o, v in clicks}
    enriched = [v for _, _, v in scan(data, "enriched")]
    torn = [v for v in enriched if v not in expected]
    assert not torn, torn[:5]  # every record is exactly the transform of a click
    assert set(enriched) == expected  # every click reflected at least once
    duplicates = len(enriched) - len(set(enriched))
    print(f"{len(clicks)} clicks, {len(enriched)} enriched ({duplicates} again)", file=sys.stderr)

    unmount(daemon)
    decoded = check_offline(data)
    assert sorted(decoded["enriched-0"] + decoded["enriched-1"]) == sorted(enriched)


def test_batch_aggregate_written_while_mounted(spark, live):
    data, mnt, daemon = live
    fruit = ["apple", "banana", "cherry", "apple", "date", "apple", "banana"]
    lines = [f"{name}-{i}" for i, name in enumerate(fruit * 5)]
    sh(f"mkdir {mnt}/words")
    for p in (0, 1):
        text = "".join(f"{line}\n" for line in lines[p::2])
        sh(f"cat >> {mnt}/words/{p}/append", input=text)
    counts = collections.Counter(line.split("-")[0] for line in lines)

    words = spark.read.format("logfs").options(path=str(data), subscribe="words").load()
    aggregate = (
        words.select(F.split(F.col("value").cast("string"), "-")[0].alias("prefix"))
        .groupBy("prefix")
        .count()
        .select(
            F.col("prefix").alias("key"),
            F.concat_ws("=", "prefix", F.col("count").cast("string")).alias("value"),
        )
    )
    aggregate.write.format("logfs").option("path", str(data)).option("topic", "counts").option(
        "lockTimeout", "1"
    ).mode("append").save()

    expected = {f"{name}={n}" for name, n in counts.items()}
    # Through Spark.
    table = spark.read.format("logfs").options(path=str(data), subscribe="counts").load()
    assert {(r.key.decode(), r.value.decode()) for r in table.collect()} == {
        (e.split("=")[0], e) for e in expected
    }
    # Through the mount, with shell tools: each partition's stream, and its first record.
    partitions = sorted({p for p, _, _ in scan(data, "counts")})
    streamed = []
    for p in partitions:
        lines_p = sh(f"cat {mnt}/counts/{p}/stream").stdout.splitlines()
        assert sh(f"cat {mnt}/counts/{p}/offset/0").stdout == lines_p[0]
        streamed += lines_p
    assert sorted(streamed) == sorted(expected)

    unmount(daemon)
    check_offline(data)


def wait_for_lock(data: Path, timeout: float = 60) -> None:
    """Until no process holds DATA's writer lock (a task that fell back to the store once
    the daemon was gone may still be flushing): the next daemon needs it."""
    fd = os.open(data / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{data}/.lock still held"
                time.sleep(0.05)
    finally:
        os.close(fd)  # releases the lock


def test_daemon_sigkilled_during_a_spark_write(spark, live):
    data, mnt, daemon = live
    rows = 2_000_000
    sh(f"mkdir {mnt}/big")
    segments = [data / f"big-{p}" / f"{0:020d}.log" for p in (0, 1)]
    killed: list[int] = []  # segment bytes when the daemon was killed
    finished, hung = threading.Event(), threading.Event()

    # Spark finds format("logfs") only from the thread that owns the session, so the write
    # runs here and the killer, which also bounds the write's time, in a thread.
    def kill_once_writing() -> None:
        deadline = time.monotonic() + 120
        while not any(s.exists() and s.stat().st_size for s in segments):
            if finished.is_set() or time.monotonic() > deadline:
                return
            time.sleep(0.001)
        daemon.kill()
        killed.append(sum(s.stat().st_size for s in segments if s.exists()))
        if not finished.wait(timeout=90):
            hung.set()
            spark.sparkContext.cancelAllJobs()

    killer = threading.Thread(target=kill_once_writing, daemon=True)
    killer.start()
    error = None
    try:
        spark.range(rows, numPartitions=2).selectExpr("cast(id as string) as value").write.format(
            "logfs"
        ).options(path=str(data), topic="big").mode("append").save()
    except Exception as e:  # noqa: BLE001 - inspected below
        error = str(e)
    finally:
        finished.set()
        killer.join(timeout=30)
    assert not hung.is_set(), "the Spark write hung after the daemon was killed"
    assert killed, f"no record of the write reached the mount: {error}"
    if error is not None:  # a clear failure that says the mount went away
        assert re.search(r"mount (went|keeps going) away", error), error

    force_unmount(mnt)
    wait_for_lock(data)
    with Daemon(data, mnt) as again:  # recovery by a new daemon, then a clean shutdown
        assert wait_live(data) == str(mnt)
        unmount(again)
    decoded = check_offline(data)

    written = decoded["big-0"] + decoded["big-1"]
    assert written, "nothing of the write survived"
    assert sorted(written) == sorted(v for _, _, v in scan(data, "big"))  # two decoders agree
    numbers = [int(v) for v in written]  # every record whole
    assert len(numbers) == len(set(numbers))  # no task ran twice
    assert all(0 <= n < rows for n in numbers)
    if error is None:  # the rest went to the store once the daemon was gone
        assert sorted(numbers) == list(range(rows))
    how = "completed" if error is None else "failed: the mount went away"
    print(f"killed at {killed[0]} bytes; {len(numbers)} of {rows} kept; {how}", file=sys.stderr)
