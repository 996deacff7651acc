"""``format("logfs_replay")``: logfs's Spark reader with the decoding taken out, for
bench_spark.py. Each Python worker decodes each input partition once, with logfs's own
reader, and from then on yields the same Arrow batches from memory: what is left is the
cost of the Python data source API itself (planning, the worker, handing Arrow batches to
the JVM). Importable by the workers (bench_spark.py puts this directory on their path),
so the cache lives in the worker process across tasks."""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader

from logfs.spark.source import LogfsDataSource

_DECODED: dict[tuple, list] = {}  # (path, topic, partition, start, end) -> Arrow batches


class ReplaySource(LogfsDataSource):
    @classmethod
    def name(cls) -> str:
        return "logfs_replay"

    def reader(self, schema):
        return ReplayReader(super().reader(schema))


class ReplayReader(DataSourceReader):
    def __init__(self, inner: DataSourceReader) -> None:
        self.inner = inner

    def partitions(self):
        return self.inner.partitions()

    def read(self, partition) -> Iterator:
        r = partition.range
        key = (self.inner.options.path, r.topic, r.partition, r.start, r.end)
        if key not in _DECODED:
            _DECODED[key] = list(self.inner.read(partition))
        yield from _DECODED[key]
