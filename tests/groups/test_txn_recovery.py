"""A ``logfs serve`` daemon killed (SIGKILL) between a transaction's prepare and
its markers finishes it at restart, as Kafka's coordinator does: the decision is
in ``__transaction_state``, so the markers still missing are written, the
transaction becomes CompleteCommit (or CompleteAbort), every partition's last
stable offset reaches its log end, and a read_committed consumer (librdkafka's)
sees the committed records exactly once and the aborted ones never.

The kill is deterministic: the daemon runs with its coordinator wrapped from
outside (tests/helpers/txn_crash.py) so that it SIGKILLs itself right after the
prepare is written and after a chosen number of markers. The producer is a real
librdkafka one whose EndTxn was under way when the daemon died; it retries it
against the restarted daemon (same address) and is answered as for a retry.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka_helpers import Served, call
from kio.index import load_request_schema
from mount_helpers import LOGFS
from txn_helpers import append_txn, end_offsets, read_all

from logfs.core.log import Store
from logfs.groups import Coordinator, TransactionCoordinator, txn_log

CRASH = Path(__file__).resolve().parents[1] / "helpers" / "txn_crash.py"
PARTITIONS = 3
RECORDS = 9
DESCRIBE_TRANSACTIONS = 65


class Crashing(Served):
    """``logfs serve`` that SIGKILLs itself after a prepare and ``markers`` markers."""

    def __init__(self, data: Path, markers: int, listen: str):
        super().__init__(data, listen=listen)
        self.markers = markers

    def command(self) -> list[str]:
        return [sys.executable, str(CRASH), str(self.markers), *super().command()[len(LOGFS) :]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe(address, txn_id: str):
    t = load_request_schema(DESCRIBE_TRANSACTIONS, 0)
    return call(address, DESCRIBE_TRANSACTIONS, 0, t(transactional_ids=(txn_id,)))


@pytest.mark.parametrize(
    ("commit", "markers"),
    [(True, 0), (True, 1), (True, 2), (False, 0), (False, 2)],
    ids=["commit-no-marker", "commit-one-marker", "commit-two-markers",
         "abort-no-marker", "abort-two-markers"],
)  # fmt: skip
def test_a_daemon_killed_between_prepare_and_markers_finishes_at_restart(tmp_path, commit, markers):
    from confluent_kafka import Producer

    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("out", partitions=PARTITIONS)
    listen = f"127.0.0.1:{free_port()}"
    crashing = Crashing(data, markers, listen).start()
    producer = Producer({
        "bootstrap.servers": crashing.bootstrap, "transactional.id": "t",
        "transaction.timeout.ms": 60000, "reconnect.backoff.max.ms": 200, "log_level": 2,
    })  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce("out", f"r{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)  # in the partitions before the decision
    ended: list[BaseException | None] = []

    def end() -> None:
        try:
            (producer.commit_transaction if commit else producer.abort_transaction)(90)
            ended.append(None)
        except BaseException as e:  # reported by the main thread
            ended.append(e)

    ending = threading.Thread(target=end, daemon=True)
    ending.start()
    assert crashing.proc.wait(timeout=60) == -signal.SIGKILL, crashing.output()
    assert "txn_crash: killed" in crashing.output()

    # On disk: the decision is prepared, ``markers`` partitions have their marker
    # and the others still hold the transaction open.
    with Store(data, read_only=True) as store:
        stored = txn_log.load(store)["t"]
        assert stored.status == (txn_log.PREPARE_COMMIT if commit else txn_log.PREPARE_ABORT)
        still_open = [
            p for p in range(PARTITIONS) if store.log("out", p).open_transactions()
        ]  # fmt: skip
        assert len(still_open) == PARTITIONS - markers
        assert all(store.log("out", p).last_stable_offset == 0 for p in still_open), (
            "an open transaction holds the LSO"
        )

    with Served(data, listen=listen) as served:
        ending.join(timeout=90)
        assert ended == [None], f"the client's EndTxn retry failed: {ended}"
        [state] = describe(served.address, "t").transaction_states
        assert state.transaction_state == ("CompleteCommit" if commit else "CompleteAbort")
        ends = end_offsets(served.address, "out", PARTITIONS, isolation=0)
        assert end_offsets(served.address, "out", PARTITIONS, isolation=1) == ends
        records = {p: [f"r{i}".encode() for i in range(p, RECORDS, PARTITIONS)]
                   for p in range(PARTITIONS)}  # fmt: skip
        committed = read_all(served.bootstrap, "out", PARTITIONS, "read_committed")
        values = {p: [v for _, _, v in got] for p, got in committed.items()}
        assert values == (records if commit else {p: [] for p in range(PARTITIONS)})
        everything = read_all(served.bootstrap, "out", PARTITIONS, "read_uncommitted")
        assert {p: [v for _, _, v in got] for p, got in everything.items()} == records
        # the id goes on: the next transaction of the same producer commits
        producer.begin_transaction()
        producer.produce("out", b"next", partition=0)
        producer.commit_transaction(30)
        after = read_all(served.bootstrap, "out", PARTITIONS, "read_committed")
        assert [v for _, _, v in after[0]] == values[0] + [b"next"]
        assert end_offsets(served.address, "out", PARTITIONS, isolation=1) == end_offsets(
            served.address, "out", PARTITIONS, isolation=0
        )


def test_a_prepared_transaction_is_completed_by_a_daemon_that_never_hears_of_it_again(
    tmp_path,
):
    """Without any client coming back: the restarted daemon finishes the commit on
    its own (at load), and a fresh read_committed consumer sees the records once."""
    data = tmp_path / "data"
    with Store(data) as store:
        store.create_topic("out", partitions=PARTITIONS)
    crashing = Crashing(data, 1, "127.0.0.1:0").start()
    script = (
        "from confluent_kafka import Producer\n"
        f"p = Producer({{'bootstrap.servers': {crashing.bootstrap!r}, 'transactional.id': 'g'}})\n"
        "p.init_transactions(30)\np.begin_transaction()\n"
        f"for i in range({RECORDS}): p.produce('out', b'g%d' % i, partition=i % {PARTITIONS})\n"
        "p.flush(30)\np.commit_transaction(120)\n"
    )
    client = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.DEVNULL)
    try:
        assert crashing.proc.wait(timeout=60) == -signal.SIGKILL, crashing.output()
    finally:
        client.kill()
        client.wait(timeout=30)
    with Served(data) as served:
        deadline = time.monotonic() + 30
        while state_name(served, "g") != "CompleteCommit":
            assert time.monotonic() < deadline, state_name(served, "g")
            time.sleep(0.1)
        committed = read_all(served.bootstrap, "out", PARTITIONS, "read_committed")
        assert {p: [v for _, _, v in got] for p, got in committed.items()} == {
            p: [b"g%d" % i for i in range(p, RECORDS, PARTITIONS)] for p in range(PARTITIONS)
        }
        assert end_offsets(served.address, "out", PARTITIONS, isolation=1) == end_offsets(
            served.address, "out", PARTITIONS, isolation=0
        )


def state_name(served, txn_id: str) -> str:
    return describe(served.address, txn_id).transaction_states[0].transaction_state


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_retried_end_keeps_the_decision(tmp_path, commit):
    """EndTxn retried after it completed (its answer lost, or the daemon restarted
    and finished it at load) is answered as done and changes nothing: before, the
    retry of a commit wrote CompleteAbort over CompleteCommit."""
    with Store(tmp_path / "data") as store:
        store.create_topic("out", partitions=2)
        txns = TransactionCoordinator(store, Coordinator(store))
        pid, epoch = txns.init_producer_id("t", 60000)
        txns.add_partitions("t", pid, epoch, [("out", 0), ("out", 1)])
        for p in range(2):
            append_txn(store.log("out", p), [b"v"], pid, epoch, 0)
        txns.end_txn("t", pid, epoch, commit)
        done = "CompleteCommit" if commit else "CompleteAbort"
        assert txns.transaction("t").state_name == done
        ends = [store.log("out", p).next_offset for p in range(2)]
        txns.end_txn("t", pid, epoch, commit)  # the retry
        assert txns.transaction("t").state_name == done
        assert [store.log("out", p).next_offset for p in range(2)] == ends  # no marker again
        assert txn_log.load(store)["t"].status == txns.transaction("t").status
        again = TransactionCoordinator(store, Coordinator(store))  # a restart's load
        again.end_txn("t", pid, epoch, commit)
        assert again.transaction("t").state_name == done
        assert txn_log.load(store)["t"].status == again.transaction("t").status


def test_offsets_of_a_producers_successive_transactions_survive_a_restart(tmp_path):
    """Each transaction's offsets are a batch of sequence -1 in ``__consumer_offsets``
    (the coordinator writes it for the producer); the second and later ones of an
    epoch were taken for retries of the first and left out, so a restart went back
    to the first transaction's offsets and a consume-transform-produce loop read
    its input again."""
    data = tmp_path / "data"
    member = (-1, "", None)
    with Store(data) as store:
        store.create_topic("in", partitions=2)
        txns = TransactionCoordinator(store, Coordinator(store))
        pid, epoch = txns.init_producer_id("t", 60000)
        for n in (5, 9, 14):
            txns.add_offsets("t", pid, epoch, "g")
            offsets = {("in", 0): (n, -1, ""), ("in", 1): (n + 1, -1, "")}
            assert set(txns.txn_offset_commit("t", pid, epoch, "g", member, offsets).values()) == {
                0
            }
            txns.end_txn("t", pid, epoch, commit=True)
        txns.add_offsets("t", pid, epoch, "g")  # an aborted one counts for nothing
        txns.txn_offset_commit("t", pid, epoch, "g", member, {("in", 0): (99, -1, "")})
        txns.end_txn("t", pid, epoch, commit=False)
        live = {tp: c.offset for tp, c in Coordinator(store).committed("g").items()}
    assert live == {("in", 0): 14, ("in", 1): 15}
    with Store(data) as store:  # a restart reads them back
        assert {tp: c.offset for tp, c in Coordinator(store).committed("g").items()} == live
