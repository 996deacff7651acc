"""The Spark face's error for options (options.py and listener.py raise it)."""

from __future__ import annotations

from ..core.errors import LogfsError


class SparkOptionError(LogfsError, ValueError):
    """An invalid or inconsistent data source option."""
