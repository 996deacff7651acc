"""The ``logfs`` PySpark data source: Spark's Kafka source and sink over a data directory.

    df = spark.read.format("logfs").option("path", "/data").option("subscribe", "orders").load()

This module owns the `DataSource`: the format name, the schema and which reader or writer a
query gets; the readers are in `read`, the sink in `write`, option parsing and offset planning
in `plan`, Arrow building in `arrow`.

Schema, options and defaults are those of Spark's Kafka source (see docs/spark.md). Spark
registers the source by itself once logfs is installed (the top-level ``pyspark_logfs``
module) in the Python that ``PYSPARK_PYTHON`` names; `register` does it by hand, e.g. when
logfs is shipped with ``--py-files``, and first checks, in local mode, that Spark's Python
workers can import logfs at all.

This module never imports trio or pyfuse3: it runs in Spark's Python workers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

try:
    from pyspark.sql.datasource import DataSource
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"the logfs Spark data source needs PySpark and pyarrow: pip install 'logfs[spark]' ({e})"
    ) from None

from ..core.errors import LogfsError
from .options import parse_options

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

        # Asked by batch and streaming queries alike, before Spark says which.
        return spark_schema(parse_options(self.options, streaming=None).include_headers)

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

        # ``overwrite`` is Spark's truncate, asked for by outputMode("complete"): as Kafka's
        # sink, every micro-batch's whole result is appended (a log is never truncated).
        _require_arrow()
        return LogfsStreamWriter(write_options(self.options, schema))


def _check_mode(overwrite: bool) -> None:
    from .options import SparkOptionError

    _require_arrow()
    if overwrite:
        raise SparkOptionError(
            "save mode overwrite is not supported: a logfs topic is an append-only log; "
            'use .mode("append")'
        )


class WorkerPythonError(LogfsError, RuntimeError):
    """Spark's Python workers would run an interpreter that cannot import logfs."""


# Run by the workers' interpreter: exit 0 when it can import logfs and pyarrow.
_PROBE = (
    "import importlib.util as u, sys; "
    "sys.exit(not all(u.find_spec(m) for m in ('logfs', 'pyarrow')))"
)


def register(spark) -> None:
    """Register the ``logfs`` format with a SparkSession by hand.

    Needed only when Spark did not find the installed ``pyspark_logfs`` module by itself (see
    docs/spark.md). In local mode, first checks that the Python that Spark starts its workers
    with can import logfs: otherwise every task would fail with "No module named 'logfs'".

    Raises:
        WorkerPythonError: that interpreter is missing or lacks logfs or pyarrow; the message
            says what to set.
    """
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        check_worker_python(sc.pythonExec)
    spark.dataSource.register(LogfsDataSource)


def check_worker_python(python: str) -> None:
    """Raise `WorkerPythonError` unless `python` (a SparkContext's ``pythonExec``: the
    session's ``PYSPARK_PYTHON``, default ``python3`` from PATH) can import logfs and pyarrow.

    Free when it is the driver's own interpreter; otherwise one short subprocess.
    """
    path = shutil.which(python)
    if path == sys.executable:
        return
    if path is not None:
        done = subprocess.run([path, "-c", _PROBE], capture_output=True, timeout=60)
        if done.returncode == 0:
            return
    found = f"{path}, which cannot import logfs and pyarrow" if path else "not found"
    raise WorkerPythonError(
        f"Spark's Python workers run {python!r} ({found}). Set PYSPARK_PYTHON={sys.executable} "
        "in the environment before the SparkSession starts (export it, or os.environ before "
        "getOrCreate()), or install 'logfs[spark]' into that Python"
    )
