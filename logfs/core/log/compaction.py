"""Compaction of segments, record by record: the offset map and the cleaned
segment of a group (the steps 2 and 3 of cleaner.py).

`offset_map` maps each key of the dirty part to its latest offset, keyed by
a 128-bit hash of the key as Kafka's map keys by MD5 (`_keymap.OffsetMap`).
`write_cleaned` rewrites a group of segments into one, written aside. A
record stays unless a later record has its key, it is a tombstone (a null
value) older than delete.retention.ms, or it has no key (Kafka drops those
too). A batch whose records all stay is copied as it is; the others get a new
header over the kept records' bytes, unchanged (so their offsets,
timestamps, keys, values and headers are), with the batch's codec, base
offset, base timestamp and last offset; a batch with none left goes. The
per-record work is compiled (`_keymap.OffsetMap`, `_keymap.keep_records`).
Offsets never change: cleaning leaves gaps.

Transactions, as Kafka's cleaner treats them (`TxnCleaning`): the cleaned range
is below the last stable offset, so every transaction in it is decided. Records
of aborted transactions are left out of the key map and of the cleaned segment;
committed transactional records are compacted like any others; a marker goes
once it is older than delete.retention.ms and no record of its transaction is
left (an ABORT marker's never are), else it is copied, with its
``.txnindex`` entry for an ABORT.

Both read the old segments through descriptors of their own and touch
nothing else of the log, so they can run in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from ..config import TopicConfig
from ..errors import CorruptRecordError
from ..format import compression
from ..format.batching import BatchInfo
from ..format.record import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    pack_header_into,
    records_section,
)
from ..storage.logfile import iter_batches
from ..storage.segment import LogSegment
from ..storage.swap import aside
from ..storage.txnindex import AbortedTxn
from ._keymap import OffsetMap, keep_records
from .isolation import Visibility

INT64_MIN = -(1 << 63)


class Cleaned(NamedTuple):
    """A group's cleaned segment, written aside (None: nothing is left of
    the group), and how many records were read and kept."""

    segment: LogSegment | None
    records_read: int
    records_kept: int


class TxnCleaning:
    """What one cleaning knows of transactions as it walks the groups in offset
    order: the aborted ones of its range (``view``), their index entries, and per
    producer whether a record of its current transaction was kept."""

    def __init__(self, view: Visibility, entries: dict[int, AbortedTxn]) -> None:
        self.view = view
        self.entries = entries  # by marker offset
        self.kept: dict[int, bool] = {}

    def keep_marker(self, header: BatchHeader, horizon: int) -> bool:
        """Whether the marker ``header`` stays (module docstring)."""
        aborted = header.base_offset in self.entries
        kept = self.kept.pop(header.producer_id, False) and not aborted
        return kept or header.max_timestamp >= horizon


def offset_map(
    segments: list[LogSegment], fds: list[int], first_dirty: int, view: Visibility | None = None
) -> OffsetMap:
    """Each key's latest offset among the records at or after ``first_dirty``
    (``fds``: the segments' descriptors to read), aborted transactions' left out."""
    latest = OffsetMap()
    for segment, fd in zip(segments, fds, strict=True):
        if segment.next_offset <= first_dirty:
            continue
        for _, header, batch in iter_batches(fd, 0, segment.size, path=segment.log_path):
            aborted = view is not None and view.aborted(header)
            if header.is_control or aborted or header.last_offset < first_dirty:
                continue
            body = records_section(batch, header)
            bad = latest.map(body, header.records_count, header.base_offset, first_dirty)
            if bad >= 0:
                raise _malformed(segment, header, bad)
    return latest


def write_cleaned(
    directory: str,
    config: TopicConfig,
    group: list[LogSegment],
    fds: list[int],
    latest: OffsetMap,
    now_ms: int,
    throttle: Callable[[int], None] = lambda n: None,
    txns: TxnCleaning | None = None,
) -> Cleaned:
    """Write the cleaned segment of ``group`` aside in ``directory``
    (``B.*.cleaned``, fsynced, closed: storage/swap.py); returns it (None
    when nothing is left), records read and kept. Reads the group's segments
    through ``fds``; ``txns``: the cleaning's transactions (`TxnCleaning`)."""
    horizon = now_ms - config.delete_retention_ms
    txns = txns or TxnCleaning(Visibility.everything(0), {})
    cleaned = aside(directory, group[0].base_offset, config)
    read = kept = 0
    try:
        for segment, fd in zip(group, fds, strict=True):
            pending: list[bytes] = []
            infos: list[BatchInfo] = []
            for _, header, batch in iter_batches(fd, 0, segment.size, path=segment.log_path):
                throttle(header.size)
                if header.is_control:
                    if txns.keep_marker(header, horizon):
                        pending.append(bytes(batch))
                        info = BatchInfo(header.size, header.last_offset, header.max_timestamp)
                        infos.append(info)
                        entry = txns.entries.get(header.base_offset)
                        if entry is not None:
                            cleaned.txn_index.append(entry)
                    continue
                if header.is_transactional and txns.view.aborted(header):
                    read += header.records_count
                    continue
                log_append = header.timestamp_type == LOG_APPEND_TIME
                kept_here, section, max_delta = keep_records(
                    records_section(batch, header), header.records_count, header.base_offset,
                    header.base_timestamp, header.max_timestamp if log_append else INT64_MIN,
                    latest, horizon,
                )  # fmt: skip
                if kept_here < 0:
                    raise _malformed(segment, header, -1 - kept_here)
                read += header.records_count
                kept += kept_here
                if not kept_here:
                    continue
                if header.is_transactional:
                    txns.kept[header.producer_id] = True
                max_ts = header.max_timestamp
                if section is not None:
                    if not log_append:
                        max_ts = header.base_timestamp + max_delta
                    batch = _rebuilt(header, section, kept_here, max_ts)
                pending.append(bytes(batch))
                infos.append(BatchInfo(len(batch), header.last_offset, max_ts))
            if pending:
                cleaned.append(pending, infos)
                throttle(sum(i.size for i in infos))
        if not cleaned.size:
            cleaned.delete()
            return Cleaned(None, read, kept)
        cleaned.on_become_inactive()
        for fd in cleaned.sync_fds():
            os.fdatasync(fd)
        cleaned.close()
    except BaseException:
        cleaned.delete()
        raise
    return Cleaned(cleaned, read, kept)


def _rebuilt(header: BatchHeader, section: bytes, count: int, max_timestamp: int) -> bytes:
    """A batch holding the kept records' bytes ``section``: the header's base
    offset, base timestamp, last offset delta, codec and timestamp type stay."""
    if header.codec != compression.NONE:
        section = compression.compress(header.codec, section)
    batch = bytearray(HEADER_SIZE + len(section))
    batch[HEADER_SIZE:] = section
    pack_header_into(
        batch, 0, header.base_offset, len(batch), header.attributes, count,
        header.base_timestamp, max_timestamp, header.last_offset_delta,
    )  # fmt: skip
    return bytes(batch)


def _malformed(segment: LogSegment, header: BatchHeader, record: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{segment.log_path}: batch at offset {header.base_offset}: record {record} is malformed"
    )
