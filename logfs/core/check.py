"""Offline tools over a data directory: dump segment files, check and repair.

`dump` prints what ``kafka-dump-log.sh`` prints for the same files: one line
per batch (offsets, count, position, create time, size, magic, codec, CRC and
whether it is valid), optionally one line per record, and index entries with
an optional check that each points where it should.

`check` validates every batch of every partition and compares each index
with one rebuilt from its log, without writing; `check(repair=True)` forgets
the recovery points, so opening the store validates everything, truncates at
the first bad batch and rebuilds every index.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .compression import NAMES
from .config import TopicConfig
from .errors import CorruptIndexError, CorruptRecordError, LogfsError
from .index import OffsetIndex, TimeIndex
from .record import BatchHeader, computed_crc, decode_records, read_header
from .segment import LogSegment
from .store import RECOVERY_POINT_FILE, Store


def _batches(path: Path) -> Iterator[tuple[int, BatchHeader | None, bytes, str]]:
    """(position, header, batch, problem) for each batch; stops at the first
    unreadable header."""
    data = path.read_bytes()
    position = 0
    while position < len(data):
        try:
            header = read_header(data, position)
        except CorruptRecordError as e:
            yield position, None, b"", str(e)
            return
        batch = data[position : position + header.size]
        problem = ""
        if len(batch) < header.size:
            problem = (
                f"batch at position {position} is truncated ({len(batch)} of {header.size} bytes)"
            )
        yield position, header, batch, problem
        if problem:
            return
        position += header.size


def dump_log(path: Path, *, print_data: bool = False) -> Iterator[str]:
    base = int(path.name[:20]) if path.name[:20].isdigit() else 0
    yield f"Dumping {path}"
    yield f"Log starting offset: {base}"
    for position, header, batch, problem in _batches(path):
        if header is None:
            yield f"Found unreadable data at position {position}: {problem}"
            return
        valid = not problem and computed_crc(batch) == header.crc
        yield (
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} baseSequence: {header.base_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} "
            f"isControl: {str(header.is_control).lower()} position: {position} "
            f"{_time_type(header)}: {header.max_timestamp} "
            f"size: {header.size} magic: {header.magic} "
            f"compresscodec: {NAMES.get(header.codec, header.codec)} "
            f"crc: {header.crc} isvalid: {str(valid).lower()}"
        )
        if problem:
            yield f"Found truncated data at position {position}: {problem}"
            return
        if print_data and valid:
            for record in decode_records(batch, header):
                yield (
                    f"| offset: {record.offset} "
                    f"{_time_type(header)}: {record.timestamp} "
                    f"keySize: {-1 if record.key is None else len(record.key)} "
                    f"valueSize: {-1 if record.value is None else len(record.value)} "
                    f"headerKeys: [{','.join(k for k, _ in record.headers)}]"
                    + (f" key: {_text(record.key)}" if record.key is not None else "")
                    + f" payload: {_text(record.value)}"
                )


def _time_type(header: BatchHeader) -> str:
    return "LogAppendTime" if header.timestamp_type else "CreateTime"


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "backslashreplace")


def dump_index(path: Path, *, verify: bool = False) -> Iterator[str]:
    base = int(path.name[:20])
    yield f"Dumping {path}"
    kind = OffsetIndex if path.suffix == ".index" else TimeIndex
    index = kind(str(path), base, 1 << 31, writable=False)
    index.load()
    log_path = path.with_suffix(".log")
    headers = {}
    if verify and log_path.exists():
        headers = {h.last_offset: pos for pos, h, _, p in _batches(log_path) if h and not p}
    for i in range(len(index)):
        key, value = index.entry(i)
        if kind is OffsetIndex:
            line = f"offset: {key} position: {value}"
            if verify and headers.get(key) != value:
                line += "  MISMATCH: no batch ending at this offset starts at this position"
        else:
            line = f"timestamp: {key} offset: {value}"
        yield line


def dump(
    paths: list[str], *, print_data: bool = False, verify_index: bool = False
) -> Iterator[str]:
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise LogfsError(f"{name}: no such file")
        if path.suffix == ".log":
            yield from dump_log(path, print_data=print_data)
        elif path.suffix in (".index", ".timeindex") and path.name[:20].isdigit():
            yield from dump_index(path, verify=verify_index)
        else:
            raise LogfsError(f"{name}: not a .log, .index or .timeindex file")


def check(data: str | os.PathLike, *, repair: bool = False) -> list[str]:
    """Problems found in a data directory (empty when it is consistent).

    With ``repair``, the store is reopened with every batch validated and
    every index rebuilt, and the problems that remain are returned.
    """
    path = Path(data)
    if not path.is_dir():
        raise LogfsError(f"{path}: no such data directory")
    problems = _problems(path)
    if repair and problems:
        # Without recovery points, opening validates every batch from offset 0,
        # truncates at the first bad one and rebuilds every index.
        (path / RECOVERY_POINT_FILE).unlink(missing_ok=True)
        Store(path).close()
        return _problems(path)
    return problems


def _problems(path: Path) -> list[str]:
    problems = []
    # Only the store's list of partitions: opening its logs would load and walk
    # every segment once more before the checks below read it all anyway.
    with Store(path, read_only=True) as store:
        partitions = [
            (topic, p, path / f"{topic}-{p}")
            for topic in store.topics()
            for p in store.partitions(topic)
        ]
    for topic, partition, directory in partitions:
        next_offset = None
        for log_path in sorted(directory.glob("*.log")):
            if not log_path.name[:20].isdigit():
                continue
            for position, header, batch, problem in _batches(log_path):
                if header is not None and not problem and computed_crc(batch) != header.crc:
                    problem = f"batch at position {position}: crc mismatch"
                if (
                    header is not None
                    and next_offset is not None
                    and header.base_offset < next_offset
                ):
                    problem = (
                        f"batch at position {position}: offset {header.base_offset} goes backwards"
                    )
                if problem:
                    problems.append(f"{log_path}: {problem}")
                    break
                next_offset = header.next_offset
            problems += _index_problems(log_path, topic, partition)
    return problems


def _index_problems(log_path: Path, topic: str, partition: int) -> list[str]:
    base = int(log_path.name[:20])
    segment = LogSegment(str(log_path.parent), base, TopicConfig(), writable=False)
    try:
        segment.load()
        expected = {h.last_offset: pos for pos, h, _, p in _batches(log_path) if h and not p}
        index = segment.offset_index
        for i in range(len(index)):
            offset, position = index.entry(i)
            if expected.get(offset) != position:
                return [
                    f"{segment.index_path}: entry ({offset}, {position}) does not match the log"
                ]
    except (CorruptIndexError, CorruptRecordError) as e:
        return [f"{topic}-{partition}: {e}"]
    finally:
        segment.close()
    return []
