"""What a `Producer` holds between flushes, per partition (Kafka's
RecordAccumulator): its records cut into batches by the one cutting rule
(`batching.Cutter`), encoded with their offsets relative to 0, and the open
batch still taking records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..config import TopicConfig
from ..errors import RecordTooLargeError
from ..format import compression
from ..format.batching import BatchInfo, Cutter, Records, encode_within
from ..format.record import CREATE_TIME, HEADER_SIZE, encode_batch


class Receipt(NamedTuple):
    """Offsets ``first_offset..last_offset`` of ``topic``-``partition`` hold
    this producer's records, in the order they were sent."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ProducerRecord(NamedTuple):
    """One record as `Producer.send` queues it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    @classmethod
    def checked(
        cls,
        value,
        key,
        headers: Iterable[tuple[str, bytes | None]] | None,
        timestamp: int,
    ) -> ProducerRecord:
        """The record, its bytes-like fields as bytes.

        Raises:
            TypeError: a value, key or header value that is not bytes-like or
                None; a header name that is not a str.
        """
        value, key = _bytes(value, "value"), _bytes(key, "key")
        record_headers = tuple((_name(k), _bytes(v, "header value")) for k, v in headers or ())
        return cls(key, value, record_headers, timestamp)


def as_records(rows: Sequence[ProducerRecord]) -> Records:
    """The rows column by column, without the columns no row uses."""
    keys = [r.key for r in rows]
    headers = [r.headers for r in rows]
    timestamps = [r.timestamp for r in rows]
    return Records(
        [r.value for r in rows],
        keys if any(k is not None for k in keys) else None,
        headers if any(headers) else None,
        timestamps[0] if min(timestamps) == max(timestamps) else timestamps,
    )


def check_fits(topic: str, config: TopicConfig, codec: int, bound: int, record: ProducerRecord):
    """Refuse a record that alone, as a batch, exceeds the topic's max.message.bytes.

    Args:
        bound: the record's `batching.record_bound`.

    Raises:
        RecordTooLargeError: with the batch's exact size.
    """
    limit = config.max_message_bytes
    bound += HEADER_SIZE
    # Incompressible data grows a little when compressed: near the limit, encode to know.
    if bound + (0 if codec == compression.NONE else bound // 64 + 1024) <= limit:
        return
    records = as_records([record])
    exact = len(
        encode_batch(
            0, records.values, keys=records.keys, headers=records.headers,
            timestamps=records.timestamps, codec=codec,
        )
    )  # fmt: skip
    if exact > limit:
        raise RecordTooLargeError(
            f"record of {exact} bytes (as a batch) exceeds max.message.bytes={limit} "
            f"of topic {topic!r}"
        )


class PartitionBatches:
    """One partition's pending records: closed, encoded batches (and the
    records in each) and the open batch."""

    def __init__(self, batch_bytes: int, max_message_bytes: int) -> None:
        self.batch_bytes = batch_bytes
        self.batches: list[bytes] = []
        self.counts: list[int] = []
        self.open: list[ProducerRecord] = []
        self.cutter = Cutter(batch_bytes, max_message_bytes)

    @property
    def open_bytes(self) -> int:
        """The size bounds of the open batch's records."""
        return self.cutter.bytes if self.open else 0

    def full(self, bound: int) -> bool:
        """Whether a record of this size bound would start a new batch."""
        return bool(self.open) and self.cutter.full(bound)

    def add(self, record: ProducerRecord, bound: int, codec: int, limit: int) -> int:
        """Queue a record, closing the open batch first if the record starts
        a new one; the change in pending bytes."""
        change = self.close(codec, limit) if self.full(bound) else 0
        self.cutter.add(bound)
        self.open.append(record)
        return change + bound

    def close(self, codec: int, limit: int) -> int:
        """Encode the open batch (``codec``, at most ``limit`` bytes a batch);
        the change in pending bytes."""
        if not self.open:
            return 0
        change = -self.open_bytes
        change += self.extend(encode_within(as_records(self.open), 0, codec, CREATE_TIME, limit))
        self.open = []
        self.cutter = Cutter(self.batch_bytes, limit)
        return change

    def extend(self, encoded: Sequence[tuple[bytes, BatchInfo]]) -> int:
        """Queue batches encoded from offset 0; their bytes."""
        first, size = 0, 0
        for batch, info in encoded:
            self.batches.append(batch)
            self.counts.append(info.last_offset + 1 - first)
            first = info.last_offset + 1
            size += len(batch)
        return size


def _bytes(data, what: str) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"a record's {what} must be bytes or None, not {type(data).__name__}")


def _name(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a header name must be a str, not {type(name).__name__}")
    return name


def pick(items: Sequence | None, rows: Sequence[int]) -> Sequence | None:
    """``items`` at the indexes ``rows`` (all of them, uncopied, if rows covers them)."""
    if items is None or len(rows) == len(items):
        return items
    return [items[i] for i in rows]
