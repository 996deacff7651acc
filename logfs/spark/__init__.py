"""The Spark face: the ``logfs`` PySpark data source (`source`), options and offset
planning (`plan`), readers (`read`), the Kafka source schema and Arrow building
(`arrow`) and the sink (`write`). Imports only `logfs.core` of logfs, and never trio
or pyfuse3: it runs in Spark's Python workers."""

from .source import LogfsDataSource, register

__all__ = ["LogfsDataSource", "register"]
