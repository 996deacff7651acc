"""The files and records transactions add, byte for byte as Kafka writes them:
``.snapshot`` (Kafka's ProducerSnapshot message, version 1), ``.txnindex``
(AbortedTxn, version 0), control records (ControlRecordType key and
EndTransactionMarker value), ``__transaction_state`` (TransactionLogKey v0 and
TransactionLogValue v0). The expected bytes are written out field by field from
Kafka's schemas, not from logfs's structs; kafka-python's record decoder reads the
control and transactional batches a log holds."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from txn_helpers import decoded, producer_batch

from logfs.core.errors import CorruptIndexError
from logfs.core.format import control
from logfs.core.log import Store
from logfs.core.storage import snapshot, txnindex
from logfs.groups import txn_log


def test_snapshot_is_kafkas_producer_snapshot_v1():
    entry = snapshot.SnapshotEntry(
        producer_id=0x0102030405060708,
        epoch=3,
        last_sequence=41,
        last_offset=1000,
        offset_delta=4,
        timestamp=1700000000123,
        coordinator_epoch=2,
        txn_first_offset=996,
    )
    body = bytes.fromhex(
        "00000001"  # ProducerEntries: array length (int32; version 1 is not flexible)
        "0102030405060708"  # ProducerId int64
        "0003"  # Epoch int16
        "00000029"  # LastSequence int32: 41
        "00000000000003e8"  # LastOffset int64: 1000
        "00000004"  # OffsetDelta int32
        "0000018bcfe5687b"  # Timestamp int64: 1700000000123
        "00000002"  # CoordinatorEpoch int32
        "00000000000003e4"  # CurrentTxnFirstOffset int64: 996
    )
    # version int16, then Crc uint32 over everything after it (Kafka's PRODUCER_ENTRIES_OFFSET 6)
    expected = bytes.fromhex("0001") + crc32c(body).to_bytes(4, "big") + body
    assert snapshot.encode([entry]) == expected
    assert snapshot.decode(expected) == [entry]
    empty = bytes.fromhex("0001") + crc32c(b"\0\0\0\0").to_bytes(4, "big") + b"\0\0\0\0"
    assert snapshot.encode([]) == empty


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-1],  # torn
        lambda b: b[:8] + bytes([b[8] ^ 1]) + b[9:],  # a flipped bit under the CRC
        lambda b: b"\x00\x02" + b[2:],  # a version Kafka does not write
        lambda b: b"",
    ],
)
def test_a_damaged_snapshot_is_refused(damage):
    good = snapshot.encode([snapshot.SnapshotEntry(7, 0, 4, 10, 0, 123, -1, -1)])
    with pytest.raises(CorruptIndexError):
        snapshot.decode(damage(good))


def test_txnindex_entry_is_kafkas_aborted_txn():
    txn = txnindex.AbortedTxn(producer_id=9, first_offset=3, last_offset=6, last_stable_offset=7)
    expected = bytes.fromhex(
        "0000"  # version int16: 0
        "0000000000000009"  # producerId int64
        "0000000000000003"  # firstOffset int64
        "0000000000000006"  # lastOffset int64 (the abort marker's)
        "0000000000000007"  # lastStableOffset int64
    )
    assert len(expected) == 34  # Kafka's AbortedTxn.TOTAL_SIZE
    assert txnindex.encode(txn) == expected
    assert txnindex.decode(expected + expected[:2] + struct.pack(">qqqq", 9, 8, 12, 13)) == [
        txn,
        txnindex.AbortedTxn(9, 8, 12, 13),
    ]
    with pytest.raises(CorruptIndexError):
        txnindex.decode(expected + expected)  # last offsets must grow
    with pytest.raises(CorruptIndexError):
        txnindex.decode(expected[:-1])


def test_markers_and_transactional_batches_read_by_kafka_python(tmp_path):
    with Store(tmp_path / "data") as store:
        store.create_topic("t")
        log = store.log("t", 0)
        log.append_batches(
            [producer_batch([b"a", b"b"], 5, 1, 0, transactional=True)], transactional=True
        )
        log.append_marker(5, 1, commit=True, coordinator_epoch=3)
        log.append_batches(
            [producer_batch([b"c"], 5, 1, 2, transactional=True)], transactional=True
        )
        log.append_marker(5, 1, commit=False)
        data = (log.dir / "00000000000000000000.log").read_bytes()
    batches = decoded(data)
    assert [(b.base_offset, b.is_transactional, b.is_control_batch) for b, _ in batches] == [
        (0, True, False),
        (2, True, True),
        (3, True, False),
        (4, True, True),
    ]
    assert [r.value for r in batches[0][1]] == [b"a", b"b"]
    for (batch, [marker]), commit, epoch in ((batches[1], True, 3), (batches[3], False, 0)):
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 1, -1)
        assert marker.commit is commit and marker.abort is not commit and marker.version == 0
        # EndTransactionMarker's value: version int16 0, coordinator epoch int32
        assert marker.value == struct.pack(">hi", 0, epoch)
        assert marker.key == struct.pack(">hh", 0, 1 if commit else 0)


def test_control_record_layout():
    batch = control.marker_batch(42, 7, True, 11, 1700000000000)
    records = decoded(batch)
    [(header, [marker])] = records
    assert header.is_control_batch and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 7, -1)
    assert marker.key == bytes.fromhex("00000001")  # ControlRecordType v0, COMMIT
    assert marker.value == bytes.fromhex("00000000000b")  # EndTransactionMarker v0, epoch 11
    assert marker.timestamp == 1700000000000


def test_transaction_state_records_are_kafkas():
    assert txn_log.key("app-1") == bytes.fromhex("00000005") + b"app-1"
    state = txn_log.StoredTxn(
        producer_id=77,
        producer_epoch=2,
        timeout_ms=60000,
        status=txn_log.PREPARE_COMMIT,
        partitions=(("out", 1), ("out", 0), ("__consumer_offsets", 0)),
        last_update_ms=1700000000500,
        start_ms=1700000000000,
    )
    expected = (
        bytes.fromhex("0000")  # value version 0
        + bytes.fromhex("000000000000004d")  # ProducerId int64
        + bytes.fromhex("0002")  # ProducerEpoch int16
        + bytes.fromhex("0000ea60")  # TransactionTimeoutMs int32
        + bytes.fromhex("02")  # TransactionStatus int8: PrepareCommit
        + bytes.fromhex("00000002")  # TransactionPartitions: 2 topics
        + bytes.fromhex("0012") + b"__consumer_offsets" + bytes.fromhex("00000001" "00000000")
        + bytes.fromhex("0003") + b"out" + bytes.fromhex("00000002" "00000000" "00000001")
        + bytes.fromhex("0000018bcfe569f4")  # TransactionLastUpdateTimestampMs
        + bytes.fromhex("0000018bcfe56800")  # TransactionStartTimestampMs
    )  # fmt: skip
    assert txn_log.value(state) == expected
    back = txn_log.read_value(expected)
    assert back._replace(partitions=tuple(sorted(back.partitions))) == state._replace(
        partitions=tuple(sorted(state.partitions))
    )
    # Kafka writes an Empty transaction's partitions as a null array
    empty = state._replace(status=txn_log.EMPTY, partitions=())
    assert txn_log.value(empty)[17:21] == bytes.fromhex("ffffffff")
    assert txn_log.read_value(txn_log.value(empty)).partitions == ()
