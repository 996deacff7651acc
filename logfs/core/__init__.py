"""The Kafka log: record format and codecs, indexes, segments, recovery, the
partition log, the store and its configuration. Imports nothing from
`logfs.mount` or `logfs.spark`, and never trio or pyfuse3."""

# The per-record loops live in the compiled `_codec` (Cython, built by pip at install
# time) and nothing replaces them in Python: without it logfs cannot work, so say so
# here, once, instead of in whichever module happens to import it first.
try:
    from .format import _codec  # noqa: F401
except ImportError as e:
    raise ImportError(
        "logfs's compiled codec (logfs/core/_codec.pyx) is not built or does not load: "
        "reinstall logfs with `pip install .` (or `pip install -e .` in a checkout, or "
        "`bash mount_scripts/install.sh`), which needs a C compiler and Python's headers"
    ) from e
