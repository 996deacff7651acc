"""What a writer beside the daemon runs: `Producer`, delivery of its batches to
the live mount (else the store), and the mount record that tells where the
mount is."""

from . import mountinfo
from .producer import Producer

__all__ = ["Producer", "mountinfo"]
