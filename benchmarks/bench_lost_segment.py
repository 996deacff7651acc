"""How long an active segment removed from outside goes unnoticed by a daemon's
segment watch (logfs/daemon/segment_watch.py), and how many appends it
acknowledges into the lost file meanwhile.

A store in DATA (the directory given, default: a temporary one) with the watch
running on trio's loop beside a writer task that appends one record per turn of
the loop, as fast as it may; the active ``.log`` is unlinked, and the time until
an append fails (the partition offline) and the appends acknowledged after the
unlink are counted. Medians and maxima over ``--rounds`` partitions::

    .venv/bin/python benchmarks/bench_lost_segment.py [--rounds 20] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time

import trio

from logfs import Store
from logfs.core.errors import LogFailedError
from logfs.core.storage import segment_name
from logfs.daemon.segment_watch import SegmentWatch


def one_round(store: Store, topic: str) -> tuple[float, int]:
    """(seconds from the unlink to the first refused append, appends acknowledged after it)."""
    store.create_topic(topic)
    log = store.log(topic, 0)
    log.append([b"first"])
    path = log.segment_file(segment_name(log.active_base_offset, ".log"))
    found: dict[str, float] = {}

    async def writer() -> None:
        after = 0
        while True:
            try:
                log.append([b"y" * 100])
            except LogFailedError:
                found["seconds"] = time.perf_counter() - found["removed"]
                found["after"] = after
                return
            after += "removed" in found
            await trio.lowlevel.checkpoint()

    async def main() -> None:
        watch = SegmentWatch(store)
        async with trio.open_nursery() as nursery:
            await nursery.start(watch.run)
            nursery.start_soon(writer)
            await trio.sleep(0.05)
            found["removed"] = time.perf_counter()
            os.unlink(path)
            with trio.fail_after(10):
                while "after" not in found:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()

    trio.run(main)
    return found["seconds"], int(found["after"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--dir", default=None, help="where DATA is made (default: $TMPDIR)")
    args = parser.parse_args()
    logging.disable(logging.ERROR)  # each round's partition going offline is logged
    data = tempfile.mkdtemp(dir=args.dir)
    try:
        with Store(data) as store:
            results = [one_round(store, f"t{i}") for i in range(args.rounds)]
    finally:
        shutil.rmtree(data)
    ms = [seconds * 1e3 for seconds, _ in results]
    after = [count for _, count in results]
    print(
        f"{args.rounds} rounds: offline {statistics.median(ms):.2f} ms after the unlink "
        f"(median; max {max(ms):.2f}); appends acknowledged into the lost file: "
        f"median {statistics.median(after):g}, max {max(after)}"
    )


if __name__ == "__main__":
    main()
