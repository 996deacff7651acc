# What the log room gives compiled code outside it: the one-line fast path's
# classes (_line.pxd), for the mount's take of a line (mount/fuse/_lines.pyx).

from ._line cimport LineWrite, LineWriter
