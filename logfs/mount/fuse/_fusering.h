/* FUSE over io_uring for the mount's own request loop (_fusering.c). */
#ifndef LOGFS_FUSERING_H
#define LOGFS_FUSERING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* What became of the ring (read and set by mount/fuse/fuseinit.py). */
enum ring_state {
    RING_OFF = 0,         /* not asked for (`-o io_uring` not given) */
    RING_ASKED = 1,       /* asked for: set before the mount */
    RING_NOT_OFFERED = 2, /* the kernel's INIT did not offer it (enable_uring off, or older) */
    RING_ON = 3,          /* every queue registered: requests come through the ring */
    RING_FAILED = 4,      /* setting it up failed (logfs_ring_errno): /dev/fuse only */
};

extern int logfs_ring_state;
extern int logfs_ring_errno;
/* How long the wait for the next line of a row watches the ring before it
 * sleeps (`-o io_uring_spin_us`): 0, it sleeps at once. */
extern long logfs_ring_spin_ns;

/* The monotonic clock in ns: a row's length (_fuseinit.c), the ring's watch (_fusering_io.c). */
static inline int64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* The rest is the library's own: not exported from it, which is loaded RTLD_GLOBAL. */
#pragma GCC visibility push(hidden)
int ring_session_fd(int dev);
int ring_dev(int fd);
void ring_saw_init(const unsigned char *request, ssize_t size);
int ring_init_reply(unsigned char *reply);
void ring_start(const unsigned char *reply);
ssize_t ring_next(void *buf, size_t len);
int ring_reply(const struct iovec *iov, int count, ssize_t *sent);
int ring_flush(void);
int ring_wait(int loop_fd, long ns, int *misses);
int ring_hand_back(void);
void ring_close(void);
#pragma GCC visibility pop

#endif
