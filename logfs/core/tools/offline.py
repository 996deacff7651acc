"""Offline tools over a data directory: dump segment files, check and repair.

`dump` prints what ``kafka-dump-log.sh`` prints for the same files: one line
per batch (offsets, count, position, create time, size, magic, codec, CRC and
whether it is valid), optionally one line per record (a control batch's: its
transaction marker), index entries with an optional check that each points
where it should, the aborted transactions of a ``.txnindex`` and the producers
of a ``.snapshot`` (txncheck.py).

`check` reads each segment's ``.log`` once, in chunks, and finds:

- batches that do not validate (header, size, CRC) or whose offsets go back;
- offsets missing: a segment that begins after the one before it ends (not in
  a compacted topic, whose cleaned segments may), or a log that ends before its
  recovery point (those offsets were fsynced);
- offset index (``.index``) entries that do not name a batch of the log: each
  entry must be a batch's last offset and that batch's position;
- what loading the segment would refuse: either index file failing to load
  (a size that is not whole entries, entries out of order), an offset index
  entry pointing outside the log, or a time index entry for an offset past
  the log's last;
- a transaction index (``.txnindex``) that disagrees with the markers of the
  log (txncheck.py);
- a partition directory whose group and mode on disk disagree with what its
  topic's owner implies (storage/ownership.py): opening the store (a repair,
  a mount) gives them back.

The time index (``.timeindex``) is only loaded and sanity-checked like that,
not compared with the log's timestamps. `check(repair=True)` forgets the
producer state snapshots and opens the store validating everything as if
there were no recovery points (which still keep the offsets handed out: a gap
below one is kept, the log goes on above it): it truncates at the first bad
batch, rebuilds every index and replays every partition's producer state from
its start (writing its ``.txnindex`` files again).

While DATA is mounted, `check` also reports the partitions the mount holds
offline after an I/O error (its root's ``user.logfs.failures``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..client import mountinfo, names
from ..config import TopicConfig
from ..errors import CorruptIndexError, CorruptRecordError, LogfsError
from ..format.compression import NAMES
from ..format.decoding import decode_records
from ..format.record import HEADER_SIZE, BatchHeader, crc_matches, read_header
from ..log.store import LOG_START_FILE, RECOVERY_POINT_FILE, Store, read_checkpoint
from ..storage import ownership
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.logfile import base_offset_of, iter_batches, segment_name
from ..storage.recovery import segment_bases
from .txncheck import TxnCheck, dump_snapshot, dump_txn_index, marker_line


def _batches(path: Path) -> Iterator[tuple[int, BatchHeader | None, memoryview, str]]:
    """(position, header, batch, problem) for each batch, CRC not checked;
    stops after the first that is unreadable (no header) or truncated."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        try:
            for position, header, batch in iter_batches(fd, 0, size, verify=False):
                yield position, header, batch, ""
        except CorruptRecordError as e:
            # The walk stops at the first batch it cannot use: say whether its
            # header is bad or the file ends inside it.
            position = e.args[1]
            try:
                header = read_header(os.pread(fd, HEADER_SIZE, position), 0, position)
            except CorruptRecordError as bad:
                yield position, None, memoryview(b""), str(bad)
                return
            got = size - position
            truncated = f"batch at position {position} is truncated ({got} of {header.size} bytes)"
            yield position, header, memoryview(b""), truncated


def dump_log(
    path: Path, *, print_data: bool = False, progress: Progress | None = None
) -> Iterator[str]:
    base = base_offset_of(path.name) or 0
    yield f"Dumping {path}"
    yield f"Log starting offset: {base}"
    size = path.stat().st_size
    for position, header, batch, problem in _batches(path):
        if progress is not None:
            progress(position, size, "")
        if header is None:
            yield f"Found unreadable data at position {position}: {problem}"
            return
        valid = not problem and crc_matches(batch, header)
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
        if print_data and valid and header.is_control:
            yield marker_line(header, batch)
        elif print_data and valid:
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
    base = base_offset_of(path.name)
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
    paths: list[str],
    *,
    print_data: bool = False,
    verify_index: bool = False,
    progress: Progress | None = None,
) -> Iterator[str]:
    """The lines ``kafka-dump-log.sh`` prints for each of ``paths``; ``progress``
    is told the bytes of each ``.log`` file walked (a large segment takes a while)."""
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise LogfsError(f"{name}: no such file")
        if path.suffix == ".log":
            yield from dump_log(path, print_data=print_data, progress=progress)
            if progress is not None:
                size = path.stat().st_size
                progress(size, size, "")
        elif path.suffix in (".index", ".timeindex") and base_offset_of(path.name) is not None:
            yield from dump_index(path, verify=verify_index)
        elif path.suffix == ".txnindex":
            yield from _readable(dump_txn_index, path)
        elif path.suffix == ".snapshot":
            yield from _readable(dump_snapshot, path)
        else:
            raise LogfsError(f"{name}: not a .log, .index, .timeindex, .txnindex or .snapshot file")


