"""The corruption matrix: each kind of damage, read by every reader.

A cleanly closed store of several segments (so the damage lands below the
recovery point: those records were on the disk) is damaged one way — a byte
flipped in a value, in a header, in a batch's length; a segment truncated
inside a batch (first, middle, last) or at a batch boundary — and then read by
the Store API (read-only and writable), Spark, the mount's ``offset/<n>``,
``stream`` and ``from/<n>``, and ``logfs check``. Each reader gives every
record exactly or fails with `CorruptRecordError` (EIO through the mount)
naming the partition and offset: never a silent gap. Only the last segment's
torn tail is a crash's torn write: it is cut, and the records before it are
served. A read-only reader (and Spark) then sees the log end at the cut; a
writer keeps the offsets handed out (the recovery point) and goes on above
them, so for it the cut records are a gap at the log's end that reads as
damage (EIO), never as the end. ``logfs check --repair`` keeps that floor too.
"""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest
from mount_helpers import LOGFS, Daemon

from logfs import Store
from logfs.core.errors import CorruptRecordError
from logfs.core.format.record import read_header

pytestmark = [pytest.mark.spark, pytest.mark.mount, pytest.mark.timeout(300)]

CONFIG = {"segment.bytes": "1500", "index.interval.bytes": "200"}
KINDS = (
    "value",  # last byte of a record's value: the CRC fails, the framing holds
    "header",  # a byte of the header the CRC covers (max timestamp)
    "magic",  # the magic byte: the header no longer reads
    "length",  # the batch length: the framing breaks
    "truncate_first",  # the first segment cut inside a batch
    "truncate_middle",  # a middle segment cut inside a batch
    "boundary_first",  # the first segment cut at a batch boundary: a hole
    "truncate_last",  # the last segment cut inside its last batch: a torn tail
)


def fill(path: Path) -> list[bytes]:
    with Store(path) as store:
        store.create_topic("t", 1, CONFIG)
        log = store.log("t", 0)
        for i in range(60):
            log.append([b"rec-%d-%d" % (i, j) for j in range(i % 4 + 1)])
        return [r.value for r in log.scan()]


