"""What the record walker (walker.pyx) reports, worded for the errors that
name a refused batch: `PROBLEMS` maps each `Problem` but OK to a function of
(record, found, wanted) that says it."""

from .walker import Problem

PROBLEMS = {
    Problem.DECLARED: lambda n, found, wanted: f"{wanted} records declared, {found} found",
    Problem.LONG_VARINT: lambda n, *_: f"record {n}: varint longer than 10 bytes",
    Problem.SHORT_RECORD: lambda n, found, wanted: (
        f"record {n}: length {found}, at least {wanted} expected"
    ),
    Problem.TIMESTAMP_OVERRUN: lambda n, *_: f"record {n}: timestamp delta overruns the record",
    Problem.OFFSET_OVERRUN: lambda n, *_: f"record {n}: offset delta overruns the record",
    Problem.OFFSET_ORDER: lambda n, found, wanted: (
        f"record {n}: offset delta out of order ({found}, expected its index {wanted})"
    ),
    Problem.KEY_LENGTH: lambda n, *_: f"record {n}: bad key length",
    Problem.NO_KEY: lambda n, *_: f"record {n}: no key, and the topic is compacted",
    Problem.VALUE_LENGTH: lambda n, *_: f"record {n}: bad value length",
    Problem.HEADER_COUNT: lambda n, *_: f"record {n}: bad header count",
    Problem.HEADERS: lambda n, *_: f"record {n}: malformed headers",
    Problem.UNFILLED: lambda n, *_: f"record {n}: its fields do not fill its length",
    Problem.SECTION: lambda n, found, wanted: (
        f"its records take {found} bytes (at record {n}), its records section holds {wanted}"
    ),
}
