"""The small-write fast path: one unkeyed record appended to a partition's active segment.

Web servers and loggers write one line per ``write()``. Through `Log.append`
each such line pays for machinery sized for many records (cutting records
into batches, a list of values, the general encoder). `append_line` encodes
the one-record batch directly (the same bytes `Log.append` writes) and hands
it to the log's one write path (`Log._write`: the roll rule, one ``write()``,
the index, what a flush must sync). It declines (returns None) whenever the
general path has more to decide: a compacted, compressed, offline or
read-only log, a record near the size limit. The caller then takes the
general path, which decides as before.
"""

from __future__ import annotations

from ..format import compression, max_record_bytes
from ..format.batching import BatchInfo
from ..format.record import HEADER_SIZE, TIMESTAMP_TYPE_BIT, pack_header_into, varint
from .partition import Log

# A record without key and headers at offset and timestamp delta 0: attributes,
# timestamp delta, offset delta, key length -1; then the value's length, the
# value, and a headers count of 0.
RECORD_START = b"\x00\x00\x00\x01"
# Values up to this size take the fast path; longer ones are rare in line-at-a-time
# writers and the general path checks them against max.message.bytes exactly.
MAX_VALUE = 64 << 10


def append_line(log: Log, value: bytes) -> int | None:
    """Append one record holding ``value`` (no key, no headers, the time now)
    if the fast path applies: its offset, else None and nothing appended.

    Raises:
        OSError: writing the segment failed (the partition goes offline unless
            it is a clean ENOSPC, as in `Log.append`).
    """
    config = log.config
    if (
        not log.writable
        or log.failure is not None
        or config.compact
        or len(value) > MAX_VALUE
        or len(value) >= max_record_bytes(config)
        or compression.BY_NAME[config.compression_type] != compression.NONE
    ):
        return None
    first = log.next_offset
    record = varint(len(RECORD_START) + len(varint(len(value))) + len(value) + 1)
    record += RECORD_START + varint(len(value)) + value + b"\x00"
    size = HEADER_SIZE + len(record)
    if size > config.max_message_bytes:
        return None
    now = log.clock()
    batch = bytearray(size)
    batch[HEADER_SIZE:] = record
    attributes = TIMESTAMP_TYPE_BIT if config.message_timestamp_type == "LogAppendTime" else 0
    pack_header_into(batch, 0, first, size, attributes, 1, now, now)
    info = BatchInfo(size, first, now, len(value) + 1)
    log._write([(bytes(batch), info)], 1, now)  # noqa: SLF001 - the log's one write path
    return first
