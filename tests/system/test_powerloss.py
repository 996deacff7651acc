"""The power-loss model: only what was fsynced survives.

The mount's own code runs in-process — `Operations` handlers driven by writer
tasks, the `Flusher` on its trio loop, fsyncs in worker threads — with
``os.fsync`` and ``os.fdatasync`` wrapped by `DurableImage` (tests/helpers/powerloss.py),
which keeps, per inode, the bytes a file had when an fsync of it began, and
per directory the entries it had.
At a random moment the "power fails": a new data directory is built from
only that (the directory tree as last fsynced, each file as last fsynced),
with the unsynced tail of each file dropped, kept in part, zero-filled or
replaced by garbage. The store is opened on it, which recovers it, and:

- what fsync() on ``append`` acknowledged survives, and with
  ``flush.messages=1`` everything whose write() returned;
- with ``flush.ms=F``, everything appended more than F (plus the flusher's
  tick and some slack for a busy machine) before the failure survives;
- each partition is exactly a prefix of what was written (nothing torn, no
  garbage served), `check` is clean, and the log takes appends again.
"""

from __future__ import annotations

import os
import random
import time
import zlib
from pathlib import Path

import pyfuse3
import pytest
import trio
from powerloss import MODES, REAL_FDATASYNC, REAL_FSYNC, DurableImage
from stress import report, scale

from logfs import Store
from logfs.core.tools.offline import check
from logfs.daemon import Flusher
from logfs.mount import Operations

TICK = 0.02
SLACK_MS = 500  # a loaded CI machine delays the flusher's ticks and its fsync threads


async def lookup(ops: Operations, path: str) -> int:
    inode = pyfuse3.ROOT_INODE
    for name in path.split("/"):
        inode = (await ops.lookup(inode, name.encode(), None)).st_ino
    return inode


def run_until_power_fails(
    live: Path, settings: dict, duration: float, rng: random.Random, *, buffered: bool = False
):
    """Write through the Operations until the power fails; returns what each
    partition was sent, acknowledged and when, and the durable image.

    ``buffered``: the buffered mode (acks=0), its writes sent as the kernel
    writes back its page cache: from the start of the page they end in (bytes
    sent before come again), now and then in two pieces, the second first.
    A write that returned is then one the kernel wrote back."""
    image = DurableImage(live)
    written = {0: [], 1: []}  # values in the order they were written
    acked = {0: 0, 1: 0}  # records whose write() returned before the power failed
    fsynced = {0: 0, 1: 0}  # records covered by a returned fsync()
    returned_at: dict[int, list[float]] = {0: [], 1: []}
    result = {}

    async def writer(ops: Operations, partition: int) -> None:
        fh = (await ops.open(await lookup(ops, f"t/{partition}/append"), os.O_WRONLY, None)).fh
        seq = 0
        sent = bytearray()  # the byte stream the kernel would hold (buffered)
        while True:
            n = rng.choice((1, 1, 3, 10, 100))
            values = [
                b"p%d-%d-" % (partition, seq + i) + b"x" * rng.randrange(300) for i in range(n)
            ]
            written[partition] += values
            data = b"".join(v + b"\n" for v in values)
            if buffered:
                start = len(sent) - len(sent) % 4096
                sent += data
                chunk = bytes(sent[start:])
                cut = rng.randrange(1, len(chunk)) if rng.random() < 0.2 else 0
                if cut:
                    await ops.write(fh, start + cut, chunk[cut:])
                await ops.write(fh, start, chunk[:cut] if cut else chunk)
            else:
                await ops.write(fh, 0, data)
            if "failed_at" in result:
                return  # returned after the power failed: acknowledged to nobody
            acked[partition] += n
            returned_at[partition] += [time.monotonic()] * n
            seq += n
            if partition == 0 and rng.random() < 0.05:  # partition 1: the flusher only
                count = len(written[partition])
                await ops.fsync(fh, False)
                if "failed_at" in result:
                    return
                fsynced[partition] = max(fsynced[partition], count)
            await trio.sleep(rng.uniform(0, 0.003))

    async def watch_the_loop() -> None:
        """How late the event loop woke a task of TICK's period (a starved
        process delays the flusher's ticks as much): the loss bound allows it."""
        while True:
            before = time.monotonic()
            await trio.sleep(TICK)
            late = time.monotonic() - before - TICK
            result["late_ms"] = max(result.get("late_ms", 0), late * 1000)

    async def main() -> None:
        store = Store(live, defaults=settings)
        try:
            flusher = Flusher(store, tick=TICK, checkpoint_interval=rng.uniform(0.05, 0.5))
            ops = Operations(store, sync=flusher.flush_log, partitions=2, buffered=buffered)
            await ops.mkdir(pyfuse3.ROOT_INODE, b"t", 0o755, None)
            async with trio.open_nursery() as nursery:
                await nursery.start(flusher.run)
                nursery.start_soon(watch_the_loop)
                for partition in (0, 1):
                    nursery.start_soon(writer, ops, partition)
                await trio.sleep(duration)
                result["failed_at"] = time.monotonic()
                mode = rng.choice(MODES)
                result["mode"] = mode
                result["garbage"] = image.crash(live.parent / "after", rng, mode)
                nursery.cancel_scope.cancel()
        finally:
            store.close()  # too late to matter: the image is taken

    os.fsync = os.fdatasync = image.fsync  # the model keeps data and size alike
    try:
        trio.run(main)
    finally:
        os.fsync, os.fdatasync = REAL_FSYNC, REAL_FDATASYNC
    return written, acked, fsynced, returned_at, result, image.fsyncs


