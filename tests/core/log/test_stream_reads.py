"""Reading a partition's stream through the compiled pass (`read_lines`, one pass
over a region: headers, CRCs, records, values) equals reading it through the
column-wise path it leaves compressed and aborted batches to, byte for byte:
plain, compressed, control, committed and aborted transactional batches, an
open transaction (the last stable offset), many segments, ``from/<n>``, and
requests of any size."""

from __future__ import annotations

import random

import pytest
from txn_helpers import append_txn

from logfs import Store
from logfs.core.format import compression
from logfs.core.format.record import encode_batch
from logfs.core.log import FromStream, lines
from logfs.mount.files.generated import ReadAhead


def fill(log, rng: random.Random, open_txn: bool) -> None:
    """A partition of every kind of batch, in random order."""
    for i in range(60):
        kind = rng.choice(["plain", "plain", "gzip", "commit", "abort"])
        values = [
            rng.choice([None, b"", b"a\nb", b"v%d-%d" % (i, j) + b"x" * rng.randrange(200)])
            for j in range(rng.randrange(1, 30))
        ]
        if kind == "plain":
            log.append(values)
        elif kind == "gzip":
            log.append_batches([encode_batch(0, values, codec=compression.GZIP)])
        else:
            append_txn(log, values, 100 + i, 0, 0)
            log.append_marker(100 + i, 0, commit=kind == "commit")
    if open_txn:
        append_txn(log, [b"undecided"], 99, 0, 0)
        log.append([b"after the open transaction"])


def read_all(log, source, rng: random.Random) -> bytes:
    """The whole stream (or ``source``) read sequentially in requests of random sizes."""
    ahead, out, position = ReadAhead(source), [], 0
    while True:
        data = ahead.read(log, position, rng.choice([1, 7, 100, 4096, 1 << 20]))
        if not len(data):
            return b"".join(out)
        out.append(bytes(data))
        position += len(data)


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_pass_reads_what_the_column_path_reads(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    with Store(tmp_path) as store:
        store.create_topic("t", 1, config={"segment.bytes": "4000"})
        log = store.log("t", 0)
        fill(log, rng, open_txn=seed % 2 == 0)
        assert len(log.segments) > 5
        starts = [0, 1, *rng.sample(range(log.next_offset), 4)]
        fast = [read_all(log, None, random.Random(seed))]
        fast += [read_all(log, FromStream(log, n), random.Random(n)) for n in starts]
        assert len(fast[0]) == log.stream.size() and fast[0].count(b"a\nb") > 0
        with monkeypatch.context() as m:
            m.setattr(lines, "read_lines", lambda *args, **kwargs: None)
            slow = [read_all(log, None, random.Random(seed))]
            slow += [read_all(log, FromStream(log, n), random.Random(n)) for n in starts]
        assert fast == slow
        assert b"undecided" not in fast[0]
