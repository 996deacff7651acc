"""The Spark face: the ``logfs`` PySpark data source (`source`), offset planning
(`plan`), readers (`read`), Arrow building (`arrow`) and the sink (`write`).
Never imports trio or pyfuse3: it runs in Spark's Python workers."""

from .source import LogfsDataSource, register

__all__ = ["LogfsDataSource", "register"]
