/*
 * FUSE over io_uring, the requests and answers (the ring itself: _fusering.c). A
 * request taken from an entry is laid out for libfuse as read() of /dev/fuse
 * gives it; an answer to it goes back into the entry, sent at once or with the
 * wait for the next request.
 */
#define _GNU_SOURCE
#include "_fusering_i.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int submit(unsigned count)
{
    return (int)syscall(__NR_io_uring_enter, ring.fd, count, 0, 0, NULL, 0);
}

/* The answers `ring_reply` queued, submitted: 0, or -1 and errno. */
int ring_flush(void)
{
    unsigned count = ring.unsubmitted;
    ring.unsubmitted = 0;
    return count == 0 || submit(count) == (int)count ? 0 : -1;
}

/* The next SQE, zeroed, published to the kernel: filled before the next `submit`. */
static struct io_uring_sqe *next_sqe(void)
{
    unsigned tail = *ring.sq_tail;
    unsigned at = tail & *ring.sq_mask;
    struct io_uring_sqe *sqe = (struct io_uring_sqe *)(ring.sqes + (size_t)at * SQE_BYTES);
    memset(sqe, 0, SQE_BYTES);
    ring.sq_array[at] = at;
    __atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);
    return sqe;
}

/* The command `op` of entry `index`, for the next `submit`. */
void command(int index, uint32_t op)
{
    struct io_uring_sqe *sqe = next_sqe();
    struct entry *e = &ring.entries[index];
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = ring.dev;
    sqe->cmd_op = op;
    sqe->user_data = (uint64_t)index;
    if (op == CMD_REGISTER) {
        sqe->addr = (uint64_t)(uintptr_t)e->iov;
        sqe->len = 2;
    }
    /* struct fuse_uring_cmd_req: flags, commit_id, qid */
    uint64_t commit_id = op == CMD_COMMIT_AND_FETCH ? e->commit_id : 0;
    memcpy((unsigned char *)sqe + CMD_AT + 8, &commit_id, sizeof commit_id);
    memcpy((unsigned char *)sqe + CMD_AT + 16, &e->qid, sizeof e->qid);
}

/* Entry `e`'s request laid out as read() of /dev/fuse gives it: its size, or
 * 0 if it cannot be (the entry then answers EIO at once). */
static ssize_t take_request(int index, void *buf, size_t len)
{
    struct entry *e = &ring.entries[index];
    uint32_t total, payload;
    memcpy(&total, e->header, sizeof total);
    memcpy(&payload, e->header + PAYLOAD_SIZE_AT, sizeof payload);
    memcpy(&e->commit_id, e->header + COMMIT_ID_AT, sizeof e->commit_id);
    memcpy(&e->unique, e->header + 8, sizeof e->unique);
    size_t op = total >= IN_HEADER_BYTES + payload ? total - IN_HEADER_BYTES - payload : SIZE_MAX;
    if (payload > ring.payload || op > OP_IN_BYTES || total > len) {
        int32_t error = -EIO;
        memcpy(e->header + 4, &error, sizeof error);
        memset(e->header + PAYLOAD_SIZE_AT, 0, sizeof payload);
        e->unique = 0;
        command(index, CMD_COMMIT_AND_FETCH);
        ring.unsubmitted++;
        ring_flush();
        return 0;
    }
    unsigned char *out = buf;
    memcpy(out, e->header, IN_HEADER_BYTES);
    memcpy(out + IN_HEADER_BYTES, e->header + OP_IN_AT, op);
    memcpy(out + IN_HEADER_BYTES + op, e->payload, payload);
    return (ssize_t)total;
}

/* The next request from the ring into `buf` (its size), 0 if none waits, or -1
 * with ENODEV once the connection ended. One completion at a time: those left
 * keep the ring, and so the session's epoll set, readable for the next read. */
ssize_t ring_next(void *buf, size_t len)
{
    if (ring.fd < 0 || ring.entries == NULL)
        return 0;
    unsigned head = *ring.cq_head;
    unsigned tail = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
    while (head != tail) {
        struct io_uring_cqe *cqe = &ring.cqes[head & *ring.cq_mask];
        uint64_t index = cqe->user_data;
        int res = cqe->res;
        __atomic_store_n(ring.cq_head, ++head, __ATOMIC_RELEASE);
        if (index == LOOP_TAG)
            ring.watching = 0;
        if (index >= (uint64_t)ring.count)
            continue;
        if (res == 0) {
            ssize_t got = take_request((int)index, buf, len);
            if (got > 0)
                return got;
        } else if (res == -ENOTCONN || res == -ECANCELED || res == -ENODEV) {
            errno = ENODEV; /* unmounted or aborted: the session ends */
            return -1;
        } else if (!logfs_ring_errno) {
            logfs_ring_errno = -res; /* the entry is lost; the others go on */
        }
    }
    return 0;
}

/* An answer to a request taken from the ring, put into its entry and sent with
 * the fetch of the entry's next request: 1 (`*sent` the bytes, or -1 and
 * errno); 0 for any other message, which goes to /dev/fuse. */
