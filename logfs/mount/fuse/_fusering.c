/*
 * FUSE over io_uring (Linux 6.14 and later) for the mount's request loop
 * (_fuseinit.c), asked for with `-o io_uring` (docs/mount.md).
 *
 * The kernel then hands requests over ring entries instead of read() on
 * /dev/fuse: each entry is a header buffer (the request's fuse_in_header,
 * its operation's header, the entry's own fields) and a payload buffer,
 * registered once with an IORING_OP_URING_CMD on /dev/fuse. An answer goes
 * back into the same buffers, and one FUSE_IO_URING_CMD_COMMIT_AND_FETCH both
 * delivers it and offers the entry for the next request. The kernel keeps a
 * queue per possible CPU and sends a request to the queue of the CPU its
 * writer runs on, so every queue gets entries; it uses the ring once all
 * have them.
 *
 * libfuse 3.14 and pyfuse3 know nothing of it: they go on reading and
 * writing messages as on /dev/fuse, through the session's custom I/O
 * (_fuseinit.c). A request taken from an entry is laid out as read() would
 * give it, and an answer whose unique is an entry's request goes into that
 * entry; everything else (the INIT, FORGETs, interrupts, notifications)
 * still goes over /dev/fuse, as the kernel wants. pyfuse3 waits for its
 * session's descriptor, which is then an epoll set holding /dev/fuse and
 * the ring (readable while a completion waits).
 *
 * Everything here runs on the thread that serves the mount (the GIL holder),
 * except an answer to a notification, which never touches the ring. Where
 * the kernel does not offer it (the fuse module's enable_uring off), the
 * mount works over /dev/fuse as without the option, and says so.
 */
#define _GNU_SOURCE
#include "_fusering_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int logfs_ring_state = RING_OFF;
int logfs_ring_errno = 0;
long logfs_ring_spin_ns = 0;

struct ring ring = {.dev = -1, .session = -1, .fd = -1};

/* At mount, with /dev/fuse's `dev`: the descriptor libfuse is to use. */
int ring_session_fd(int dev)
{
    if (logfs_ring_state != RING_ASKED)
        return dev;
    int session = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {EPOLLIN, {.fd = dev}};
    int flags = fcntl(dev, F_GETFL);
    if (session < 0 || epoll_ctl(session, EPOLL_CTL_ADD, dev, &event) != 0 || flags < 0
        || fcntl(dev, F_SETFL, flags | O_NONBLOCK) != 0) {
        logfs_ring_errno = errno;
        logfs_ring_state = RING_FAILED;
        if (session >= 0)
            close(session);
        return dev;
    }
    ring.dev = dev;
    ring.session = session;
    return session;
}

/* /dev/fuse behind the descriptor libfuse hands the custom I/O. */
int ring_dev(int fd)
{
    return ring.session >= 0 && fd == ring.session ? ring.dev : fd;
}

void ring_saw_init(const unsigned char *request, ssize_t size)
{
    uint32_t opcode, flags, flags2 = 0;
    if (logfs_ring_state != RING_ASKED || size < INIT_IN_FLAGS2_AT + 4)
        return;
    memcpy(&opcode, request + 4, sizeof opcode);
    if (opcode != FUSE_INIT_OPCODE)
        return;
    memcpy(&flags, request + INIT_IN_FLAGS_AT, sizeof flags);
    if (flags & INIT_EXT)
        memcpy(&flags2, request + INIT_IN_FLAGS2_AT, sizeof flags2);
    ring.offered = (flags2 & OVER_IO_URING) != 0;
}

/* The INIT reply asks for the ring if the kernel offered it: 1 if it does. */
int ring_init_reply(unsigned char *reply)
{
    if (logfs_ring_state != RING_ASKED || ring.session < 0)
        return 0;
    if (!ring.offered) {
        logfs_ring_state = RING_NOT_OFFERED;
        return 0;
    }
    uint32_t flags, flags2 = 0;
    memcpy(&flags, reply + INIT_OUT_FLAGS_AT, sizeof flags);
    if (flags & INIT_EXT)
        memcpy(&flags2, reply + INIT_OUT_FLAGS2_AT, sizeof flags2);
    flags |= INIT_EXT;
    flags2 |= OVER_IO_URING;
    memcpy(reply + INIT_OUT_FLAGS_AT, &flags, sizeof flags);
    memcpy(reply + INIT_OUT_FLAGS2_AT, &flags2, sizeof flags2);
    return 1;
}

/* The kernel's number of possible CPUs (its queues), from the sysfs list "0-3,6". */
static int possible_cpus(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
    int count = 0, first, last;
    char sep;
    if (f == NULL)
        return -1;
    while (fscanf(f, "%d", &first) == 1) {
        last = first;
        sep = 0;
        if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%d%c", &last, &sep) < 1)
            break;
        count += last - first + 1;
        if (sep != ',')
            break;
    }
    fclose(f);
    return count;
}

