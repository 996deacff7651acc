# The one record walker (walker.pyx), for every compiled module that reads records:
# the decoder and the producer batch check here in format, the cleaner's key map in log.

from libc.stdint cimport int64_t, uint8_t


cpdef enum Problem:
    # What the walker found wrong with a record; validate.py words the messages.
    OK = 0
    DECLARED = 1  # the section ends before the declared records do
    LONG_VARINT = 2  # a varint over 10 bytes
    SHORT_RECORD = 3  # a record length under MIN_RECORD_BYTES
    TIMESTAMP_OVERRUN = 4
    OFFSET_OVERRUN = 5
    OFFSET_ORDER = 6  # an offset delta other than the record's index (strict only)
    KEY_LENGTH = 7
    NO_KEY = 8  # a null key where keys are required
    VALUE_LENGTH = 9
    HEADER_COUNT = 10
    HEADERS = 11  # a null, non-UTF-8 or overrunning header
    UNFILLED = 12  # the fields end before the record's length says
    SECTION = 13  # the records do not end exactly at the section's end


cpdef enum Strictness:
    # How much of a record `read_record` reads and checks.
    HOP = 0  # its length and timestamp and offset deltas: enough to step to an offset
    FIELDS = 1  # also its key and value lengths, within the record (the cleaner)
    FULL = 2  # also its headers, and its fields filling it exactly: as Kafka's broker


cdef struct Rec:
    # One record as `read_record` found it; positions are into its buffer.
    Py_ssize_t start  # its length prefix
    Py_ssize_t end
    int64_t length
    int64_t ts_delta
    int64_t offset_delta
    Py_ssize_t key
    int64_t key_len  # -1: null
    Py_ssize_t value
    int64_t value_len  # -1: null
    int64_t headers


cdef struct Walk:
    # What `walk_section` found: where a problem is, and totals of the records.
    int64_t record
    int64_t found
    int64_t wanted
    int64_t ts_low  # smallest and largest timestamp delta
    int64_t ts_high
    int64_t value_bytes  # bytes of the non-null values


cdef int read_record(
    const uint8_t* buf,
    Py_ssize_t pos,
    Py_ssize_t end,
    int strictness,
    int64_t want_offset_delta,
    bint keys_required,
    Rec* r,
) except -1

cdef int read_full(
    const uint8_t* buf,
    Py_ssize_t pos,
    Py_ssize_t end,
    int64_t want_offset_delta,
    bint keys_required,
    Rec* r,
) except -1

cdef int walk_section(
    const uint8_t* buf,
    Py_ssize_t pos,
    Py_ssize_t end,
    int64_t count,
    int64_t* fields,
    Py_ssize_t stride,
    bint strict,
    bint keys_required,
    Walk* w,
    bint quick=*,
) except -1
