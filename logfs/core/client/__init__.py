"""What a writer beside the daemon runs: `Producer`, delivery of its batches to
the live mount (else the store), the mount record that tells where the
mount is, and the names both sides of a mount share (file names, xattrs, the
errors a writer reads back from an errno); and for readers without the data
directory, `RemoteStore`: a Kafka listener's topics and batches over Kafka's
protocol."""

from . import mountinfo, names, wire
from .producer import Producer
from .remote import RemoteStore

__all__ = ["Producer", "RemoteStore", "mountinfo", "names", "wire"]
