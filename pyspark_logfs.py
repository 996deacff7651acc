"""Spark imports every installed top-level ``pyspark_*`` module and registers its
``DefaultSource``: this makes ``format("logfs")`` work with no setup. Keep it cheap and
error-free to import; the source itself loads its dependencies only when used."""

try:
    from logfs.spark import LogfsDataSource as DefaultSource
except ImportError:  # pragma: no cover - logfs[spark] not installed: register nothing
    pass
else:
    __all__ = ["DefaultSource"]
