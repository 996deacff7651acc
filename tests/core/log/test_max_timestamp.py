"""ListOffsets' ``MAX_TIMESTAMP`` from each segment's books: the same answer as
a walk over every batch (the oracle), with only the one segment that holds the
largest timestamp read, whatever the partition's size; and through the
listener."""

from __future__ import annotations

import random
import sys

from kafka_helpers import Served, call
from kio.index import load_request_schema

from logfs import Store
from logfs.core.storage import LogSegment

LIST_OFFSETS = 2


def scanned(log) -> tuple[int, int]:
    """The oracle: the first record with the largest timestamp, every batch walked."""
    best = (-1, -1)
    for record in log.scan():
        if record.timestamp > best[0]:
            best = (record.timestamp, record.offset)
    return best


def test_the_answer_is_the_scan_s_reading_one_segment(tmp_path, monkeypatch):
    rng = random.Random(7)
    with Store(tmp_path / "data") as store:
        store.create_topic(
            "t", 1, {"segment.bytes": "2000", "message.timestamp.type": "CreateTime"}
        )
        log = store.log("t", 0)
        assert log.max_timestamp_offset() == (-1, -1)
        for i in range(400):
            stamps = [rng.randrange(1_700_000_000_000, 1_700_000_100_000) for _ in range(3)]
            log.append([b"v%d-%d" % (i, j) for j in range(3)], timestamp=stamps)
        assert log.segment_count > 20
        assert log.max_timestamp_offset() == scanned(log)
        # ties: the first record stamped with the largest timestamp wins
        top = scanned(log)[0]
        log.append([b"tie", b"tie2"], timestamp=[top, top])
        assert log.max_timestamp_offset() == scanned(log)
        # a newer maximum, then the segment that had it is no longer read
        log.append([b"newest"], timestamp=top + 1)
        walked = []
        real = LogSegment.batches

        def counted(segment, *args, **kwargs):
            walked.append(segment.base_offset)
            return real(segment, *args, **kwargs)

        monkeypatch.setattr(LogSegment, "batches", counted)
        assert log.max_timestamp_offset() == (top + 1, log.next_offset - 1)
        assert set(walked) == {log.active_base_offset}  # one segment read, no other


def test_reopened_segments_know_their_largest_timestamp(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t", 1, {"segment.bytes": "1000"})
        log = store.log("t", 0)
        for i in range(300):
            log.append([b"x%d" % i], timestamp=1_000_000 + (i * 7919) % 1000)
        expected = scanned(log)
    with Store(tmp_path / "data") as store:
        assert store.log("t", 0).max_timestamp_offset() == expected
        assert expected[0] == 1_000_000 + max((i * 7919) % 1000 for i in range(300))


def test_list_offsets_max_timestamp_over_the_listener(tmp_path):
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("t", 1, {"segment.bytes": "4096"})
        log = store.log("t", 0)
        for i in range(2000):
            log.append([b"r%d" % i], timestamp=5_000 + (i * 37) % 1999)
        expected = scanned(log)
    with Served(data) as served:
        t = load_request_schema(LIST_OFFSETS, 7)
        m = sys.modules[t.__module__]
        body = t(
            replica_id=-1, isolation_level=0,
            topics=(m.ListOffsetsTopic(name="t", partitions=(
                m.ListOffsetsPartition(partition_index=0, timestamp=-3, current_leader_epoch=-1),
            )),),
        )  # fmt: skip
        [part] = call(served.address, LIST_OFFSETS, 7, body).topics[0].partitions
        assert (part.error_code, part.timestamp, part.offset) == (0, *expected)


def test_a_read_committed_time_lookup_behind_an_aborted_batch_is_bounded(tmp_path, monkeypatch):
    """An aborted batch stamped late, then records stamped early: a
    ``read_committed`` lookup looks for the first shown record past it, but
    passes over at most TIME_LOOKUP_BYTES of batches before it answers as
    Kafka's broker does (the aborted record's offset: a reader from there skips
    it), never walking the whole partition; past the LSO there is no answer."""
    from txn_helpers import append_txn

    from logfs.core.log import reads

    with Store(tmp_path / "data") as store:
        store.create_topic("t", 1, {"segment.bytes": str(64 << 20)})
        log = store.log("t", 0)
        aborted = append_txn(log, [b"aborted"], 9, 0, 0)
        log.append_marker(9, 0, commit=False)
        stamp = log.read(aborted).timestamp  # a producer's: now
        for i in range(10):
            log.append([b"early%d" % i], timestamp=1_000 + i)
        assert log.offset_for_time(stamp) == aborted
        assert log.offset_for_time(stamp, committed=True) is None  # nothing shown after it
        value = b"e" * 4000
        for i in range(800):  # 3.2 MB more, stamped early
            log.append([value], timestamp=2_000 + i)
        pulled = []
        real = reads.LogReads.raw_batches

        def counted(self, *args, **kwargs):
            for item in real(self, *args, **kwargs):
                pulled.append(item)
                yield item

        monkeypatch.setattr(reads.LogReads, "raw_batches", counted)
        assert log.offset_for_time(stamp, committed=True) == aborted  # Kafka's answer
        assert len(pulled) <= reads.TIME_LOOKUP_BYTES // len(value) + 20, len(pulled)
        append_txn(log, [b"open"], 10, 0, 0)  # an open transaction: the LSO stays before it
        late = log.read(log.next_offset - 1).timestamp
        assert log.offset_for_time(late, committed=True) is None
