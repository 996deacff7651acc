"""The Kafka log: record format and codecs, indexes, segments, recovery, the
partition log, the store and its configuration. Imports nothing from
`logfs.mount` or `logfs.spark`, and never trio or pyfuse3."""
