"""The ``logfs`` PySpark data source: Spark's Kafka source and sink over a data directory.

    df = spark.read.format("logfs").option("path", "/data").option("subscribe", "orders").load()

This module owns the `DataSource`: the format name, the schema and which reader or writer a
query gets; the readers are in `read`, the sink in `write`, option parsing and offset planning
in `plan`, Arrow building in `arrow`.

Schema, options and defaults are those of Spark's Kafka source (see docs/spark.md). Spark
registers the source by itself once logfs is installed (the top-level ``pyspark_logfs``
module); `register` does it by hand, e.g. when logfs is only on ``PYTHONPATH``.

This module never imports trio or pyfuse3: it runs in Spark's Python workers.
"""

from __future__ import annotations

try:
    from pyspark.sql.datasource import DataSource
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"the logfs Spark data source needs PySpark and pyarrow: pip install 'logfs[spark]' ({e})"
    ) from None

from .plan import parse_options

MISSING_ARROW = "the logfs Spark data source needs pyarrow: pip install 'logfs[spark]'"


def _require_arrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError(MISSING_ARROW) from None


class LogfsDataSource(DataSource):
    """``format("logfs")``: batch and streaming reads and writes of a logfs data directory."""

    @classmethod
    def name(cls) -> str:
        return "logfs"

    def schema(self):
        _require_arrow()
        from .arrow import spark_schema

        return spark_schema(parse_options(self.options, streaming=False).include_headers)

    def reader(self, schema):
        from .read import LogfsBatchReader

        _require_arrow()
        return LogfsBatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema):
        from .read import LogfsStreamReader

        _require_arrow()
        return LogfsStreamReader(parse_options(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        from .write import LogfsWriter, write_options

        _check_mode(overwrite)
        return LogfsWriter(write_options(self.options, schema))

    def streamWriter(self, schema, overwrite: bool):
        from .write import LogfsStreamWriter, write_options

        _check_mode(overwrite)
        return LogfsStreamWriter(write_options(self.options, schema))


def _check_mode(overwrite: bool) -> None:
    from .plan import SparkOptionError

    _require_arrow()
    if overwrite:
        raise SparkOptionError(
            "save mode overwrite is not supported: a logfs topic is an append-only log; "
            'use .mode("append")'
        )


def register(spark) -> None:
    """Register the ``logfs`` format with a SparkSession (needed only when Spark did not
    discover the installed ``pyspark_logfs`` module by itself)."""
    spark.dataSource.register(LogfsDataSource)
