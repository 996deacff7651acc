"""The pipeline logfs exists for, on a real local[2] SparkSession beside a live mount: shell
tools append through the mount while Spark streams and batch jobs read the data directory and
write their results into it (through the mount's append.batches), and a daemon killed under
Spark's writes leaves no torn batch."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from mount_helpers import LOGFS, Daemon, force_unmount, sh, wait_live
from pyspark.sql import functions as F
from waiting import wait_for

from logfs import Store

pytestmark = [pytest.mark.spark, pytest.mark.mount, pytest.mark.timeout(300)]


@pytest.fixture
def mounted(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt, "partitions=2") as daemon:
        assert wait_live(data) == str(mnt)
        yield data, mnt, daemon


def values(data: Path, topic: str) -> list[bytes]:
    with Store(data, read_only=True) as store:
        return [r.value for p in store.partitions(topic) for r in store.log(topic, p).scan()]


def check_offline(data: Path) -> None:
    """`logfs check` is clean and kafka-python decodes every batch of every segment, CRCs
    valid and offsets contiguous."""
    done = subprocess.run([*LOGFS, "check", str(data)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    for directory in sorted(p for p in data.iterdir() if p.is_dir()):
        expected = None
        for path in sorted(directory.glob("*.log")):
            memory = MemoryRecords(path.read_bytes())
            while memory.has_next():
                batch = memory.next_batch()
                assert batch.validate_crc(), path
                offsets = [r.offset for r in batch]
                assert expected is None or offsets[0] == expected, path
                expected = offsets[-1] + 1


def enrich(df):
    return df.select("key", F.concat(F.lit("seen:"), F.col("value").cast("string")).alias("value"))


def test_streaming_from_shell_appends_to_another_topic_with_restarts(spark, mounted, tmp_path):
    data, mnt, _ = mounted
    checkpoint, stop = tmp_path / "checkpoint", tmp_path / "stop-writer"
    sh(f"mkdir {mnt}/clicks {mnt}/enriched")
    # A shell writer: one line per echo, alternating partitions, until told to stop.
    writer = subprocess.Popen(
        [
            "bash",
            "-c",
            f'i=0; while [ ! -e {stop} ]; do echo "click-$i" >> {mnt}/clicks/$((i % 2))/append;'
            " i=$((i + 1)); done",
        ],
        start_new_session=True,
    )

    def run(trigger: dict, seconds: float | None) -> None:
        query = (
            enrich(
                spark.readStream.format("logfs")
                .options(path=str(data), subscribe="clicks", startingOffsets="earliest")
                .option("maxOffsetsPerTrigger", "500")
                .load()
            )
            .writeStream.format("logfs")
            # A store fallback would wait for the daemon's lock: fail fast instead.
            .options(path=str(data), topic="enriched", lockTimeout="1")
            .option("checkpointLocation", str(checkpoint))
            .trigger(**trigger)
            .start()
        )
        if seconds is None:
            query.awaitTermination(120)
        else:
            time.sleep(seconds)
            query.stop()  # possibly in the middle of a micro-batch
        assert query.exception() is None

    try:
        wait_for(lambda: len(values(data, "clicks")) >= 50, "50 clicks appended", timeout=60)
        run({"processingTime": "200 milliseconds"}, 4)
        run({"processingTime": "200 milliseconds"}, 4)  # restarted from the checkpoint
    finally:
        stop.touch()
        writer.wait(timeout=30)
    assert writer.returncode == 0
    run({"availableNow": True}, None)  # caught up

    clicks = values(data, "clicks")
    assert len(clicks) > 100
    assert sorted(clicks) == sorted(b"click-%d" % i for i in range(len(clicks)))  # none lost
    enriched = values(data, "enriched")
    wanted = {b"seen:" + c for c in clicks}
    assert set(enriched) == wanted  # every click reflected, nothing else, nothing torn
    assert len(enriched) >= len(clicks)  # at least once
    # The shell sees Spark's output through the mount.
    streamed = sh(f"cat {mnt}/enriched/0/stream {mnt}/enriched/1/stream").stdout
    assert sorted(streamed.encode().splitlines()) == sorted(enriched)


def test_batch_job_reads_and_writes_while_mounted(spark, mounted):
    data, mnt, _ = mounted
    sh(f"mkdir {mnt}/words && printf 'a\\nb\\na\\nc\\na\\n' > {mnt}/words/0/append")
    sh(f"printf 'b\\nc\\n' > {mnt}/words/1/append")
    words = spark.read.format("logfs").options(path=str(data), subscribe="words").load()
    counts = words.groupBy(F.col("value").cast("string").alias("key")).count()
    counts.select("key", F.col("count").cast("string").alias("value")).write.format(
        "logfs"
    ).options(path=str(data), topic="counts", lockTimeout="1").mode("append").save()
    table = spark.read.format("logfs").options(path=str(data), subscribe="counts").load()
    from_spark = {r.key.decode(): r.value.decode() for r in table.collect()}
    assert from_spark == {"a": "3", "b": "2", "c": "2"}
    streamed = sh(f"cat {mnt}/counts/0/stream {mnt}/counts/1/stream").stdout.split()
    assert sorted(streamed) == ["2", "2", "3"]  # the shell sees them through the mount


def test_daemon_killed_during_spark_writes_leaves_no_torn_batch(spark, mounted):
    data, mnt, daemon = mounted
    sh(f"mkdir {mnt}/big")
    rows = 4_000_000
    segments = [data / f"big-{p}" / ("0" * 20 + ".log") for p in (0, 1)]
    killed = []  # segment bytes when the daemon was killed

    def kill_once_writing() -> None:  # in a thread; Spark writes from the main one
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(s.exists() and s.stat().st_size for s in segments):
                daemon.kill()
                killed.append(sum(s.stat().st_size for s in segments if s.exists()))
                return
            time.sleep(0.001)

    killer = threading.Thread(target=kill_once_writing)
    killer.start()
    error = None
    try:
        spark.range(rows, numPartitions=2).selectExpr("cast(id as string) as value").write.format(
            "logfs"
        ).options(path=str(data), topic="big", lockTimeout="5").mode("append").save()
    except Exception as e:  # noqa: BLE001 - inspected below
        error = str(e)
    killer.join(timeout=150)
    assert killed, "no write reached the mount"
    force_unmount(mnt)
    if error is not None:  # a clear failure, naming what happened
        assert "mount went away" in error or "in use by another logfs process" in error, error
    # Tasks still flushing to the store when Spark aborted the job take DATA's lock one after
    # the other: mount once none holds it. Then unmount cleanly: nothing torn or out of order.
    deadline = time.monotonic() + 120
    while True:
        with Store(data, lock_timeout=60):
            pass
        remount = Daemon(data, mnt)
        try:
            with remount:
                break
        except RuntimeError:
            if "in use by another logfs process" not in remount.output():
                raise
            assert time.monotonic() < deadline, "DATA stayed locked after the Spark job ended"
    check_offline(data)
    written = values(data, "big")
    assert len(written) == len(set(written))  # no task was retried: no duplicates
    assert all(0 <= int(v) < rows for v in written)  # every record whole
    if error is None:  # the rest went to the store once the daemon was gone
        assert sorted(map(int, written)) == list(range(rows))
        assert killed[0] < sum(s.stat().st_size for s in segments)
    how = next((line for line in (error or "").splitlines() if "went away" in line), "completed")
    print(f"killed at {killed[0]} bytes; {len(written)} of {rows} kept; {how}", file=sys.stderr)