SETTINGS = [
    ("flush.messages=1", {"flush.messages": "1", "flush.ms": "3600000"}, 0.4),
    ("flush.ms=100", {"flush.ms": "100"}, 0.8),
    ("flush.ms=1000 (default)", {}, 1.8),
    ("buffered, flush.ms=100", {"flush.ms": "100"}, 0.8),
]


@pytest.mark.parametrize(("name", "settings", "duration"), SETTINGS, ids=[s[0] for s in SETTINGS])
def test_power_loss_keeps_what_was_made_durable(tmp_path, name, settings, duration):
    """Both modes: in the buffered one a write() the daemon got is one the
    kernel wrote back, and what fsync() acknowledged survives the same way."""
    runs = scale(4, 40)
    rng = random.Random(zlib.crc32(name.encode()))
    figures = {"records_written": 0, "records_checked": 0, "records_lost_unsynced": 0}
    figures |= {"bytes_of_torn_tail_injected": 0, "bytes_truncated_by_recovery": 0}
    figures |= {"fsyncs_modelled": 0, "max_loss_window_ms": 0, "max_loop_late_ms": 0}
    flush_ms = int(settings.get("flush.ms", "1000"))
    for run in range(runs):
        base = tmp_path / str(run)
        base.mkdir()
        written, acked, fsynced, returned_at, result, fsyncs = run_until_power_fails(
            base / "data", settings, duration, rng, buffered=name.startswith("buffered")
        )
        with Store(base / "after") as store:
            truncated = sum(log.truncated_bytes for log in store.logs())
            for partition in (0, 1):
                log = store.log("t", partition)
                got = [r.value for r in log.scan()]
                sent = written[partition]
                # nothing torn, nothing foreign: exactly a prefix of what was written
                assert got == sent[: len(got)], f"{name}/{result['mode']}: not a prefix"
                assert len(got) >= fsynced[partition], "fsync() acknowledged records lost"
                if "flush.messages" in settings:
                    assert len(got) >= acked[partition], "flush.messages=1: a returned write() lost"
                lost = sent[len(got) : acked[partition]]
                if lost:
                    oldest_lost = returned_at[partition][len(got)]
                    window = (result["failed_at"] - oldest_lost) * 1000
                    bound = flush_ms + 2 * TICK * 1000 + SLACK_MS + result.get("late_ms", 0)
                    assert window < bound, (
                        f"lost a record appended {window:.0f} ms before the failure "
                        f"(the event loop was up to {result.get('late_ms', 0):.0f} ms late)"
                    )
                    figures["max_loss_window_ms"] = max(figures["max_loss_window_ms"], window)
                assert log.recovery_point == log.next_offset
                log.append([b"after"])
                figures["records_written"] += acked[partition]
                figures["records_checked"] += len(got)
                figures["records_lost_unsynced"] += len(lost)
        assert check(base / "after") == []
        figures["bytes_of_torn_tail_injected"] += result["garbage"]
        figures["bytes_truncated_by_recovery"] += truncated
        figures["fsyncs_modelled"] += fsyncs
        figures["max_loop_late_ms"] = max(figures["max_loop_late_ms"], result.get("late_ms", 0))
    figures["max_loss_window_ms"] = round(figures["max_loss_window_ms"])
    figures["max_loop_late_ms"] = round(figures["max_loop_late_ms"])
    report(f"powerloss {name}", power_failures=runs, **figures)


def test_flush_messages_write_returns_durable(tmp_path):
    """Regression: flush.messages was only applied at the flusher's next tick,
    so a write() returned before its records were fsynced."""

    async def main():
        with Store(tmp_path, defaults={"flush.messages": "3", "flush.ms": "3600000"}) as store:
            ops = Operations(store, sync=Flusher(store).flush_log, partitions=1)
            await ops.mkdir(pyfuse3.ROOT_INODE, b"t", 0o755, None)
            log = store.log("t", 0)
            fh = (await ops.open(await lookup(ops, "t/0/append"), os.O_WRONLY, None)).fh
            await ops.write(fh, 0, b"a\nb\n")
            assert (log.unflushed_messages, log.recovery_point) == (2, 0)
            await ops.write(fh, 0, b"c\npartial")
            assert (log.unflushed_messages, log.recovery_point) == (0, 3)
            await ops.write(fh, 0, b" line")
            await ops.flush(fh)  # close(): the partial line becomes a record
            await ops.release(fh)
            assert (log.unflushed_messages, log.recovery_point) == (1, 3)

    trio.run(main)
