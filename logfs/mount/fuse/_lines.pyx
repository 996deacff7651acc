# cython: language_level=3
"""The default mode's one-line ``write()``, taken as the daemon receives it.

`_fuseinit.c` hands each WRITE request whose data is exactly one line to
`LineWrites.take` before pyfuse3 dispatches it. When the open file is an
``append`` of one partition framing lines with nothing pending, and the
partition takes the fast path (`Log.write_line`, core/log/_line.pyx), the
line is written to the segment file and the request is answered there: the
writer is woken once its line is in the file, as after the general path. The
log's books for it (`LineWrite.finish`) and the receipt follow in `done`,
which `_fuseinit.c` calls right after the answer, before the daemon reads its
next request: nothing sees the log in between, and the writer runs meanwhile.

`_fuseinit.c` takes the lines that come one after the other in a row, nothing
else running on the event loop meanwhile (``in_row``). So a row's next line from
the same handle is checked only for what can change within it (the topic's
deletion, the line's length) and goes to `Log.write_next_line`, which writes it
through what the row's first line found.

Everything else is left to pyfuse3 (`NOT_TAKEN`): another file, a deleted
topic's file, a recovering store, a line the fast path declines, or one
whose partition's ``flush.messages`` would make the write() wait for an
fsync (the fast path declines it).
"""

import logging
from time import perf_counter

from ..errnos import failed
from ..files import AppendFile, LineFramer

logger = logging.getLogger(__name__)

NOT_TAKEN = -1


cdef class LineWrites:
    """The write hook of one mount's `Operations` (`fuseinit.set_write_hook`)."""

    cdef object ops
    cdef dict files  # the mount's open files
    cdef object logs  # the store's open partitions
    cdef bint ready
    cdef object written  # the LineWrite whose books `done` keeps
    cdef object file  # and the open file whose receipt it is
    cdef object metrics  # the daemon's (`Operations.metrics`), or None
    cdef double started  # when `take` began, for the metrics
    cdef Py_ssize_t size  # the bytes `take` wrote
    # The last append file taken from and the topic life it was opened in (fixed
    # for the handle's life): a writer's lines come from one handle, so its life
    # is looked up once, while `deleted` is read at every line.
    cdef object last_file
    cdef object last_life
    # The row's handle, its partition's `write_next_line` and its framer's limit:
    # set by a line taken, cleared by one that is not and at each row's start.
    cdef object row_fh
    cdef object row_next
    cdef Py_ssize_t row_max

    def __init__(self, ops):
        self.ops = ops
        self.files = ops.files
        self.logs = ops.view.store.open_logs
        self.metrics = ops.metrics

    def take(self, fh, bytes data, bint in_row):
        """0 once the line is in the segment file, an errno, or `NOT_TAKEN`;
        ``in_row``: the line came right after one taken, in a row."""
        if self.metrics is not None:
            self.started = perf_counter()
        row_fh, self.row_fh = self.row_fh, None
        if in_row and row_fh is not None and fh == row_fh:
            life = self.last_life
            if life is not None and life.deleted:
                return NOT_TAKEN  # the write answers ESTALE
            if len(data) <= self.row_max:
                return self.write(fh, self.last_file, self.row_next, data)
        file = self.files.get(fh)
        if file is None or file is not self.last_file:
            if type(file) is not AppendFile:
                return NOT_TAKEN
            if not self.ready:
                self.ready = self.ops.ready.is_set()  # recovery done: for good
                if not self.ready:
                    return NOT_TAKEN
            self.last_life = self.ops.handles.life_of(fh)
            self.last_file = file
        life = self.last_life
        if life is not None and life.deleted:
            return NOT_TAKEN  # the write answers ESTALE
        framer = file.framer
        partition = file.partition
        if (
            partition is None
            or type(framer) is not LineFramer
            or framer.pending
            or framer.discarding
            or framer.parse_key
            or len(data) > framer.max_bytes
        ):
            return NOT_TAKEN
        log = self.logs.get((file.topic, partition))
        if log is None:
            return NOT_TAKEN
        self.row_max = framer.max_bytes
        self.row_next = log.write_next_line
        return self.write(fh, file, log.write_line, data)

    cdef write(self, fh, file, write_line, bytes data):
        """``write_line`` of ``data``'s line, as `take` answers it."""
        try:
            written = write_line(data, len(data) - 1)
        except Exception as e:  # every failure is an errno, as in `Operations.write`
            return failed("write", (fh,), e)
        if written is None:
            return NOT_TAKEN
        self.written, self.file = written, file
        self.size = len(data)
        self.row_fh = fh
        return 0

    def done(self):
        """The books of the line `take` wrote, once the writer is answered."""
        written, file = self.written, self.file
        self.written = self.file = None
        if written is None:
            return
        try:
            written.finish()  # on failure the partition went offline (_line.pyx)
            if file.receipts is not None:
                file.add_receipt(file.partition, written.first, 1)
            if self.metrics is not None:  # its record, bytes and time
                self.metrics.line_written(file.topic, self.size, perf_counter() - self.started)
        except Exception:
            logger.exception("after appending a line to %s-%d", file.topic, file.partition)
