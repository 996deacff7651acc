"""The Kafka log: record format and codecs, indexes, segments, recovery, the
partition log, the store and its configuration. Imports nothing from
`logfs.mount` or `logfs.spark`, and never trio or pyfuse3."""

# The per-record loops live in compiled modules (Cython, built by pip at install time),
# and nothing replaces them in Python: without them logfs cannot work, so say so here,
# once, instead of in whichever module happens to import one first. Each room imports its
# own compiled modules.
COMPILED = {
    f"logfs.core.{name}"
    for name in (
        "format.walker",
        "format._checks",
        "format._columns",
        "storage._scan",
        "storage.books",
        "log._keymap",
        "log._line",
    )
}
try:
    from . import format, log, storage  # noqa: F401
except ImportError as e:
    if e.name not in COMPILED:
        raise
    raise ImportError(
        "logfs's compiled codec (the .pyx modules of logfs/core) is not built or does not "
        f"load ({e.name}): reinstall logfs with `pip install .` (or `pip install -e .` in a "
        "checkout, or `bash mount_scripts/install.sh`), which needs a C compiler and "
        "Python's headers"
    ) from e