def _readable(dumper, path: Path) -> Iterator[str]:
    try:
        yield from dumper(path)
    except CorruptIndexError as e:
        raise LogfsError(str(e)) from None


# Long work's progress, called after each unit of it: (units done, units in all, what
# was done last); the command line shows it (logfs/progress.py).
Progress = Callable[[int, int, str], None]


def check(
    data: str | os.PathLike, *, repair: bool = False, progress: Progress | None = None
) -> list[str]:
    """Problems found in a data directory (empty when it is consistent).

    With ``repair``, the store is reopened with every batch validated and
    every index rebuilt, and the problems that remain are returned, less the
    gaps it keeps (offsets handed out whose records are lost: `check` goes on
    naming them).
    ``progress`` is told about each partition as it is checked, and opened
    by the repair.
    """
    path = Path(data)
    if not path.is_dir():
        raise LogfsError(f"{path}: no such data directory")
    problems = _problems(path, progress) + _offline_in_mount(path)
    if repair:
        # Without recovery points, opening validates every batch from offset 0,
        # truncates at the first bad one and rebuilds every index. Opening
        # always re-validates what follows each recovery point, from the disk:
        # that recovers a partition a failed fsync took offline.
        if problems:
            # First an ordinary open: where segments went missing it leaves an empty
            # segment at the highest offset handed out (core/log/loading.py), and
            # advances the recovery point to it, before the snapshots go.
            with Store(path):
                pass
            for snapshot in path.glob("*-*/*.snapshot"):  # producer state: replayed
                snapshot.unlink()
        # Every batch validated; the recovery points only keep offsets handed out.
        with Store(path, recover=False, validate_all=bool(problems)) as store:
            store.recover(progress)
        # The gaps it kept are lost records whose offsets are not given again: what
        # `check` goes on reporting, but nothing a repair could do more about.
        return [p for p in _problems(path) if not p.endswith(KEPT_GAP)]
    return problems


def _offline_in_mount(path: Path) -> list[str]:
    """Partitions the live mount of DATA holds offline after an I/O error:
    that is in the daemon's memory only (see docs/reliability.md)."""
    mountpoint = mountinfo.live_mount(path)
    if mountpoint is None:
        return []
    try:
        failures = json.loads(os.getxattr(mountpoint, names.FAILURES_XATTR))
    except (OSError, ValueError):
        return []
    return [
        f"{name}: {why} (offline in the mount on {mountpoint}; a remount recovers it)"
        for name, why in sorted(failures.items())
    ]


class _Walked(NamedTuple):
    """What one walk of a ``.log`` file found."""

    problem: str  # the first bad batch, or ""
    next_offset: int | None  # after the last batch before the first problem
    end_offset: int  # after the last readable batch
    positions: dict[int, int]  # last offset -> position, of every readable batch