static int map_ring(unsigned entries)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SQE128;
    ring.fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (ring.fd < 0)
        return -1;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP)) {
        errno = ENOSYS;
        return -1;
    }
    size_t sq = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    ring.map_size = sq > cq ? sq : cq;
    ring.map = mmap(NULL, ring.map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                    ring.fd, IORING_OFF_SQ_RING);
    if (ring.map == MAP_FAILED) {
        ring.map = NULL;
        return -1;
    }
    ring.sqes_size = (size_t)p.sq_entries * SQE_BYTES;
    ring.sqes = mmap(NULL, ring.sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                     ring.fd, IORING_OFF_SQES);
    if (ring.sqes == MAP_FAILED) {
        ring.sqes = NULL;
        return -1;
    }
    char *base = ring.map;
    ring.sq_head = (unsigned *)(base + p.sq_off.head);
    ring.sq_tail = (unsigned *)(base + p.sq_off.tail);
    ring.sq_mask = (unsigned *)(base + p.sq_off.ring_mask);
    ring.sq_array = (unsigned *)(base + p.sq_off.array);
    ring.sq_entries = p.sq_entries;
    ring.cq_head = (unsigned *)(base + p.cq_off.head);
    ring.cq_tail = (unsigned *)(base + p.cq_off.tail);
    ring.cq_mask = (unsigned *)(base + p.cq_off.ring_mask);
    ring.cqes = (struct io_uring_cqe *)(base + p.cq_off.cqes);
    return 0;
}

static int make_entries(int queues)
{
    ring.count = queues * DEPTH;
    ring.entries = calloc((size_t)ring.count, sizeof *ring.entries);
    if (ring.entries == NULL)
        return -1;
    for (int i = 0; i < ring.count; i++) {
        struct entry *e = &ring.entries[i];
        /* Pages the kernel pins: mapped, not from the heap; touched when used. */
        e->header = mmap(NULL, HEADER_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        e->payload = mmap(NULL, ring.payload, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (e->header == MAP_FAILED || e->payload == MAP_FAILED) {
            e->header = e->header == MAP_FAILED ? NULL : e->header;
            e->payload = e->payload == MAP_FAILED ? NULL : e->payload;
            return -1;
        }
        e->iov[0] = (struct iovec){e->header, HEADER_BYTES};
        e->iov[1] = (struct iovec){e->payload, ring.payload};
        e->qid = (uint16_t)(i / DEPTH);
    }
    return 0;
}

/* After the INIT reply that asked for the ring went out (`reply`): its entries
 * registered, every queue's at once, so that the kernel starts using it. */
void ring_start(const unsigned char *reply)
{
    uint32_t max_write;
    uint16_t max_pages;
    memcpy(&max_write, reply + INIT_OUT_MAX_WRITE_AT, sizeof max_write);
    memcpy(&max_pages, reply + INIT_OUT_MAX_PAGES_AT, sizeof max_pages);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    ring.payload = MIN_PAYLOAD;
    if (max_write > ring.payload)
        ring.payload = max_write;
    if ((size_t)max_pages * page > ring.payload)
        ring.payload = (size_t)max_pages * page;
    int queues = possible_cpus();
    unsigned entries = 1; /* room for every entry's command twice, and the loop's poll */
    while (queues > 0 && entries < (unsigned)(2 * queues * DEPTH))
        entries <<= 1;
    struct epoll_event event = {EPOLLIN, {.fd = -1}};
    if (queues < 1 || map_ring(entries) != 0 || make_entries(queues) != 0)
        goto failed;
    event.data.fd = ring.fd;
    if (epoll_ctl(ring.session, EPOLL_CTL_ADD, ring.fd, &event) != 0)
        goto failed;
    for (int i = 0; i < ring.count; i++)
        command(i, CMD_REGISTER);
    if (submit((unsigned)ring.count) != ring.count)
        goto failed;
    /* A refused registration completes at once: the kernel then stays on /dev/fuse. */
    unsigned head = *ring.cq_head;
    unsigned tail = __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE);
    for (; head != tail; head++) {
        if (ring.cqes[head & *ring.cq_mask].res < 0) {
            errno = -ring.cqes[head & *ring.cq_mask].res;
            goto failed;
        }
    }
    logfs_ring_state = RING_ON;
    return;
failed:
    logfs_ring_errno = errno ? errno : EIO;
    logfs_ring_state = RING_FAILED;
    /* Entries that did register still get requests: completions are still read. */
}

/* At unmount: /dev/fuse, to be libfuse's descriptor again (it checks whether the
 * connection is gone, then closes it), or -1 if it always was. */
int ring_hand_back(void)
{
    int dev = ring.session >= 0 ? ring.dev : -1;
    ring.dev = -1;
    return dev;
}

/* After the unmount: the ring, its buffers and the session's epoll set closed. */
void ring_close(void)
{
    if (ring.fd >= 0)
        close(ring.fd);
    if (ring.map != NULL)
        munmap(ring.map, ring.map_size);
    if (ring.sqes != NULL)
        munmap(ring.sqes, ring.sqes_size);
    for (int i = 0; ring.entries != NULL && i < ring.count; i++) {
        if (ring.entries[i].header != NULL)
            munmap(ring.entries[i].header, HEADER_BYTES);
        if (ring.entries[i].payload != NULL)
            munmap(ring.entries[i].payload, ring.payload);
    }
    free(ring.entries);
    if (ring.session >= 0)
        close(ring.session);
    if (ring.session >= 0 && ring.dev >= 0)
        close(ring.dev); /* not handed back */
    int state = logfs_ring_state;
    memset(&ring, 0, sizeof ring);
    ring.dev = ring.session = ring.fd = -1;
    logfs_ring_state = state == RING_OFF ? RING_OFF : RING_ASKED;
}
