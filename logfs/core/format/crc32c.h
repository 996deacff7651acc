/*
 * CRC-32C (Castagnoli), as Kafka's RecordBatch v2 and the crc32c package compute it,
 * for compiled code: the one-line write (core/log/_line.pyx), which checksums a few
 * pieces without joining them first, and the compiled passes over whole batches
 * (format/_columns.pyx, _checks.pyx, _valuelines.pyx), which checksum each batch
 * where it lies without a call into Python. `logfs_crc32c(crc, data, size)` extends
 * the CRC of what came before (0 for nothing) by `size` bytes, like the package's
 * `crc32c(data, value=crc)`.
 *
 * On x86-64 with SSE4.2 the processor's crc32 instruction does the work, eight bytes
 * at a time. One instruction takes three cycles to give its result and the processor
 * starts one per cycle, so a long buffer is cut into three blocks checksummed side by
 * side, in one loop; the three CRCs are then joined (`logfs_crc32c_join`). Elsewhere a
 * table built at the first call does it a byte at a time (`logfs_crc32c_portable`,
 * which the tests compare with the package too).
 *
 * Joining: over GF(2), the CRC register of A followed by B (no inversions) is the
 * register of A moved past |B| zero bytes, xor the register of B from zero. Moving a
 * register past n zero bytes is linear in its 32 bits, so it is four lookups in tables
 * made once for each block size n: the image of every byte value at each of the four
 * byte positions.
 */
#ifndef LOGFS_CRC32C_H
#define LOGFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LOGFS_CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

/* The byte table: the register after one byte, for each value of its low byte. Built
 * twice at worst, to the same values; `built` is set (release) only once it is whole. */
static inline const uint32_t *logfs_crc32c_table(void)
{
    static uint32_t table[256];
    static int built = 0;
    if (!__atomic_load_n(&built, __ATOMIC_ACQUIRE)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int bit = 0; bit < 8; bit++)
                c = c & 1 ? (c >> 1) ^ LOGFS_CRC32C_POLY : c >> 1;
            table[i] = c;
        }
        __atomic_store_n(&built, 1, __ATOMIC_RELEASE);
    }
    return table;
}

static inline uint32_t logfs_crc32c_portable(uint32_t crc, const void *data, size_t size)
{
    const uint32_t *table = logfs_crc32c_table();
    const uint8_t *p = data;
    crc = ~crc;
    while (size--)
        crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* Moving a register past `zeros` zero bytes, as four byte tables (`shift[k][b]`: the
 * image of b << 8k), made from the images of the 32 one-bit registers. */
static inline void logfs_crc32c_shift_table(uint32_t shift[4][256], size_t zeros)
{
    const uint32_t *table = logfs_crc32c_table();
    uint32_t bit_image[32];
    for (int i = 0; i < 32; i++) {
        uint32_t c = 1u << i;
        for (size_t n = 0; n < zeros; n++)
            c = table[c & 0xFF] ^ (c >> 8);
        bit_image[i] = c;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t image = 0;
            for (int j = 0; j < 8; j++)
                if (b >> j & 1)
                    image ^= bit_image[8 * k + j];
            shift[k][b] = image;
        }
}

/* The register `a` of A joined with the register `b` of the `zeros` bytes after A. */
static inline uint32_t logfs_crc32c_join(const uint32_t shift[4][256], uint32_t a, uint32_t b)
{
    return shift[0][a & 0xFF] ^ shift[1][a >> 8 & 0xFF] ^ shift[2][a >> 16 & 0xFF]
           ^ shift[3][a >> 24] ^ b;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The blocks checksummed side by side: long ones, then short ones for the rest. */
#define LOGFS_CRC32C_LONG 8192
#define LOGFS_CRC32C_SHORT 256

/* Three blocks of `block` bytes from `*p` on, side by side, joined into `c`, for as
 * long as three are left; `*p` and `*size` moved past them. */
__attribute__((target("sse4.2"))) static inline uint64_t
logfs_crc32c_sse42_blocks(uint64_t c, const uint8_t **p, size_t *size, size_t block,
                          const uint32_t shift[4][256])
{
    while (*size >= 3 * block) {
        const uint8_t *a = *p, *end = *p + block;
        uint64_t c1 = 0, c2 = 0;
        for (; a < end; a += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, a, sizeof w0);
            memcpy(&w1, a + block, sizeof w1);
            memcpy(&w2, a + 2 * block, sizeof w2);
            c = __builtin_ia32_crc32di(c, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c = logfs_crc32c_join(shift, (uint32_t)c, (uint32_t)c1);
        c = logfs_crc32c_join(shift, (uint32_t)c, (uint32_t)c2);
        *p += 3 * block;
        *size -= 3 * block;
    }
    return c;
}

__attribute__((target("sse4.2"))) static inline uint32_t
logfs_crc32c_sse42(uint32_t crc, const void *data, size_t size)
{
    /* Made once each, twice at worst, to the same values; `shifts_made` is set
     * (release) only once both are whole. */
    static uint32_t long_shift[4][256], short_shift[4][256];
    static int shifts_made = 0;
    const uint8_t *p = data;
    uint64_t c = ~crc;
    if (size >= 3 * LOGFS_CRC32C_SHORT) {
        if (!__atomic_load_n(&shifts_made, __ATOMIC_ACQUIRE)) {
            logfs_crc32c_shift_table(long_shift, LOGFS_CRC32C_LONG);
            logfs_crc32c_shift_table(short_shift, LOGFS_CRC32C_SHORT);
            __atomic_store_n(&shifts_made, 1, __ATOMIC_RELEASE);
        }
        c = logfs_crc32c_sse42_blocks(c, &p, &size, LOGFS_CRC32C_LONG, long_shift);
        c = logfs_crc32c_sse42_blocks(c, &p, &size, LOGFS_CRC32C_SHORT, short_shift);
    }
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