def _problems(path: Path, progress: Progress | None = None) -> list[str]:
    problems = []
    # Only the store's list of partitions: opening its logs would load and walk
    # every segment once more before the checks below read it all anyway.
    with Store(path, read_only=True) as store:
        partitions = [
            (topic, p, path / f"{topic}-{p}", store.topic_config(topic).compact)
            for topic in store.topics()
            for p in store.partitions(topic)
        ]
        owners = {topic: store.topic_owner(topic) for topic in store.topics()}
    recovery_points = read_checkpoint(path / RECOVERY_POINT_FILE)
    log_starts = read_checkpoint(path / LOG_START_FILE)
    for done, (topic, partition, directory, compact) in enumerate(partitions, 1):
        name = f"{topic}-{partition}"
        next_offset, found = None, False
        started, size, count = time.monotonic(), 0, 0
        txns = TxnCheck()
        owner = owners[topic]
        wrong = owner and ownership.disagreement(str(directory), owner.gid, owner.mode)
        if wrong:
            problems.append(wrong)
        for base in segment_bases(directory):
            log_path = directory / segment_name(base, ".log")
            if not compact and not found:  # after a bad batch, its own problem says it
                problems += _missing(log_path, next_offset, base)
            first = base if next_offset is None else max(base, next_offset)  # past a gap
            walked = _walk_log(log_path, base, first, txns)
            if walked.problem:
                problems.append(f"{log_path}: {walked.problem}")
                found = True
            next_offset = walked.next_offset
            problems += _index_problems(log_path, base, walked, name)
            problems += txns.segment_problems(log_path, base, walked.end_offset)
            size, count = size + log_path.stat().st_size, count + 1
        recovery_point = recovery_points.get((topic, partition), 0)
        log_start = log_starts.get((topic, partition), 0)
        if next_offset is None:  # no segment: a writer starts again at the log start
            next_offset = log_start
        floor = max(recovery_point, log_start)  # handed out, as far as the checkpoints say
        if not found and next_offset < floor:
            problems.append(
                f"{name}: offsets {next_offset}..{floor - 1} are missing: the log ends at "
                f"offset {next_offset}, before its recovery point {recovery_point} (or log "
                f"start); the next open goes on at {floor}"
            )
        if progress is not None:
            seconds = time.monotonic() - started
            rate = f", {size / seconds / 1e6:.0f} MB/s" if seconds > 0.01 else ""
            note = f"{name}: {count} segment(s), {size / 1e6:.1f} MB in {seconds:.2f} s{rate}"
            progress(done, len(partitions), note)
    return problems


KEPT_GAP = "are missing before this segment"


def _missing(log_path: Path, next_offset: int | None, base: int) -> list[str]:
    """A segment that begins after the one before it ended (not compacted: a hole)."""
    if next_offset is None or base <= next_offset:
        return []
    return [f"{log_path}: offsets {next_offset}..{base - 1} {KEPT_GAP}"]


def _walk_log(
    log_path: Path, base: int, next_offset: int | None, txns: TxnCheck | None = None
) -> _Walked:
    """Walk a ``.log`` once: its first problem (bad CRC, offsets going back
    from ``next_offset``, an unreadable batch) and where its batches are.

    The walk goes on past a bad CRC or an offset going back, so the indexes
    are compared with every readable batch: loading a segment checks no CRC
    (recovery does) and offsets only past its last index entry.
    """
    problem, end_offset, positions = "", base, {}
    for position, header, batch, unusable in _batches(log_path):
        intact = not unusable and crc_matches(batch, header)
        if not unusable:
            positions[header.last_offset] = position
            end_offset = header.next_offset
            if txns is not None and intact:
                txns.batch(header, batch)
        if problem:
            continue
        problem = unusable
        if not problem and not intact:
            problem = f"batch at position {position}: crc mismatch"
        if header is not None and next_offset is not None and header.base_offset < next_offset:
            problem = f"batch at position {position}: offset {header.base_offset} goes backwards"
        if not problem:
            next_offset = header.next_offset
    return _Walked(problem, next_offset, end_offset, positions)


def _index_problems(log_path: Path, base: int, walked: _Walked, partition: str) -> list[str]:
    """The first problem of the segment's two indexes, given what the walk of
    its log found."""
    max_bytes = TopicConfig().segment_index_bytes
    offset_index = OffsetIndex(str(log_path.with_suffix(".index")), base, max_bytes, writable=False)
    time_index = TimeIndex(str(log_path.with_suffix(".timeindex")), base, max_bytes, writable=False)
    try:
        offset_index.load()
        time_index.load()
        offset_index.check(log_path.stat().st_size)
        time_index.check(walked.end_offset)
    except CorruptIndexError as e:
        return [f"{partition}: {e}"]
    for i in range(len(offset_index)):
        offset, position = offset_index.entry(i)
        if walked.positions.get(offset) != position:
            return [f"{offset_index.path}: entry ({offset}, {position}) does not match the log"]
    return []
