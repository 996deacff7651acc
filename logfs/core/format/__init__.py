"""The bytes: Kafka's RecordBatch v2 layout, compression, the one record walker
(compiled, walker.pyx; the byte helpers every compiled module shares are
binary.pxd), the column-wise codec, cutting appends into batches, and the
broker's checks of a producer's batches. No files: everything here takes and
returns bytes."""

from . import compression, control
from ._columns import frame_lengths, gather, line_lengths
from .batching import BatchInfo, max_record_bytes
from .columnar import decode, unpacked
from .decoding import decode_records
from .forward import with_producer
from .record import BatchHeader, Record, idempotent, read_header, transactional
from .validate import split_batches

__all__ = [
    "BatchHeader",
    "BatchInfo",
    "Record",
    "compression",
    "control",
    "decode",
    "decode_records",
    "frame_lengths",
    "gather",
    "idempotent",
    "line_lengths",
    "max_record_bytes",
    "read_header",
    "split_batches",
    "transactional",
    "unpacked",
    "with_producer",
]
