"""The benchmark suite's own parts: the C null file system it builds and mounts as the
transport's floor (benchmarks/cnullfs.c), the null Kafka server that is Fetch's, and
the regression check of bench_floor.py against the figures recorded in
docs/benchmarks.md."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_floor  # noqa: E402
import bench_kafka  # noqa: E402
import figures  # noqa: E402
from mount_helpers import mount_type  # noqa: E402
from mounts import CNullDaemon, build_cnullfs  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def test_the_c_null_file_system_is_built_and_answers_as_the_floor(tmp_path):
    program = build_cnullfs(tmp_path)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    with CNullDaemon(program, mountpoint, tmp_path / "cnull.log", 1000) as daemon:
        assert daemon.pid > 0
        fd = os.open(mountpoint / "sink", os.O_WRONLY | os.O_APPEND)
        try:
            assert os.write(fd, b"x" * 99 + b"\n") == 100
            assert os.write(fd, b"y" * 5000) == 5000
        finally:
            os.close(fd)
        assert os.stat(mountpoint / "sink").st_size == 0  # it keeps nothing
        source = (mountpoint / "source").read_bytes()
        assert source == (b"x" * 99 + b"\n") * 10
        assert os.stat(mountpoint / "source").st_blksize == 1 << 20
        assert not (mountpoint / "other").exists()
    assert mount_type(mountpoint) is None


def test_the_c_write_through_file_system_answers_once_the_bytes_are_in_its_file(tmp_path):
    """With ``copy_to``, every write() to ``sink`` is in that file, whole and in
    order, when it returns, and a large one has blocks reserved past the file's end
    (as logfs's segments have); a file it cannot open keeps it from mounting."""
    program = build_cnullfs(tmp_path)
    mountpoint, copy = tmp_path / "mnt", tmp_path / "copy"
    mountpoint.mkdir()
    written = [b"x" * 99 + b"\n", bytes(range(256)) * 20, b"z" * (3 << 20)]
    with CNullDaemon(program, mountpoint, tmp_path / "cnull.log", 1000, copy) as daemon:
        fd = os.open(mountpoint / "sink", os.O_WRONLY | os.O_APPEND)
        try:
            for i, data in enumerate(written):
                assert os.write(fd, data) == len(data)
                assert copy.read_bytes() == b"".join(written[: i + 1])
        finally:
            os.close(fd)
        assert copy.stat().st_blocks * 512 > copy.stat().st_size + (64 << 10)
        assert daemon.pid > 0
    assert mount_type(mountpoint) is None
    unwritable = CNullDaemon(program, mountpoint, tmp_path / "bad.log", 1000, tmp_path / "no/x")
    with pytest.raises(RuntimeError, match="did not mount"), unwritable:
        pass
    assert "no/x" in (tmp_path / "bad.log").read_text()


def test_the_null_kafka_server_answers_the_fetch_client_with_the_whole_segment(tmp_path):
    """Answers as Kafka's broker cuts them: ``FETCH_BYTES`` from the batch at the
    offset asked for, the last batch of each partial, asked for again (`fetch_all`
    checks the first answer against kio and stops at the log's end)."""
    data = tmp_path / "data"
    bench_kafka.fill(data, "fetched", bench_kafka.one_batch(), 3 << 20)
    with bench_kafka.Store(data) as store:
        end = store.log("fetched", 0).next_offset
    segment = next((data / "fetched-0").glob("*.log"))
    starts = [position for position, _ in bench_kafka.whole_batches(segment.read_bytes())]
    size = segment.stat().st_size
    expected, position = 0, 0
    while position < size:
        cut = min(position + bench_kafka.FETCH_BYTES, size)
        expected += cut - position
        position = size if cut == size else max(s for s in starts if s <= cut)
    assert len(starts) > 100 and expected > size  # some answers end inside a batch
    with bench_kafka.null_fetch_server(segment, "fetched") as (address, pid):
        assert bench_kafka.fetch_all(address, "fetched", end) == expected
        assert bench_kafka.fetch_all(address, "fetched", end) == expected  # a second client
    assert not os.path.exists(f"/proc/{pid}")


class Run:
    """A figure with fixed medians, as `Figure.measure` leaves them."""

    def __init__(self, rates: dict[str, float], cpu: dict[str, float] | None = None):
        self.rates, self.cpu = rates, cpu or {}

    def median(self, name: str, cpu: bool = False) -> float:
        return (self.cpu if cpu else self.rates)[name]


def test_a_check_that_fell_past_its_noise_band_is_flagged():
    figures = {"line": Run({"logfs": 50.0, "C null": 100.0}, {"logfs": 20.0, "C null": 10.0})}
    recorded = {"line: logfs / C null": (0.8, 0.25), "line CPU: C null / logfs": (0.55, 0.25)}
    table, keep, fell = bench_floor.check_rows(figures, recorded)
    # 0.50 < 0.8 x 0.75: fell; CPU 10/20 = 0.50 >= 0.55 x 0.75: within the band
    assert fell == ["line: logfs / C null"]
    assert "| line: logfs / C null | 0.50 | 0.80 | 0.25 | 0.8 | not met; **fell**" in "\n".join(
        table
    )
    assert "| line CPU: C null / logfs | 0.50 | 0.55 | 0.25 | 0.8 | not met |" in table
    # checks of figures not run keep what was recorded
    assert "| append: logfs / C null |  | 0.25 | 0.6 |" in keep
    assert "| line: logfs / C null | 0.50 | 0.25 | 0.8 |" in keep


def test_the_bounds_are_the_c_write_through_file_system_against_the_c_null_of_their_run():
    """Rates and CPU alike: the anchor's CPU over the write-through's, higher is better."""
    cpu = {"C null": 14.0, "C write-through": 20.0}
    figures = {
        "line": Run({"C null": 30000.0, "C write-through": 24000.0}, cpu),
        "append": Run({"logfs": 900.0, "C null": 3600.0, "C write-through": 1600.0}),
        "batches": Run({"logfs": 1100.0, "C null": 2000.0, "C write-through": 1500.0}),
    }
    table = bench_floor.bound_rows(figures)
    assert "| line: C write-through / C null | 0.80 | 0.8 |  |" in table
    assert "| line CPU: C null / C write-through | 0.70 | 0.8 | the goal is above the bound |" in (
        table
    )
    assert "| append: C write-through / C null | 0.44 | 0.6 | the goal is above the bound |" in (
        table
    )
    assert "| batches: C write-through / C null | 0.75 | 0.5 |  |" in table
    assert len(table) == 2 + 4  # nginx not run
    assert bench_floor.bound_rows({"stream": Run({})})[2:] == []


def test_the_recorded_figures_are_read_and_written_back_in_place(tmp_path):
    docs = tmp_path / "benchmarks.md"
    shutil.copy(DOCS, docs)
    recorded = bench_floor.recorded_checks(docs)
    assert set(recorded) == {check for check, *_ in bench_floor.CHECKS}
    figures = {"stream": Run({"logfs": 300.0, "plain file": 1000.0})}
    _, keep, _ = bench_floor.check_rows(figures, recorded)
    bench_floor.record(keep, docs)
    again = bench_floor.recorded_checks(docs)
    assert again["stream: logfs / plain"] == (0.3, recorded["stream: logfs / plain"][1])
    del again["stream: logfs / plain"], recorded["stream: logfs / plain"]
    assert again == recorded
    before, after = DOCS.read_text(), docs.read_text()
    assert before.split("<!-- floor-checks -->")[0] == after.split("<!-- floor-checks -->")[0]
    assert before.split("<!-- /floor-checks -->")[1] == after.split("<!-- /floor-checks -->")[1]


@pytest.mark.parametrize("check", [c for c, *_ in bench_floor.CHECKS])
def test_every_check_has_a_goal_and_a_band_in_the_docs(check):
    _, band = bench_floor.recorded_checks()[check]
    assert 0 < band < 1


def test_a_daemons_cpu_is_counted_to_the_nanosecond_while_its_threads_stay():
    start, counter = time.process_time(), figures.DaemonCpu(os.getpid())
    while time.process_time() - start < 0.2:
        pass
    spent, expected = counter.since(), time.process_time() - start
    assert abs(spent - expected) < 0.005  # a clock tick is 0.01 s: not counted in ticks


def test_every_run_of_a_figure_follows_its_preparation():
    order = []
    fig = figures.Figure("f", "MB/s", 1.0, "ms/MB", 1e3)
    for name in ("a", "b"):
        fig.target(name, lambda n=name: order.append(n) or 0.5)
    fig.measure(3, lambda: order.append("-"))
    assert "".join(order) == "-a-b" + "-b-a" + "-a-b"  # rotating order, one per run
    assert fig.rates == {"a": [2.0] * 3, "b": [2.0] * 3}


def test_recycle_writes_its_scratch_file_and_deletes_it(tmp_path, monkeypatch):
    scratch, written, write = tmp_path / "scratch", [], os.write
    monkeypatch.setattr(os, "write", lambda fd, data: written.append(len(data)) or write(fd, data))
    bench_floor.recycle(scratch, 3 << 20)
    assert sum(written) >= 3 << 20
    assert not scratch.exists()
