/*
 * CRC-32C (Castagnoli), as Kafka's RecordBatch v2 and the crc32c package compute it,
 * for compiled code that checksums a few pieces without joining them first (the
 * one-line write, core/log/_line.pyx). `logfs_crc32c(crc, data, size)` extends the
 * CRC of what came before (0 for nothing) by `size` bytes, like the package's
 * `crc32c(data, value=crc)`.
 *
 * On x86-64 with SSE4.2 the processor's crc32 instruction does the work, eight bytes
 * at a time; elsewhere a table built at the first call does it a byte at a time
 * (`logfs_crc32c_portable`, which the tests compare with the package too).
 */
#ifndef LOGFS_CRC32C_H
#define LOGFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LOGFS_CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static inline uint32_t logfs_crc32c_portable(uint32_t crc, const void *data, size_t size)
{
    static uint32_t table[256];
    static int built = 0; /* built twice at worst, to the same values */
    if (!built) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int bit = 0; bit < 8; bit++)
                c = c & 1 ? (c >> 1) ^ LOGFS_CRC32C_POLY : c >> 1;
            table[i] = c;
        }
        built = 1;
    }
    const uint8_t *p = data;
    crc = ~crc;
    while (size--)
        crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static inline uint32_t
logfs_crc32c_sse42(uint32_t crc, const void *data, size_t size)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    for (; size >= 8; size -= 8, p += 8) {
        uint64_t word;
        memcpy(&word, p, sizeof word);
        c = __builtin_ia32_crc32di(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    while (size--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

static inline uint32_t logfs_crc32c(uint32_t crc, const void *data, size_t size)
{
    static int hardware = -1;
    if (hardware < 0) {
        __builtin_cpu_init();
        hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    return hardware ? logfs_crc32c_sse42(crc, data, size)
                    : logfs_crc32c_portable(crc, data, size);
}
#else
static inline uint32_t logfs_crc32c(uint32_t crc, const void *data, size_t size)
{
    return logfs_crc32c_portable(crc, data, size);
}
#endif

#endif
