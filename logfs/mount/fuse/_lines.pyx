# cython: language_level=3
"""The default mode's writes to append files, taken as the daemon receives them.

`_fuseinit.c` hands each WRITE request whose data is exactly one line to
`LineWrites.take` before pyfuse3 dispatches it, as a C call (`hooks`) with the
line where the request holds it. When the open file is an ``append`` of one
partition framing lines with nothing pending, and the partition takes the fast
path (its `LineWriter`, core/log/_line.pyx, cimported), the line is written to
the segment file and the request is answered there: the writer is woken once
its line is in the file, as after the general path. The log's books for it
(`LineWrite.keep_books`) and the receipt follow in `done`, which `_fuseinit.c`
calls right after the answer, before the daemon reads its next request:
nothing sees the log in between, and the writer runs meanwhile.

`_fuseinit.c` takes the lines that come one after the other in a row, nothing
else running on the event loop meanwhile (``in_row``). So a row's next line from
the same handle is checked only for what can change within it (the topic's
deletion, the line's length) and goes to `LineWriter.write_next_at`, which
writes it through what the row's first line found. Such a line is taken without
a Python object made or a Python function called, but for the log's record of
what the next flush syncs (`Unflushed.appended`) and the topic's deletion flag.

Every other WRITE, and a line `take` leaves (a pending partial line, keys, a
roll due...), goes to `LineWrites.bulk`: a write to an append file (many lines,
``append.bin`` frames, ``append.batches`` batches) is framed and appended
as `Operations.write` would (`AppendFile.take`), from a read-only memoryview of
the request's bytes instead of the ``bytes`` copy pyfuse3 makes, and answered
there, its books kept before the answer.

Everything else is left to pyfuse3 (`NOT_TAKEN`): another file, a deleted
topic's file, a recovering store, or a write whose partition's
``flush.messages`` would make the write() wait for an fsync (the fast path and
`AppendFile.take` decline it).
"""

from cpython.buffer cimport PyBUF_READ
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memrchr
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from ...core.log cimport LineWrite, LineWriter

import logging

from ..errnos import failed
from ..files import AppendFile, LineFramer

logger = logging.getLogger(__name__)

NOT_TAKEN = -1


cdef inline double monotonic():
    """`time.perf_counter` in C, for the metrics' time of a line."""
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    return now.tv_sec + now.tv_nsec * 1e-9


