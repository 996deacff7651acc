"""A segment's ``.log`` file as a sequence of batches: file names and the one walker.

File names are the segment's base offset (the first offset it may hold) as
20 zero-padded digits, so ``ls`` sorts them in offset order
(``00000000000000368769.log``, ``.index``, ``.timeindex``).

Every walk over a ``.log`` file goes through one walker, a chunk at a time,
never the whole file: `iter_batches` batch by batch (a segment's walks,
`check`'s), `read_region` a region at a time (`lines`, for the column decoder),
`find_batch` header by header to one batch (lookups).
Like Kafka's ``FileRecords``, it knows the batch framing and nothing of indexes.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple

from ..errors import CorruptRecordError
from ..format.record import HEADER_SIZE, BatchHeader, crc32c, read_header, verify_crc
from ._scan import scan_batches

SCAN_CHUNK = 1 << 20
KINDS = (".log", ".index", ".timeindex")  # a segment's files; the .log first
TXN_INDEX = ".txnindex"  # and its transaction index, once it has an entry (txnindex.py)
DELETED = ".deleted"  # a file about to be removed


def segment_name(base_offset: int, suffix: str) -> str:
    """The name of a segment's file: ``00000000000000368769.log`` for (368769, ".log")."""
    return f"{base_offset:020d}{suffix}"


def segment_paths(directory: str, base_offset: int, suffix: str = "") -> tuple[str, str, str]:
    """The ``.log``, ``.index`` and ``.timeindex`` paths of a segment; ``suffix``
    follows each name (``.cleaned``: a cleaned segment written aside)."""
    log, index, timeindex = (
        os.path.join(directory, segment_name(base_offset, kind + suffix)) for kind in KINDS
    )
    return log, index, timeindex


def remove_segment_files(
    directory: str | os.PathLike,
    base_offset: int,
    suffix: str = "",
    kinds: tuple[str, ...] = (*KINDS, TXN_INDEX),
) -> None:
    """Remove a segment's files (those of ``kinds`` that exist), each renamed
    to ``*.deleted`` first, as Kafka does; a crash can leave a ``.deleted``
    file, which the next open removes (swap.py). The ``.log`` goes first: a
    segment is found by its ``.log``, so from then on it is gone."""
    for kind in kinds:
        path = os.path.join(directory, segment_name(base_offset, kind + suffix))
        with contextlib.suppress(FileNotFoundError):
            os.rename(path, path + DELETED)
            os.unlink(path + DELETED)


def base_offset_of(name: str, suffix: str | None = None) -> int | None:
    """The base offset a segment file is named for, or None if ``name`` is not
    20 digits and then ``suffix`` (None: any suffix starting with ``.``)."""
    digits, rest = name[:20], name[20:]
    kind = rest == suffix if suffix is not None else rest.startswith(".")
    if kind and len(digits) == 20 and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


# ---------------------------------------------------------------- walking a .log file


class BatchAt(NamedTuple):
    """One batch of a ``.log`` file and where it starts."""

    position: int
    header: BatchHeader
    batch: memoryview


class Region(NamedTuple):
    """Whole batches read in one go: batch ``i`` is ``data[offsets[i]:]``."""

    data: bytes
    offsets: list[int]
    headers: list[BatchHeader]


