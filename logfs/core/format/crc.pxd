# CRC-32C in C (crc32c.h: the processor's instruction, three blocks side by side), for
# this package's compiled passes over whole batches: each batch checksummed where it
# lies, with no call into Python (_checks.pyx, _columns.pyx, _valuelines.pyx).

from libc.stdint cimport uint32_t


cdef extern from "crc32c.h":
    uint32_t logfs_crc32c(uint32_t crc, const void *data, size_t size) nogil