cdef class LineWrites:
    """The write hook of one mount's `Operations` (`fuseinit.set_write_hook`)."""

    cdef object ops
    cdef dict files  # the mount's open files
    cdef object logs  # the store's open partitions
    cdef bint ready
    cdef LineWrite written  # the LineWrite whose books `done` keeps
    cdef object file  # and the open file whose receipt it is
    cdef object metrics  # the daemon's (`Operations.metrics`), or None
    cdef double started  # when `take` began, for the metrics
    cdef Py_ssize_t size  # the bytes `take` wrote
    # The last append file taken from and the topic life it was opened in (fixed
    # for the handle's life): a writer's lines come from one handle, so its life
    # is looked up once, while `deleted` is read at every line.
    cdef object last_file
    cdef object last_life
    # The row's handle, its partition's line writer and its framer's limit: set
    # by a line taken, cleared by one that is not and at each row's start.
    cdef uint64_t row_fh
    cdef LineWriter row_writer
    cdef Py_ssize_t row_max

    def __init__(self, ops):
        self.ops = ops
        self.files = ops.files
        self.logs = ops.view.store.open_logs
        self.metrics = ops.metrics

    @property
    def hooks(self):
        """`take` and `done` as C functions, for `fuseinit.set_write_hook`."""
        return PyCapsule_New(&HOOKS, b"logfs.mount.fuse.line_hooks", NULL)

    cdef long take(self, uint64_t fh, const uint8_t *data, Py_ssize_t size, bint in_row) except? -2:
        """0 once the ``size`` bytes of the line at ``data`` are in the segment
        file, an errno, or `NOT_TAKEN`; ``in_row``: the line came right after
        one taken, in a row."""
        if self.metrics is not None:
            self.started = monotonic()
        row_writer, self.row_writer = self.row_writer, None
        if in_row and row_writer is not None and fh == self.row_fh:
            life = self.last_life
            if life is not None and life.deleted:
                return NOT_TAKEN  # the write answers ESTALE
            if size <= self.row_max:
                return self.write(fh, self.last_file, row_writer, data, size, True)
        file = self.append_file(fh)
        if file is None:
            return NOT_TAKEN  # another file, or the write answers ESTALE
        framer = file.framer
        partition = file.partition
        if (
            partition is None
            or type(framer) is not LineFramer
            or framer.pending
            or framer.discarding
            or framer.parse_key
            or size > framer.max_bytes
        ):
            return NOT_TAKEN
        log = self.logs.get((file.topic, partition))
        if log is None:
            return NOT_TAKEN
        self.row_max = framer.max_bytes
        return self.write(fh, file, log.line_writer, data, size, False)

    cdef object append_file(self, uint64_t fh):
        """The open append file of ``fh``, None for any other file, a deleted
        topic's (its write answers ESTALE) or before recovery is done."""
        file = self.files.get(fh)
        if file is None or file is not self.last_file:
            if type(file) is not AppendFile:
                return None
            if not self.ready:
                self.ready = self.ops.ready.is_set()  # recovery done: for good
                if not self.ready:
                    return None
            self.last_life = self.ops.handles.life_of(fh)
            self.last_file = file
        life = self.last_life
        if life is not None and life.deleted:
            return None
        return file

    cdef long bulk(self, uint64_t fh, const uint8_t *data, Py_ssize_t size) except? -2:
        """0 once the ``size`` bytes at ``data``, written to an append file, are
        appended as `Operations.write` appends them, an errno, or `NOT_TAKEN`."""
        self.row_writer = None
        file = self.append_file(fh)
        if file is None:
            return NOT_TAKEN
        end = None
        if type(file.framer) is LineFramer:  # where the text after the last line starts
            found = memrchr(data, 10, size)
            end = 0 if found == NULL else <const uint8_t *>found - data + 1
        started = monotonic() if self.metrics is not None else 0.0
        view = PyMemoryView_FromMemory(<char *>data, size, PyBUF_READ)
        cdef long code = 0
        try:
            if not file.take(view, end):
                return NOT_TAKEN
        except Exception as e:  # every failure is an errno, as in `Operations.write`
            code = failed("write", (fh,), e)
        finally:
            release(view)
        if self.metrics is not None:  # what `Operations.write` tells them
            try:
                if code == 0:
                    self.metrics.written(file.topic, size)
                self.metrics.fuse_request("write", "AppendFile", monotonic() - started, code)
            except Exception:  # taken: nothing may have pyfuse3 take it again
                logger.exception("counting a write to %s", file.topic)
        return code

    cdef long write(
        self, uint64_t fh, file, LineWriter writer, const uint8_t *data, Py_ssize_t size,
        bint next,
    ) except? -2:
        """``writer``'s write of the line at ``data`` (``next``: a row's next), as
        `take` answers it."""
        try:
            if next:
                written = writer.write_next_at(data, size - 1)
            else:
                written = writer.write_at(data, size - 1)
        except Exception as e:  # every failure is an errno, as in `Operations.write`
            return failed("write", (fh,), e)
        if written is None:
            return NOT_TAKEN
        self.written, self.file = written, file
        self.size = size
        self.row_fh, self.row_writer = fh, writer
        return 0

    cdef int done(self) except -1:
        """The books of the line `take` wrote, once the writer is answered."""
        written, file = self.written, self.file
        self.written = self.file = None
        if written is None:
            return 0
        try:
            written.keep_books()  # on failure the partition went offline (_line.pyx)
            if file.receipts is not None:
                file.add_receipt(file.partition, written.first, 1)
            if self.metrics is not None:  # its record, bytes and time
                self.metrics.line_written(file.topic, self.size, monotonic() - self.started)
        except Exception:
            logger.exception("after appending a line to %s-%d", file.topic, file.partition)
        return 0


cdef release(view):
    """The request's bytes let go of: nothing may read them once it is answered."""
    try:
        view.release()
    except BufferError:  # still referenced: a defect, said loudly
        logger.error("a write's bytes were kept beyond its append")


# The hooks `_fuseinit.c` calls with the GIL (its `struct line_hooks`): none
# raises; what `take` could not say as an errno is reported and not taken.
ctypedef long (*take_fn)(object, uint64_t, const uint8_t *, Py_ssize_t, int) noexcept
ctypedef void (*done_fn)(object) noexcept
ctypedef long (*bulk_fn)(object, uint64_t, const uint8_t *, Py_ssize_t) noexcept

cdef struct LineHooks:
    take_fn take
    done_fn done
    bulk_fn bulk


cdef long take_line(
    object lines, uint64_t fh, const uint8_t *data, Py_ssize_t size, int in_row
) noexcept:
    try:
        return (<LineWrites>lines).take(fh, data, size, in_row)
    except BaseException:
        logger.exception("taking a one-line write")
        return NOT_TAKEN


cdef void done_line(object lines) noexcept:
    try:
        (<LineWrites>lines).done()
    except BaseException:
        logger.exception("after a one-line write")


cdef long bulk_write(object lines, uint64_t fh, const uint8_t *data, Py_ssize_t size) noexcept:
    try:
        return (<LineWrites>lines).bulk(fh, data, size)
    except BaseException:
        logger.exception("taking a write")
        return NOT_TAKEN


cdef LineHooks HOOKS
HOOKS.take = take_line
HOOKS.done = done_line
HOOKS.bulk = bulk_write