def batches_of(partition: Path) -> list[tuple[Path, int, int, int, int]]:
    """(segment, position, size, base offset, next offset) of every batch, in order."""
    out = []
    for path in sorted(partition.glob("*.log")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            h = read_header(data, pos)
            out.append((path, pos, h.size, h.base_offset, h.last_offset + 1))
            pos += h.size
    return out


class Damage:
    """What a damage does: ``bad`` offsets fail to read (a torn tail: are cut), the
    offsets up to ``hidden`` may fail too (the framing broke: only an index entry past
    the damage finds them), every other offset reads exactly."""

    def __init__(self, bad: range, hidden: int, torn: bool = False) -> None:
        self.bad, self.hidden, self.torn = bad, hidden, torn

    def check_read(self, offset: int, read, expected: bytes, error) -> None:
        """``read(offset)`` gives ``expected`` or raises ``error``, as ``offset`` may."""
        if offset in self.bad:
            with pytest.raises(error) as e:
                read(offset)
            return e.value
        try:
            got = read(offset)
        except error:
            assert self.bad.stop <= offset < self.hidden, offset
            return None
        assert got == expected, offset
        return None


def damage(path: Path, kind: str) -> Damage:
    batches = batches_of(path / "t-0")
    segments = sorted({b[0] for b in batches})
    assert len(segments) >= 4
    middle = [b for b in batches if b[0] == segments[1]]
    seg, pos, size, base, end = middle[len(middle) // 2]
    where = {"value": pos + size - 1, "header": pos + 40, "magic": pos + 16, "length": pos + 10}
    if kind in where:
        blob = bytearray(seg.read_bytes())
        blob[where[kind]] ^= 0x10
        seg.write_bytes(bytes(blob))
        # A bad CRC spoils one batch; a header that does not read hides its segment's rest.
        hidden = end if kind in ("value", "header") else middle[-1][4]
        return Damage(range(base, end), hidden)
    if kind == "truncate_last":
        seg, pos, size, base, end = batches[-1]
        with open(seg, "r+b") as f:
            f.truncate(pos + size // 2)
        return Damage(range(base, end), end, torn=True)
    segment = segments[0] if kind.endswith("first") else segments[1]
    mine = [b for b in batches if b[0] == segment]
    seg, pos, size, base, end = mine[len(mine) // 2]
    with open(seg, "r+b") as f:
        f.truncate(pos if kind == "boundary_first" else pos + size // 2)
    return Damage(range(base, mine[-1][4]), mine[-1][4])


def store_reads(path: Path, values: list[bytes], d: Damage, *, read_only: bool) -> None:
    with Store(path, read_only=read_only) as store:
        log = store.log("t", 0)
        if d.torn and read_only:  # the log ends at the cut
            assert log.next_offset == d.bad.start
            assert [r.value for r in log.scan()] == values[: d.bad.start]
            return
        assert log.next_offset == len(values)
        for offset, value in enumerate(values):
            error = d.check_read(offset, lambda o: log.read(o).value, value, CorruptRecordError)
            assert error is None or f"t-0 at offset {offset}" in str(error)
        with pytest.raises(CorruptRecordError, match=f"t-0 at offset {d.bad.start}"):
            list(log.scan())
        assert [r.value for r in log.scan(d.hidden)] == values[d.hidden :]


def spark_reads(spark, path: Path, values: list[bytes], d: Damage) -> None:
    for fail_on_data_loss in ("true", "false"):
        df = (
            spark.read.format("logfs")
            .options(path=str(path), subscribe="t", failOnDataLoss=fail_on_data_loss)
            .load()
        )
        if d.torn:
            rows = sorted((r.offset, bytes(r.value)) for r in df.collect())
            assert rows == list(enumerate(values[: d.bad.start]))
            continue
        with pytest.raises(Exception, match=f"CorruptRecordError: t-0 at offset {d.bad.start}"):
            df.collect()
        rest = (
            spark.read.format("logfs")
            .options(path=str(path), assign='{"t": [0]}', failOnDataLoss=fail_on_data_loss)
            .option("startingOffsets", f'{{"t": {{"0": {d.hidden}}}}}')
            .load()
        )
        assert [bytes(r.value) for r in rest.orderBy("offset").collect()] == values[d.hidden :]


def mount_reads(tmp_path: Path, values: list[bytes], d: Damage) -> None:
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    with Daemon(data, mnt):
        p0 = mnt / "t" / "0"
        lines = b"".join(v + b"\n" for v in values[: d.bad.start])
        cat = subprocess.run(["cat", str(p0 / "stream")], capture_output=True)
        assert cat.returncode != 0 and b"Input/output error" in cat.stderr, cat
        assert lines.startswith(cat.stdout)  # what comes before the damage, if anything
        if d.torn:  # the records before the cut, all of them, then EIO
            assert cat.stdout == lines
        for offset, value in enumerate(values):
            error = d.check_read(offset, lambda o: (p0 / "offset" / str(o)).read_bytes(), value,
                                 OSError)  # fmt: skip
            assert error is None or error.errno == errno.EIO
        for name in ("stream", "from/0", f"from/{d.bad.start}"):
            with pytest.raises(OSError) as e:
                (p0 / name).read_bytes()
            assert e.value.errno == errno.EIO, name
        rest = b"".join(v + b"\n" for v in values[d.hidden :])
        assert (p0 / "from" / str(d.hidden)).read_bytes() == rest


@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_fails_on_damage_or_serves_it_exactly(spark, tmp_path, kind):
    data = tmp_path / "data"
    values = fill(data)
    d = damage(data, kind)
    done = subprocess.run([*LOGFS, "check", str(data)], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    store_reads(data, values, d, read_only=True)
    spark_reads(spark, data, values, d)
    store_reads(data, values, d, read_only=False)  # a writer's open cuts no damage
    mount_reads(tmp_path, values, d)
    subprocess.run([*LOGFS, "check", "--repair", str(data)], capture_output=True, check=True)
    # The repair cuts at the first bad batch, but a hole with nothing bad in it stays as
    # it is, and the log ends where it did: the offsets cut read as damage.
    kept = d.hidden if kind == "boundary_first" else len(values)
    with Store(data, read_only=True) as store:
        log = store.log("t", 0)
        assert log.next_offset == len(values)
        assert [r.value for r in log.scan(0, d.bad.start)] == values[: d.bad.start]
        for offset, value in enumerate(values):
            if d.bad.start <= offset < kept:
                with pytest.raises(CorruptRecordError, match=f"t-0 at offset {offset}"):
                    log.read(offset)
            else:
                assert log.read(offset).value == value
