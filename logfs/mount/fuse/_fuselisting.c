/*
 * A listing the kernel keeps (mount/fuse/listings.py, docs/mount.md): the answer to
 * an OPENDIR that names the handle `listing_keep` was given gets FOPEN_CACHE_DIR
 * (the kernel keeps the listing it reads through it) and, if asked,
 * FOPEN_KEEP_CACHE (it answers from the listing it kept; else it drops that one at
 * this open): flags pyfuse3 cannot set. pyfuse3 answers an OPENDIR as soon as its
 * handler returns, which calls `listing_keep` last. Only an answer to an OPENDIR
 * request read in _fuseinit.c's `read_request` is changed, so no other answer of
 * the same size (a READ's 16 bytes) can be.
 */
#include <stdint.h>
#include <string.h>

#include "_fuselisting.h"

#define IN_HEADER_BYTES 40 /* struct fuse_in_header */
#define OPCODE_AT 4        /* fuse_in_header.opcode */
#define UNIQUE_AT 8        /* fuse_in_header.unique, fuse_out_header.unique */
#define ERROR_AT 4         /* fuse_out_header.error */
#define FH_AT 16           /* fuse_open_out.fh */
#define OPEN_FLAGS_AT 24   /* fuse_open_out.open_flags */
#define FUSE_OPENDIR_OPCODE 27
#define FOPEN_KEEP_CACHE (1u << 1)
#define FOPEN_CACHE_DIR (1u << 3)
#define OPENDIRS 8

static uint64_t opendirs[OPENDIRS]; /* the last OPENDIR requests read (their uniques) */
static unsigned opendirs_seen = 0;
static uint64_t listing_fh = 0;
static uint32_t listing_flags = 0; /* for the answer naming listing_fh; 0: none */

void listing_saw_request(const unsigned char *request, ssize_t got)
{
    uint32_t opcode;
    if (got < IN_HEADER_BYTES)
        return;
    memcpy(&opcode, request + OPCODE_AT, sizeof opcode);
    if (opcode == FUSE_OPENDIR_OPCODE)
        memcpy(&opendirs[opendirs_seen++ % OPENDIRS], request + UNIQUE_AT, sizeof(uint64_t));
}

void listing_keep(uint64_t fh, int keep)
{
    listing_fh = fh;
    listing_flags = FOPEN_CACHE_DIR | (keep ? FOPEN_KEEP_CACHE : 0);
}

int listing_pending(void)
{
    return listing_flags != 0;
}

int listing_reply(unsigned char *reply)
{
    uint64_t unique, fh;
    int32_t error;
    memcpy(&unique, reply + UNIQUE_AT, sizeof unique);
    memcpy(&fh, reply + FH_AT, sizeof fh);
    memcpy(&error, reply + ERROR_AT, sizeof error);
    if (listing_flags == 0 || error != 0 || unique == 0 || fh != listing_fh)
        return 0;
    for (int i = 0; i < OPENDIRS; i++) {
        if (opendirs[i] == unique) {
            uint32_t flags;
            memcpy(&flags, reply + OPEN_FLAGS_AT, sizeof flags);
            flags |= listing_flags;
            memcpy(reply + OPEN_FLAGS_AT, &flags, sizeof flags);
            opendirs[i] = 0;
            listing_flags = 0;
            return 1;
        }
    }
    return 0;
}
