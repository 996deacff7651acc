"""The reference decoder: the records of one batch, in Python, field by
field as record.py lays them out. `decode_records` decodes every record of a
batch (the general reads, the offline tools, recompression); `record_at`
finds one by its offset (``offset/<n>``, `Log.read`). The column-wise
decoder of many batches at once is columnar.py."""

from __future__ import annotations

from ..errors import CorruptRecordError
from .record import LOG_APPEND_TIME, BatchHeader, Record, read_header, records_section
from .walker import find_record


def read_varint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """The zig-zag varint at ``buf[pos]`` and the position after it.

    Raises:
        IndexError: the varint runs past the end of ``buf``.
        CorruptRecordError: it is longer than 10 bytes.
    """
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z = (b & 0x7F) | (buf[pos + 1] << 7)
    if z < 0x4000:  # two bytes (values under 8192): no loop, as for most lengths
        return (z >> 1) ^ -(z & 1), pos + 2
    z, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos + 1
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def decode_records(batch: bytes | memoryview, header: BatchHeader | None = None) -> list[Record]:
    """All records of a whole (validated) batch, with absolute offsets.

    Raises:
        CorruptRecordError: the records section does not parse as the header says.
    """
    if header is None:
        header = read_header(batch)
    body = bytes(records_section(batch, header))  # bytes: keys and values are slices of it
    try:
        return _decode_body(body, header)
    except (IndexError, UnicodeDecodeError) as e:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset}: bad records section: {e}"
        ) from None


def _read_bytes(body: bytes, pos: int) -> tuple[bytes | None, int]:
    """A length-prefixed bytes field (length -1: None) and the position after it."""
    length, pos = read_varint(body, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"a field length of {length}")
        return None, pos
    return body[pos : pos + length], pos + length


def _decode_body(body: bytes, header: BatchHeader) -> list[Record]:
    base_offset, base_ts = header.base_offset, header.base_timestamp
    log_append = header.timestamp_type == LOG_APPEND_TIME
    records = []
    pos = 0
    for _ in range(header.records_count):
        length, pos = read_varint(body, pos)
        end = pos + length
        pos += 1  # record attributes, unused
        ts_delta, pos = read_varint(body, pos)
        offset_delta, pos = read_varint(body, pos)
        key, pos = _read_bytes(body, pos)
        value, pos = _read_bytes(body, pos)
        count, pos = read_varint(body, pos)
        if count < 0:
            raise CorruptRecordError(f"batch at offset {base_offset}: {count} record headers")
        rec_headers = ()
        if count:
            items = []
            for _ in range(count):
                hkey, pos = _read_bytes(body, pos)
                if hkey is None:
                    raise CorruptRecordError(f"batch at offset {base_offset}: a null header key")
                hvalue, pos = _read_bytes(body, pos)
                items.append((hkey.decode(), hvalue))
            rec_headers = tuple(items)
        if pos != end or end > len(body):
            raise CorruptRecordError(
                f"batch at offset {base_offset}: record length {length} disagrees with its fields"
            )
        timestamp = header.max_timestamp if log_append else base_ts + ts_delta
        records.append(Record(base_offset + offset_delta, timestamp, key, value, rec_headers))
    if pos != len(body):
        raise CorruptRecordError(
            f"batch at offset {base_offset}: {len(body) - pos} bytes after "
            f"{header.records_count} records"
        )
    return records


def record_at(batch: bytes | memoryview, header: BatchHeader, offset: int) -> Record | None:
    """The one record of a batch at ``offset``, hopping over the others by
    their length prefix (the compiled `walker.find_record`) instead of
    decoding them; None if no record has it."""
    body = records_section(batch, header)
    start, end, ts_delta, key, value, headers = find_record(
        body, header.records_count, offset - header.base_offset
    )
    if start == -1:
        return None
    if start < 0:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset}: bad records section at byte {end}"
        )
    if headers:  # the general decoder for the headers
        return _decode_body(bytes(body[start:end]), header._replace(records_count=1))[0]
    log_append = header.timestamp_type == LOG_APPEND_TIME
    timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
    return Record(offset, timestamp, key, value)
