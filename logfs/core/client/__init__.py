"""What a writer beside the daemon runs: `Producer`, delivery of its batches to
the live mount (else the store), the mount record that tells where the
mount is, and the names both sides of a mount share (file names, xattrs, the
errno table)."""

from . import mountinfo, names
from .producer import Producer

__all__ = ["Producer", "mountinfo", "names"]
