/* Listings the kernel keeps (_fuselisting.c, mount/fuse/listings.py). */
#ifndef LOGFS_FUSELISTING_H
#define LOGFS_FUSELISTING_H

#include <stdint.h>
#include <sys/types.h>

#define LISTING_REPLY_BYTES 32 /* struct fuse_out_header (16) + struct fuse_open_out (16) */

#pragma GCC visibility push(hidden)
/* Each request read, before libfuse has it: an OPENDIR's is remembered. */
void listing_saw_request(const unsigned char *request, ssize_t got);
/* The answer naming open directory `fh` gets the flags of a kept listing. */
void listing_keep(uint64_t fh, int keep);
/* 1 while an answer waits for those flags. */
int listing_pending(void);
/* 1 if `reply` (LISTING_REPLY_BYTES) answers an OPENDIR with the handle
 * `listing_keep` named: it then carries the flags. */
int listing_reply(unsigned char *reply);
#pragma GCC visibility pop

#endif
