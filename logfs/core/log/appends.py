"""The appending part of a partition log: the general append paths.

`LogAppends` is a part of `Log` (partition.py), over its `PartitionState`
(state.py). Every append passes the same guards in one order
(`_start_append`), is cut into batches and encoded (core/format), and goes to
`_write`: the roll rule, Kafka's, decides for each batch whether a new segment
starts first (`LogSegment.should_roll`, books.pyx), and each segment's share
is written with one ``write()`` (`LogSegment.append`), so a record is never
torn and never interleaved with another writer's. What a write changes is kept
by its owners: the segment's books, what the next flush syncs (`Unflushed`),
the live keys (`LiveKeys`); a failed write leaves nothing behind and takes the
partition offline unless it failed cleanly (`Failure.write_failed`).

The one-line fast path (_line.pyx) encodes and writes in C, and keeps the
same books through the same owners.

While a transaction is open in the partition, batches at or past the last stable
offset (``state.held_from``) are written with their stream bytes held: the
transactional part (transactions.py) notes them once their transactions are
decided, so the mount's ``stream`` shows committed records only, in offset order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ..errors import InvalidRecordError, TooLargeError
from ..format import batching, compression, line_lengths, unpacked, validate
from ..format.batching import BatchInfo, BatchRun
from ..format.record import NO_TIMESTAMP
from ..storage import LogSegment, preallocate
from .snapshots import take_snapshot
from .state import PartitionState
from .timestamps import check_run_timestamps, check_timestamps

logger = logging.getLogger(__name__)


class LogAppends:
    """`Log.append`, `append_packed`, `append_lines` and `append_batches`, and the roll."""

    def __init__(self, state: PartitionState) -> None:
        self.state = state

    def append(
        self,
        values: Sequence[bytes | None],
        *,
        keys: Sequence[bytes | None] | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        timestamp: int | Sequence[int] | None = None,
    ) -> int:
        """Append records; returns the offset of the first.

        The records are cut into batches of at most max.message.bytes and
        written with one write() per segment touched, so a record is never
        torn and never interleaved with another writer's.

        Raises:
            ReadOnlyError: the log was opened read-only.
            LogFailedError: the partition is offline.
            InvalidRecordError: a compacted partition's record without a key.
            RecordTooLargeError: a single record does not fit max.message.bytes.
        """
        first = self._start_append()
        if not values:
            return first
        config = self.state.config
        if config.compact and (keys is None or None in keys):
            raise self._keys_required()
        now = self.state.clock()
        timestamp, timestamp_type = batching.timestamp_for(config, timestamp, now)
        encoded = batching.encode_values(
            config, first, values, keys, headers, timestamp, timestamp_type
        )
        self._write(encoded, now)
        return first

    def append_packed(
        self, packed: bytes | memoryview, lengths: np.ndarray, head: bytes = b"", gap: int = 1
    ) -> int:
        """Append keyless, headerless records given packed: each value followed by
        ``gap`` bytes (lines with their ``\\n``; ``append.bin`` frames with the next
        one's 4-byte length); ``lengths`` are the values'. ``head``, if any, is the
        first value's start, not in ``packed`` (a line's part written before),
        counted in the first length.

        Same result and errors as ``append`` of the values, without making a
        Python object per record. Returns the offset of the first.
        """
        first = self._start_append()
        if not len(lengths):
            return first
        config = self.state.config
        if config.compact:
            raise self._keys_required()
        run = None
        codec = compression.BY_NAME[config.compression_type]
        if codec == compression.NONE and len(lengths) >= batching.PACKED_MIN:
            now = self.state.clock()
            timestamp, timestamp_type = batching.timestamp_for(config, None, now)
            run = batching.encode_packed_run(
                config, first, packed, lengths, timestamp, timestamp_type, head=head, gap=gap
            )
        if run is None:  # the general encoder: compressed, few, or near the size limit
            return self.append(unpacked(packed, lengths, gap, head))
        self._write_run(run, now)
        return first

    def append_lines(self, text: bytes | memoryview, head: bytes = b"", *, limit: int) -> int:
        """Append every ``\\n``-terminated line of ``text`` (which ends with one)
        as a keyless, headerless record, ``head`` the first line's start (written
        before, not in ``text``): `append_packed` of the lines, without a pass
        of its own to find them. Plain records of a topic without compression
        are found and encoded in one compiled pass (`batching.encode_lines_run`);
        the rest go through `append_packed`. Returns the offset of the first.

        Raises:
            TooLargeError: a line longer than ``limit`` bytes; nothing appended.
            As `append_packed` otherwise.
        """
        config = self.state.config
        plain = compression.BY_NAME[config.compression_type] == compression.NONE
        if config.compact or not plain or limit > batching.max_record_bytes(config):
            lengths = line_lengths(text, len(text))
            if len(lengths):
                lengths[0] += len(head)
                if int(lengths.max()) > limit:
                    raise TooLargeError(f"a record of {int(lengths.max())} bytes exceeds {limit}")
            return self.append_packed(text, lengths, head)
        now = self.state.clock()
        timestamp, timestamp_type = batching.timestamp_for(config, None, now)
        # Encoded before the guards, from the offset they leave as it is: a line
        # over the limit is refused first, as the framer refused it.
        first = self.state.next_offset
        run = batching.encode_lines_run(config, first, text, head, timestamp, timestamp_type, limit)
        self._start_append()
        if len(run.sizes):
            self._write_run(run, now)
        return first

    def append_batches(
        self,
        batches: Sequence[bytes | memoryview],
        buffer: bytearray | memoryview | None = None,
        *,
        transactional: bool = False,
    ) -> int:
        """Append whole RecordBatch v2 batches a producer built, checked and given
        their offsets as Kafka's broker does (validate.py): all are checked
        before any is appended. Returns the offset of the first record.

        ``buffer``: a writable buffer holding exactly ``batches`` back to back,
        which the caller gives up: they are patched and written from there
        instead of from a copy (the Kafka listener's received requests).
        ``transactional``: transactional batches are taken (the transactional
        part's, after the producer state's checks: transactions.py).

        Raises:
            ReadOnlyError: the log was opened read-only.
            LogFailedError: the partition is offline.
            InvalidBatchError: a batch Kafka would refuse; `BatchTooLargeError`
                (a RecordTooLargeError too) for one over max.message.bytes.
            InvalidTimestampError: a record's timestamp out of the topic's bounds
                (timestamps.py).
        """
        first = self._start_append()
        now = self.state.clock()
        prepared, _ = validate.prepare_run(
            batches, self.state.config, first, now, buffer, transactional=transactional
        )
        if isinstance(prepared, BatchRun):
            check_run_timestamps(self.state.config, prepared, now)
            if len(prepared.sizes):
                self._write_run(prepared, now)
            return first
        check_timestamps(self.state.config, prepared, now)
        if prepared:
            self._write(prepared, now)
        return first

    def append_control(self, batch: bytearray) -> int:
        """Append a control batch the log built (a transaction marker,
        format/control.py), its base offset set here; returns its offset."""
        first = self._start_append()
        validate.set_base_offset(batch, first)
        info = BatchInfo(len(batch), first, validate.max_timestamp_of(batch), 0)
        self._write([(batch, info)], self.state.clock())
        return first

    def write_copied(self, encoded: list[tuple[bytes | memoryview, BatchInfo]]) -> None:
        """Write a follower's batches as they are, their offsets their own
        (following.py checked them and keeps their producers' books)."""
        self.state.require_appendable(follower=True)
        self._write(encoded, self.state.clock())

    def _start_append(self) -> int:
        """The guards every append passes first, in this order; returns the
        offset the append starts at."""
        self.state.require_appendable()
        return self.state.next_offset

    def _keys_required(self) -> InvalidRecordError:
        state = self.state
        return InvalidRecordError(
            f"{state.name} is compacted (cleanup.policy="
            f"{state.config.cleanup_policy}): every record needs a key"
        )

    def _write(self, encoded: list[tuple[bytes, BatchInfo]], now: int) -> None:
        """Write encoded batches, rolling where the roll rule says, each
        segment's share in one write."""
        state = self.state
        try:
            start, pending, segment = 0, 0, state.active_segment
            for i, (_, info) in enumerate(encoded):
                # the batches of this segment's share count as written for the rule
                first = encoded[start][1].max_timestamp if pending else NO_TIMESTAMP
                if segment.should_roll(info, now, pending, first):
                    self._write_to(segment, encoded[start:i])
                    segment = self.roll()
                    start, pending = i, 0
                pending += info.size
            self._write_to(segment, encoded[start:])
        except OSError as e:
            state.failure.write_failed(e, state.recovery_point)
            raise

    def _write_to(self, segment: LogSegment, encoded: list[tuple[bytes, BatchInfo]]) -> None:
        """One segment's share: written, then its records noted for the next
        flush and its keys for the live keys."""
        if encoded:
            before = segment.next_offset
            infos = [info for _, info in encoded]
            held = self.state.held_from
            if held >= 0:  # past the last stable offset: noted once decided
                infos = [i._replace(stream_bytes=-1) if i.last_offset >= held else i for i in infos]
            segment.append([b for b, _ in encoded], infos)
            self.state.unflushed.appended(segment, segment.next_offset - before)
            if held >= 0:  # not committed yet: the live keys are built again when asked
                self.state.keys.drop()
            else:
                self.state.keys.appended(batch for batch, _ in encoded)

    def _write_run(self, run: BatchRun, now: int) -> None:
        """`_write` of batches back to back in one buffer: the roll rule asked
        over their arrays (`LogSegment.roll_point`), each segment's share
        written with one write and indexed in bulk."""
        state = self.state
        ends = np.cumsum(run.sizes)
        try:
            start, check, count, segment = 0, True, len(run.sizes), state.active_segment
            while True:
                end = segment.roll_point(run, start, now, check)
                self._write_run_to(segment, run, ends, start, end)
                if end == count:
                    return
                segment = self.roll()
                start, check = end, False
        except OSError as e:
            state.failure.write_failed(e, state.recovery_point)
            raise

    def _write_run_to(
        self, segment: LogSegment, run: BatchRun, ends: np.ndarray, start: int, end: int
    ) -> None:
        """`_write_to` of batches ``start:end`` of ``run`` (``ends``: where each ends)."""
        if end <= start:
            return
        sizes, lasts = run.sizes[start:end], run.last_offsets[start:end]
        stream = run.stream_bytes[start:end]
        held = self.state.held_from
        if held >= 0:  # past the last stable offset: noted once decided
            stream = np.where(lasts >= held, -1, stream)
        before = segment.next_offset
        pieces = run.pieces(start, end, ends)
        segment.append_run(pieces, (sizes, lasts, run.max_timestamps[start:end], stream))
        self.state.unflushed.appended(segment, segment.next_offset - before)
        if held >= 0:  # not committed yet: the live keys are built again when asked
            self.state.keys.drop()
        else:  # each batch apart, made only if the live keys are kept
            ranges = zip(range(start, end), ends[start:end].tolist(), sizes.tolist(), strict=True)
            self.state.keys.appended(run.batch(e - z, z, i) for i, e, z in ranges)

    def roll(self) -> LogSegment:
        """Close the active segment to appends and start one at next_offset."""
        state = self.state
        active = state.active_segment
        if active.size == 0:
            return active
        active.on_become_inactive()
        try:  # blocks reserved past its end given back: preallocate's, bulk writes'
            # (books.pyx), or ones a crash left, which no book remembers. Only space.
            preallocate.release(active.fileno(), active.size)
        except OSError as e:
            logger.warning("%s: the space reserved past its end stays: %s", active.log_path, e)
        segment = state.new_segment(state.next_offset)
        state.add_segment(segment)
        state.unflushed.directory_changed()
        take_snapshot(state, segment.base_offset)
        return segment
