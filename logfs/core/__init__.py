"""The Kafka log: record format and codecs, indexes, segments, recovery, the
partition log, the store and its configuration. Imports nothing from
`logfs.mount` or `logfs.spark`, and never trio or pyfuse3."""

# The per-record loops live in compiled modules (Cython, built by pip at install time),
# and nothing replaces them in Python: without them logfs cannot work, so say so here,
# once, instead of in whichever module happens to import one first.
try:
    from .format import _checks, _columns, walker  # noqa: F401
    from .log import _keymap  # noqa: F401
    from .storage import _scan, books  # noqa: F401
except ImportError as e:
    raise ImportError(
        "logfs's compiled codec (the .pyx modules of logfs/core) is not built or does not "
        "load: reinstall logfs with `pip install .` (or `pip install -e .` in a checkout, or "
        "`bash mount_scripts/install.sh`), which needs a C compiler and Python's headers"
    ) from e