def iter_batches(
    fd: int,
    start: int,
    end: int,
    *,
    verify: bool = True,
    chunk: int = SCAN_CHUNK,
    path: str = "",
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield (position, header, batch bytes) of each batch from ``start`` (a
    batch boundary) to ``end``, reading about ``chunk`` bytes at a time.

    Args:
        verify: check each batch's CRC.
        path: the file's name, for error messages.

    Raises:
        CorruptRecordError: at the first batch that is unreadable, runs past
            ``end`` or the file, or (``verify``) fails its CRC; ``args[1]`` is
            its position.
    """
    return _walk(fd, start, end, chunk, verify, path)


def find_batch(fd: int, position: int, end: int, offset: int, path: str = "") -> BatchAt | None:
    """The CRC-checked batch holding ``offset``, header by header from
    ``position`` (a batch boundary at or before it, from the index) to
    ``end``, as Kafka's ``FileRecords.searchForOffsetWithSize`` does: one
    small read per header passed over, one read of the batch; None if no
    batch before ``end`` holds it. Raises as `iter_batches` does."""
    try:
        while position < end:
            header = read_header(os.pread(fd, HEADER_SIZE, position), 0, position)
            if position + header.size > end:
                raise CorruptRecordError(
                    f"batch at position {position} of {header.size} bytes runs past the end ({end})"
                )
            if header.last_offset >= offset:
                batch = memoryview(os.pread(fd, header.size, position))
                if len(batch) < header.size:
                    raise CorruptRecordError(
                        f"batch at position {position} of {header.size} bytes: "
                        f"the file ends {len(batch)} bytes into it"
                    )
                verify_crc(batch, header, position)
                return BatchAt(position, header, batch)
            position += header.size
    except CorruptRecordError as e:
        raise CorruptRecordError(f"{path}: {e}" if path else str(e), position) from None
    return None


def read_region(
    fd: int,
    position: int,
    end: int,
    max_bytes: int,
    *,
    verify: bool = True,
    path: str = "",
) -> Region:
    """The whole batches from ``position`` (a batch boundary before ``end``):
    about ``max_bytes`` of them, at least one, none past ``end``. Raises as
    `iter_batches` does."""
    offsets, headers = [], []
    for at, header, batch in _walk(fd, position, end, max_bytes, verify, path, one_read=True):
        offsets.append(at - position)
        headers.append(header)
        data = batch.obj  # one buffer holds them all (see _walk)
    return Region(data, offsets, headers)


def _walk(
    fd: int,
    position: int,
    end: int,
    chunk: int,
    verify: bool,
    path: str,
    *,
    one_read: bool = False,
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """The walker: `iter_batches`, or with ``one_read`` only the batches of
    the first read (which is read again, larger, when its first batch is).
    The compiled `scan_batches` takes every whole batch of a read at once;
    a batch it stops at is looked at here, to read more or to say what is
    wrong with it."""
    buf, buf_start = memoryview(b""), position
    while position < end:
        offset = position - buf_start
        headers, offsets, stop = scan_batches(
            buf, buf, offset, min(len(buf), end - buf_start), verify, crc32c, BatchHeader._make
        )
        for at, header in zip(offsets, headers, strict=True):
            yield buf_start + at, header, buf[at : at + header.size]
        position, offset = buf_start + stop, stop
        if position >= end or (one_read and headers):
            return
        if offset + HEADER_SIZE > len(buf):  # read on from this batch
            size = max(HEADER_SIZE, min(chunk, end - position))
            buf, buf_start, offset = _read(fd, position, size), position, 0
            if len(buf) >= HEADER_SIZE:
                continue
        try:  # the batch at `position` is bad, or larger than what was read
            header = read_header(buf, offset, position)
            if position + header.size > end:
                raise CorruptRecordError(
                    f"batch at position {position} of {header.size} bytes runs past the end ({end})"
                )
            if offset + header.size > len(buf):
                buf = _read(fd, position, max(chunk, header.size))
                buf_start = position
                if header.size > len(buf):
                    raise CorruptRecordError(
                        f"batch at position {position} of {header.size} bytes: "
                        f"the file ends {len(buf)} bytes into it"
                    )
                continue
            verify_crc(buf[offset : offset + header.size], header, position)
            raise AssertionError(f"batch at position {position}: refused, and no fault found")
        except CorruptRecordError as e:
            raise CorruptRecordError(f"{path}: {e}" if path else str(e), position) from None


def _read(fd: int, position: int, size: int) -> memoryview:
    """A view of the bytes read: at most ``size``, fewer at the end of the file."""
    return memoryview(os.pread(fd, size, position))


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory: the names created, renamed or removed in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mark_end(directory: str | os.PathLike, offset: int) -> bool:
    """Leave an empty ``.log`` file named for ``offset`` in ``directory``, made
    durable: when a segment's file was lost, the next open finds the log ending
    there, not below offsets already handed out. False if a file of that name is
    there already (it is left as it is).

    Raises:
        OSError: the file or the directory's fsync failed.
    """
    path = os.path.join(directory, segment_name(offset, ".log"))
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    fsync_dir(directory)
    return True


def sync_fd(fd: int) -> None:
    """Make what was written to ``fd`` durable: fdatasync for a file (its data
    and the size needed to read it back; PostgreSQL's choice for its WAL),
    fsync for a directory (its entries)."""
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.fsync(fd)
    else:
        os.fdatasync(fd)
