"""A followed partition (core/log/following.py): the leader's batches appended with
their own offsets and bytes, whatever cuts the fetches make, with the leader's segment
files, ``.txnindex``, last stable offset and stream; the log start following the
leader's; every change but the follower's refused; a torn tail after a crash fetched
again."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from txn_helpers import append_txn, producer_batch

from logfs.core.errors import InvalidBatchError, ReadOnlyError
from logfs.core.log import Store

SMALL = {"segment.bytes": "400"}  # a roll every few batches
SOURCE = "kafka://leader:9092"


def leader_log(store: Store):
    """A leader with plain records, an idempotent producer, a committed and an aborted
    transaction, and a transaction still open at the end."""
    store.create_topic("t", 1, SMALL)
    log = store.log("t", 0)
    log.append([b"plain %d" % i for i in range(5)])
    log.append_batches([producer_batch([b"idem 0", b"idem 1"], 7, 0, 0)])
    append_txn(log, [b"committed a", b"committed b"], 1000, 0, 0)
    log.append([b"between"])
    append_txn(log, [b"aborted a"], 1001, 0, 0)
    append_txn(log, [b"committed c"], 1000, 0, 2)
    log.append_marker(1000, 0, commit=True)
    log.append_marker(1001, 0, commit=False)
    for i in range(12):
        log.append([b"later %d" % i])
    append_txn(log, [b"open"], 1002, 0, 0)
    return log


def log_bytes(log) -> bytes:
    return b"".join(h_b[1].tobytes() for h_b in log.raw_batches())


def files(log, suffix: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.dir.glob(f"*{suffix}"))}


def stream_text(log) -> bytes:
    stream = log.stream
    for segment in stream.uncounted():
        stream.set_counted(segment, stream.count(segment))
    lines, _ = stream.lines(log.log_start_offset, 1 << 20)
    return bytes(lines)


def copy(leader, follower, cuts: list[int]) -> None:
    """Feed the leader's log to the follower as fetches cut at ``cuts`` (byte counts),
    each fetch from the follower's log end, as the follower does."""
    data = log_bytes(leader)
    while follower.next_offset < leader.next_offset:
        start = sum(
            h.size for h, _ in leader.raw_batches() if h.next_offset <= follower.next_offset
        )
        size = cuts.pop() if cuts else len(data)
        follower.following.append(data[start : start + max(size, 1)])


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(1, 300), max_size=40))
def test_the_copy_is_byte_identical_whatever_the_fetches_cut(tmp_path_factory, cuts):
    tmp = tmp_path_factory.mktemp("follow")
    with Store(tmp / "leader") as ls, Store(tmp / "follower") as fs:
        leader = leader_log(ls)
        fs.create_topic("t", 1, SMALL)
        fs.follow("t", SOURCE)
        follower = fs.log("t", 0)
        copy(leader, follower, list(cuts))
        assert log_bytes(follower) == log_bytes(leader)
        for suffix in (".log", ".txnindex"):
            assert files(follower, suffix) == files(leader, suffix)
        assert len(files(follower, ".log")) > 2  # the roll rule made the same segments
        assert follower.last_stable_offset == leader.last_stable_offset < leader.next_offset
        end = leader.next_offset
        assert follower.aborted_transactions(0, end) == leader.aborted_transactions(0, end)
        assert [r.value for r in follower.scan(committed=True)] == [
            r.value for r in leader.scan(committed=True)
        ]
        assert stream_text(follower) == stream_text(leader)
        assert follower.following.status()["from"] == SOURCE


def test_the_transaction_left_open_closes_as_on_the_leader_and_survives_a_reopen(tmp_path):
    with Store(tmp_path / "leader") as ls, Store(tmp_path / "follower") as fs:
        leader = leader_log(ls)
        fs.create_topic("t", 1, SMALL)
        fs.follow("t", SOURCE)
        copy(leader, fs.log("t", 0), [])
        leader.append_marker(1002, 0, commit=False)
        leader.append([b"last"])
        copy(leader, fs.log("t", 0), [])
        assert fs.log("t", 0).last_stable_offset == leader.next_offset
        expected = files(leader, ".txnindex")
        assert files(fs.log("t", 0), ".txnindex") == expected
    with Store(tmp_path / "follower") as fs:  # reopened: the state replayed from the files
        follower = fs.log("t", 0)
        assert files(follower, ".txnindex") == expected
        assert [r.value for r in follower.scan(committed=True)][-1] == b"last"


