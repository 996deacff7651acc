"""Batches that claim or expand to more than they hold: refused before the memory is taken.

A small compressed batch can expand to gigabytes, and a header can claim two billion records
that a records section of a few bytes cannot hold. Appending such a batch fails with
`InvalidBatchError` (EINVAL on the mount) and appends nothing; reading a stored one is
`CorruptRecordError`. Peak memory is measured in a child process (`ru_maxrss`), so the
parent's own allocations do not blur it.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest
from bombs import MIB, bomb_batch, zeros_compressed
from kafka.record.default_records import DefaultRecordBatchBuilder
from mount_helpers import Daemon, sh

from logfs import Store
from logfs.core.errors import CorruptRecordError, InvalidBatchError
from logfs.core.format import compression
from logfs.core.format.compression import GZIP, LZ4, SNAPPY, ZSTD
from logfs.core.format.record import (
    HEADER,
    read_header,
    records_section,
    write_crc,
)


def peak_rss_mib(script: str) -> tuple[int, str]:
    """Run ``script`` in a child Python; its peak RSS growth in MiB and its output."""
    code = textwrap.dedent(
        """
        import resource, sys
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        def report(text):
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            print((after - before) // 1024, text)
        """
    ) + textwrap.dedent(script)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    grown, _, text = done.stdout.strip().rpartition("\n")[2].partition(" ")
    return int(grown), text


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_a_bomb_is_refused_past_the_limit_without_taking_its_size(tmp_path, codec):
    """256 MiB of zeros, a few hundred KiB compressed, against a 1 MiB limit."""
    path = tmp_path / "bomb"
    path.write_bytes(zeros_compressed(codec, 256 * MIB))
    assert path.stat().st_size < 16 * MIB
    grown, text = peak_rss_mib(
        f"""
        from logfs.core.format import compression
        data = open({str(path)!r}, "rb").read()
        try:
            compression.decompress({codec}, data, {MIB})
        except compression.DecompressedTooLargeError as e:
            report(str(e))
        """
    )
    assert "decompress to more than 1048576 bytes" in text
    assert grown < 48, f"decompressing took {grown} MiB"


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_within_the_limit_is_whole(codec):
    data = bytes(range(256)) * 4096  # 1 MiB
    packed = compression.compress(codec, data)
    assert bytes(compression.decompress(codec, packed, len(data))) == data
    with pytest.raises(compression.DecompressedTooLargeError):
        compression.decompress(codec, packed, len(data) - 1)


def test_raw_snappy_claiming_a_huge_length_is_refused_before_decompressing():
    claim = bytes([0x80, 0x80, 0x80, 0x80, 0x0F])  # varint 4 GiB - 1 ... of nothing
    with pytest.raises(compression.DecompressedTooLargeError):
        compression.decompress(SNAPPY, claim + b"\x00" * 10, MIB)


@pytest.mark.parametrize("codec", [0, GZIP, ZSTD])
def test_a_claimed_record_count_beyond_the_bytes_is_corrupt(codec):
    """2**31 - 1 records claimed by a batch of one short record."""
    batch = bomb_batch(codec, 0, records=2**31 - 1) if codec else None
    if codec == 0:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, MIB)
        builder.append(0, timestamp=1, key=None, value=b"x", headers=[])
        raw = bytearray(builder.build())
        header = read_header(raw)._replace(records_count=2**31 - 1, crc=0)
        HEADER.pack_into(raw, 0, *header)
        write_crc(raw, 0, len(raw))
        batch = bytes(raw)
    with pytest.raises(CorruptRecordError, match="claims 2147483647 records"):
        records_section(batch, read_header(batch))


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_appending_a_bomb_appends_nothing(tmp_path, codec):
    batch = bomb_batch(codec, 64 * MIB)
    assert len(batch) < 4 * MIB
    with Store(tmp_path / "data") as store:
        store.create_topic("t", config={"max.message.bytes": str(8 * MIB)})  # snappy's ratio: ~21
        log = store.log("t", 0)
        with pytest.raises(InvalidBatchError, match="decompress to more than 16777216 bytes"):
            log.append_batches([batch])
        assert log.next_offset == 0
        huge_count = bomb_batch(codec, 0, records=2**31 - 1)
        with pytest.raises(InvalidBatchError, match="claims 2147483647 records"):
            log.append_batches([huge_count])
        assert log.next_offset == 0
        log.append([b"still fine"])
        assert [r.value for r in log.scan()] == [b"still fine"]


@pytest.mark.mount
def test_a_bomb_through_the_mount_is_einval_and_the_daemon_stays_small(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    data.mkdir()
    mnt.mkdir()
    bomb = tmp_path / "bomb"
    bomb.write_bytes(bomb_batch(ZSTD, 4096 * MIB))  # 4 GiB of zeros, ~128 KiB compressed
    with Daemon(data, mnt) as daemon:
        sh(f"mkdir {mnt}/t && echo control >> {mnt}/t/0/append")
        rss_before = rss_mib(daemon.pid)
        fd = os.open(mnt / "t/0/append.batches", os.O_WRONLY)
        try:
            with pytest.raises(OSError) as caught:
                os.write(fd, bomb.read_bytes())
            assert caught.value.errno == errno.EINVAL
        finally:
            os.close(fd)
        assert rss_mib(daemon.pid) - rss_before < 64
        assert sh(f"cat {mnt}/t/0/stream").stdout == "control\n"


def rss_mib(pid: int) -> int:
    """A process's peak resident memory (VmHWM), in MiB, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmHWM for {pid}")
