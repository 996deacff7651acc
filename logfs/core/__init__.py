"""The Kafka log, in floors: the one table of errors and the topic settings
(errors.py, config.py), the record format and codecs (format/), a partition
directory's files: segments, indexes, recovery (storage/), the partition log
and the store (log/), what writers beside a daemon run (client/) and the
offline tools (tools/). Imports nothing from `logfs.groups` or a face
(`logfs.mount`, `logfs.kafka`, `logfs.spark`), and never trio or pyfuse3."""

# The per-record loops live in the compiled `_codec` (Cython, built by pip at install
# time) and nothing replaces them in Python: without it logfs cannot work, so say so
# here, once, instead of in whichever module happens to import it first.
try:
    from .format import _codec  # noqa: F401
except ImportError as e:
    raise ImportError(
        "logfs's compiled codec (logfs/core/format/_codec.pyx) is not built or does not load: "
        "reinstall logfs with `pip install .` (or `pip install -e .` in a checkout, or "
        "`bash mount_scripts/install.sh`), which needs a C compiler and Python's headers"
    ) from e