def test_a_followed_partition_refuses_every_change_but_the_followers(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t", 2)
        store.log("t", 0).append([b"before"])
        store.follow("t", SOURCE)
        log = store.log("t", 0)
        refusals = [
            lambda: log.append([b"x"]),
            lambda: log.append_batches([producer_batch([b"x"], -1, -1, -1)]),
            lambda: append_txn(log, [b"x"], 5, 0, 0),
            lambda: log.append_marker(5, 0, commit=True),
            lambda: log.delete_records(1),
            lambda: store.append_to_topic("t", [b"x"]),
            lambda: store.set_topic_config("t", {"retention.ms": "1000"}),
            lambda: store.add_partitions("t", 3),
            lambda: store.delete_topic("t"),
        ]  # fmt: skip
        for refused in refusals:
            with pytest.raises(ReadOnlyError, match="follows kafka://leader:9092"):
                refused()
        assert log.append_line(b"x") is None  # the fast path leaves it to `append`
        assert log.next_offset == 1 and store.topics()["t"] == 2
        store.follow("t", None)  # no longer followed: an ordinary topic again
        assert log.append([b"after"]) == 1


def test_a_partition_opened_later_is_followed_too(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
    with Store(tmp_path / "data", recover=False) as store:
        store.follow("t", SOURCE)  # before the partition is opened
        with pytest.raises(ReadOnlyError):
            store.log("t", 0).append([b"x"])


def test_bad_copies_are_refused_whole(tmp_path):
    with Store(tmp_path / "leader") as ls, Store(tmp_path / "follower") as fs:
        leader = leader_log(ls)
        fs.create_topic("t", 1, SMALL)
        fs.follow("t", SOURCE)
        follower = fs.log("t", 0)
        data = bytearray(log_bytes(leader))
        data[200] ^= 0xFF  # in the second batch's records: its CRC fails
        with pytest.raises(InvalidBatchError, match="crc"):
            follower.following.append(bytes(data))
        assert follower.next_offset == 0  # not even the good first batch went in
        (first, _), (second, _) = list(leader.raw_batches())[:2]
        follower.following.append(log_bytes(leader)[: first.size])
        overlapping = bytearray(log_bytes(leader)[first.size : first.size + second.size])
        overlapping[0:8] = (first.next_offset - 1).to_bytes(8, "big")  # 4..5 over the end 5
        with pytest.raises(InvalidBatchError, match="overlaps"):
            follower.following.append(bytes(overlapping))
        assert follower.next_offset == first.next_offset


def test_the_log_start_follows_the_leaders_and_restarts_past_the_end(tmp_path):
    with Store(tmp_path / "leader") as ls, Store(tmp_path / "follower") as fs:
        leader = leader_log(ls)
        fs.create_topic("t", 1, SMALL)
        fs.follow("t", SOURCE)
        follower = fs.log("t", 0)
        copy(leader, follower, [])
        segments, start = len(files(follower, ".log")), follower.segments[2].base_offset + 1
        assert follower.following.start_at(start) == start == follower.log_start_offset
        assert len(files(follower, ".log")) == segments - 2  # the segments wholly below went
        assert follower.following.start_at(3) == start  # never back
        end = follower.next_offset
        assert follower.following.start_at(end + 100) == end + 100  # past the end: restarted
        assert follower.next_offset == follower.log_start_offset == end + 100
        assert [p.name for p in follower.dir.glob("*.log")] == [f"{end + 100:020d}.log"]
        assert follower.open_transactions() == []  # what the deleted batches said went
        batch = producer_batch([b"new"], -1, -1, -1)
        moved = bytearray(batch)
        moved[0:8] = (end + 100).to_bytes(8, "big")
        follower.following.append(bytes(moved))
        assert [r.value for r in follower.scan()] == [b"new"]
    with Store(tmp_path / "follower") as fs:  # the restart survives a reopen
        assert fs.log("t", 0).log_start_offset == end + 100
        assert [r.offset for r in fs.log("t", 0).scan()] == [end + 100]


def test_a_torn_tail_is_fetched_again_after_a_crash(tmp_path):
    with Store(tmp_path / "leader") as ls:
        leader = leader_log(ls)
        whole, leader_end = log_bytes(leader), leader.next_offset
        leader_files = files(leader, ".log")
    with Store(tmp_path / "follower") as fs:
        fs.create_topic("t", 1, SMALL)
        fs.follow("t", SOURCE)
        fs.log("t", 0).following.append(whole)
    last = sorted((tmp_path / "follower" / "t-0").glob("*.log"))[-1]
    cut = random.Random(7).randrange(1, last.stat().st_size)
    with open(last, "r+b") as f:  # what a kill -9 in a write can leave
        f.truncate(cut)
    (tmp_path / "follower" / "recovery-point-offset-checkpoint").unlink()
    with Store(tmp_path / "follower") as fs:
        fs.follow("t", SOURCE)
        follower = fs.log("t", 0)
        assert follower.next_offset < leader_end
        follower.following.append(whole)  # a fetch from its log end: the rest comes
        assert files(follower, ".log") == leader_files


def test_a_log_start_inside_a_batch_starts_the_copy_at_the_batch(tmp_path):
    """The leader's log start inside a batch (DeleteRecords): an empty follower
    restarted there gets the whole batch, starts at its base offset, then takes the
    leader's log start; its file is the leader's."""
    with Store(tmp_path / "leader") as ls, Store(tmp_path / "follower") as fs:
        ls.create_topic("t")
        leader = ls.log("t", 0)
        leader.append([b"first %d" % i for i in range(10)])  # one batch: 0..9
        leader.append([b"second"])
        assert leader.delete_records(5) == 5
        fs.create_topic("t")
        fs.follow("t", SOURCE)
        follower = fs.log("t", 0)
        assert follower.following.start_at(5) == 5  # what OFFSET_OUT_OF_RANGE leads to
        follower.following.append(log_bytes(leader))  # a fetch at 5: the batch 0..9 first
        assert follower.following.start_at(leader.log_start_offset) == 5
        assert (follower.log_start_offset, follower.next_offset) == (5, 11)
        assert files(follower, ".log") == files(leader, ".log")
        assert [r.value for r in follower.scan()] == [r.value for r in leader.scan()]
        assert follower.following.append(log_bytes(leader)) == 11  # fetched again: skipped
        assert files(follower, ".log") == files(leader, ".log")
