"""The offline tools over a data directory: ``logfs dump`` and ``logfs check``."""

from .offline import check, dump

__all__ = ["check", "dump"]
