"""Spark imports every installed top-level ``pyspark_*`` module and registers its
``DefaultSource``: this makes ``format("logfs")`` work with no setup. Keep it cheap and
error-free to import; the source itself loads its dependencies only when used.

Spark looks once per JVM, in a Python process of its own that runs ``PYSPARK_DRIVER_PYTHON``,
else ``PYSPARK_PYTHON``, else ``python3`` (from the driver JVM's environment, not the driver's
interpreter), and lists modules with ``pkgutil.iter_modules()``: this file must sit in a
``sys.path`` directory of that interpreter, not behind an import hook. docs/spark.md, "Install
and register", has the details."""

try:
    from logfs.spark import LogfsDataSource as DefaultSource
except ImportError:  # pragma: no cover - logfs[spark] not installed: register nothing
    pass
else:
    __all__ = ["DefaultSource"]
