"""The Kafka log, in floors: the one table of errors and the topic settings
(errors.py, config.py), the record format and codecs (format/), a partition
directory's files: segments, indexes, recovery (storage/), the partition log
and the store (log/), what writers beside a daemon run (client/) and the
offline tools (tools/). Imports nothing from `logfs.groups` or a face
(`logfs.mount`, `logfs.kafka`, `logfs.spark`), and never trio or pyfuse3."""

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