int ring_reply(const struct iovec *iov, int count, ssize_t *sent)
{
    unsigned char head[OUT_HEADER_BYTES];
    size_t total = 0, at = 0;
    if (ring.entries == NULL)
        return 0;
    for (int i = 0; i < count; i++) {
        size_t take = iov[i].iov_len;
        if (at < OUT_HEADER_BYTES) {
            size_t part = take < OUT_HEADER_BYTES - at ? take : OUT_HEADER_BYTES - at;
            memcpy(head + at, iov[i].iov_base, part);
            at += part;
        }
        total += take;
    }
    uint64_t unique;
    if (total < OUT_HEADER_BYTES)
        return 0;
    memcpy(&unique, head + 8, sizeof unique);
    int index = -1;
    for (int i = 0; unique != 0 && i < ring.count; i++) {
        if (ring.entries[i].unique == unique) {
            index = i;
            break;
        }
    }
    if (index < 0)
        return 0;
    struct entry *e = &ring.entries[index];
    uint32_t body = (uint32_t)(total - OUT_HEADER_BYTES);
    if (body > ring.payload) { /* cannot be: libfuse answers within max_write */
        int32_t error = -EIO;
        memcpy(head + 4, &error, sizeof error);
        body = 0;
    } else {
        size_t skip = OUT_HEADER_BYTES, to = 0;
        for (int i = 0; i < count; i++) {
            size_t from = skip < iov[i].iov_len ? skip : iov[i].iov_len;
            memcpy(e->payload + to, (unsigned char *)iov[i].iov_base + from, iov[i].iov_len - from);
            to += iov[i].iov_len - from;
            skip -= from;
        }
    }
    memcpy(e->header, head, OUT_HEADER_BYTES);
    memcpy(e->header + PAYLOAD_SIZE_AT, &body, sizeof body);
    e->unique = 0;
    command(index, CMD_COMMIT_AND_FETCH);
    ring.unsubmitted++;
    *sent = (ssize_t)total;
    return 1;
}

#define SPIN_MISSES 3 /* watches in a row that saw nothing: no more in this row */

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Submit what is queued, then watch the completion queue's tail, in memory
 * the kernel shares, for `logfs_ring_spin_ns`: 1 if a completion came. */
static int spin(void)
{
    unsigned count = ring.unsubmitted;
    if (count != 0 && submit(count) != (int)count)
        return 0; /* the wait submits them */
    ring.unsubmitted = 0;
    int64_t end = now_ns() + logfs_ring_spin_ns;
    for (unsigned i = 1;; i++) {
        if (*ring.cq_head != __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE))
            return 1;
        relax();
        if (i % 16 == 0 && now_ns() >= end)
            return 0;
    }
}

/* Submit what is queued and wait at most `ns` for the next request: 1 once one
 * is in the ring, 0 if none came or the loop has work (`loop_fd` readable,
 * watched by a poll in the ring), -1 without a ring to wait on. One system
 * call answers the last request and waits for the next. Before it sleeps, the
 * wait watches the ring for `logfs_ring_spin_ns` (`-o io_uring_spin_us`): a
 * writer's next line then finds the daemon awake, which spares both the
 * daemon's sleep and its wake-up. `*misses` counts the row's watches that saw
 * nothing since the last that did; after SPIN_MISSES of them the rest of the row
 * sleeps at once, so a writer slower than the watch costs the daemon three
 * watches a row. */
int ring_wait(int loop_fd, long ns, int *misses)
{
    if (ring.entries == NULL || logfs_ring_state != RING_ON)
        return -1;
    if (loop_fd >= 0 && !ring.watching) {
        struct io_uring_sqe *sqe = next_sqe();
        sqe->opcode = IORING_OP_POLL_ADD;
        sqe->fd = loop_fd;
        sqe->poll32_events = POLLIN;
        sqe->user_data = LOOP_TAG;
        ring.unsubmitted++;
        ring.watching = 1;
    }
    int watched = logfs_ring_spin_ns > 0 && *misses < SPIN_MISSES;
    if (watched && spin()) {
        *misses = 0;
    } else {
        *misses += watched;
        struct __kernel_timespec wait = {0, ns};
        struct io_uring_getevents_arg arg = {.ts = (uint64_t)(uintptr_t)&wait};
        unsigned count = ring.unsubmitted;
        ring.unsubmitted = 0;
        long done = syscall(__NR_io_uring_enter, ring.fd, count, 1,
                            IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg, sizeof arg);
        if (done < 0 && errno != ETIME && errno != EINTR) {
            ring.unsubmitted = count; /* nothing went: the next submit takes them */
            return 0;
        }
    }
    unsigned head = *ring.cq_head;
    if (head == __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE))
        return 0;
    if (ring.cqes[head & *ring.cq_mask].user_data != LOOP_TAG)
        return 1;
    __atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
    ring.watching = 0;
    return 0;
}

