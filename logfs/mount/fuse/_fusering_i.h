/* What the two halves of FUSE over io_uring share (_fusering.c: setting up and
 * closing the ring; _fusering_io.c: requests and answers through it). */
#ifndef LOGFS_FUSERING_I_H
#define LOGFS_FUSERING_I_H

#include "_fusering.h"

#include <linux/io_uring.h>
#include <stdint.h>

#define FUSE_INIT_OPCODE 26
#define IN_HEADER_BYTES 40 /* struct fuse_in_header */
#define OUT_HEADER_BYTES 16 /* struct fuse_out_header */
#define INIT_IN_FLAGS_AT (IN_HEADER_BYTES + 12)  /* fuse_init_in.flags */
#define INIT_IN_FLAGS2_AT (IN_HEADER_BYTES + 16) /* fuse_init_in.flags2 */
#define INIT_OUT_FLAGS_AT (OUT_HEADER_BYTES + 12)
#define INIT_OUT_MAX_WRITE_AT (OUT_HEADER_BYTES + 20)
#define INIT_OUT_MAX_PAGES_AT (OUT_HEADER_BYTES + 28)
#define INIT_OUT_FLAGS2_AT (OUT_HEADER_BYTES + 32)
#define INIT_EXT (1u << 30)      /* the flags go on in flags2 */
#define OVER_IO_URING (1u << 9)  /* FUSE_OVER_IO_URING, bit 41 of the flags */
/* struct fuse_uring_req_header: in_out[128], op_in[128], struct fuse_uring_ent_in_out */
#define OP_IN_AT 128
#define OP_IN_BYTES 128
#define COMMIT_ID_AT (256 + 8)
#define PAYLOAD_SIZE_AT (256 + 16)
#define HEADER_BYTES 4096 /* 288 used, a page of its own */
#define CMD_REGISTER 1
#define CMD_COMMIT_AND_FETCH 2
#define SQE_BYTES 128      /* IORING_SETUP_SQE128: room for struct fuse_uring_cmd_req */
#define CMD_AT 48          /* the SQE's command area */
#define DEPTH 16           /* entries per queue: requests in the daemon at once, per CPU */
#define MIN_PAYLOAD 8192   /* FUSE_MIN_READ_BUFFER */

struct entry {
    unsigned char *header;
    unsigned char *payload;
    struct iovec iov[2];
    uint64_t unique;    /* the request the daemon holds through this entry, or 0 */
    uint64_t commit_id; /* the kernel's name for it, given back with the answer */
    uint16_t qid;
};

struct ring {
    int dev;     /* /dev/fuse */
    int session; /* what libfuse and pyfuse3 see: an epoll set of `dev` and `fd` */
    int fd;      /* the io_uring */
    int offered; /* the kernel's INIT offered FUSE_OVER_IO_URING */
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, sq_entries;
    unsigned *cq_head, *cq_tail, *cq_mask;
    unsigned char *sqes;
    struct io_uring_cqe *cqes;
    void *map;
    size_t map_size, sqes_size, payload;
    struct entry *entries;
    int count;
    unsigned unsubmitted; /* answers queued by `ring_reply` for the next `submit` */
    int watching;         /* a poll of the loop's descriptor is in the ring (`ring_wait`) */
};

#pragma GCC visibility push(hidden)
extern struct ring ring;

#define LOOP_TAG UINT64_MAX /* user_data of the poll of the loop's descriptor */


int submit(unsigned count);
void command(int index, uint32_t op);
#pragma GCC visibility pop

#endif
