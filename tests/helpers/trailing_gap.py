"""A partition whose log ends in a gap: ``t-0`` filled and cleanly closed, then
its last batch torn (half of it cut off). Its offsets were handed out (the
recovery point says so), so a writing daemon cuts the torn batch but keeps the
log's end where it was: offsets ``LOST`` to ``END - 1`` are lost records below
the log end, with nothing after them."""

from __future__ import annotations

from pathlib import Path

from logfs import Store
from logfs.core.format.record import read_header

BATCHES, PER_BATCH = 20, 5  # offsets 0..99, the last batch 95..99
END, LOST = BATCHES * PER_BATCH, (BATCHES - 1) * PER_BATCH


def torn(data: Path) -> list[bytes]:
    """Fill ``data``'s ``t-0`` (several segments) and tear its last batch; the
    values written, by offset."""
    with Store(data) as store:
        store.create_topic("t", 1, {"segment.bytes": "1000"})
        log = store.log("t", 0)
        for i in range(BATCHES):
            log.append([b"r%d" % (i * PER_BATCH + j) for j in range(PER_BATCH)])
    last = sorted((data / "t-0").glob("*.log"))[-1]
    blob, position = last.read_bytes(), 0
    while position + read_header(blob, position).size < len(blob):
        position += read_header(blob, position).size
    assert read_header(blob, position).base_offset == LOST
    last.write_bytes(blob[: position + read_header(blob, position).size // 2])
    return [b"r%d" % i for i in range(END)]
