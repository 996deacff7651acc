/*
 * What pyfuse3 3.5 and libfuse 3.14 cannot do (docs/mount.md, "Writers that write a
 * line at a time" and "FUSE over io_uring"): ask the kernel for
 * FUSE_HANDLE_KILLPRIV_V2 (and FUSE_CACHE_SYMLINKS) at mount time, let the file
 * system answer a request before pyfuse3 dispatches it (the one-line write() of
 * the default mode, `read_request` below), have the kernel keep a directory's
 * listing (_fuselisting.c), and take requests over io_uring (_fusering.c).
 *
 * Without it the kernel asks the file system for a file's security.capability
 * attribute before every write() that goes through its page cache (to drop
 * set-user-ID privileges): one FUSE round trip per write() in the buffered
 * mode, which is the round trip that mode exists to remove. With it the file
 * system clears those bits itself (logfs keeps none on files) and the kernel
 * stops asking once it has seen a file without them.
 *
 * The INIT reply also asks for FUSE_CACHE_SYMLINKS: the kernel keeps a symlink's
 * target with its inode, so a segment file opened again through `segments/`, or a
 * path through `time/<ms>` walked again, costs no READLINK round trip. A link whose
 * target changes is given another inode (mount/tree/directories.py, `resolve`).
 *
 * The mount's INIT reply turns FUSE_AUTO_INVAL_DATA off, which libfuse turns on: with
 * it the kernel asks for a file's attributes before every read() served from
 * its page cache (a round trip per read() of a `stream` the kernel holds, whose
 * attributes are never cached). Without it the kernel still drops what it
 * holds of a file when the size it is told changes, and at an open without
 * keep_cache (mount/tree/nodes.py, `Stream`).
 *
 * How: this library is loaded with RTLD_GLOBAL before pyfuse3 (mount/fuse/fuseinit.py),
 * so pyfuse3's calls of libfuse's fuse_session_mount() and fuse_session_unmount()
 * reach the functions below. The mount is libfuse's own, then the session gets a
 * custom I/O (fuse_session_custom_io, libfuse >= 3.14) whose writev() is the plain
 * system call, except that the reply to the kernel's INIT request (the first reply,
 * of a fixed size and shape) gets two flags more and one less (and, with
 * `-o io_uring`, the ring's). libfuse's functions
 * are those of the libfuse already loaded by pyfuse3 (found at run time), so
 * the library loads, and does nothing, in a process that never mounts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as Python asks; it defines _GNU_SOURCE (dlvsym) */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "_fuselisting.h"
#include "_fusering.h"

#define INIT_REPLY_BYTES 80 /* struct fuse_out_header (16) + struct fuse_init_out (64) */
#define ERROR_AT 4          /* fuse_out_header.error */
#define MAJOR_AT 16         /* fuse_init_out.major */
#define FLAGS_AT 28         /* fuse_init_out.flags */
#define FUSE_KERNEL_MAJOR 7
#define HANDLE_KILLPRIV_V2 (1u << 28)
#define AUTO_INVAL_DATA (1u << 12)
#define CACHE_SYMLINKS (1u << 23)

struct fuse_session;

/* libfuse 3.14's struct fuse_custom_io (fuse_lowlevel.h). */
struct custom_io {
    ssize_t (*writev)(int fd, struct iovec *iov, int count, void *userdata);
    ssize_t (*read)(int fd, void *buf, size_t len, void *userdata);
    void *splice_receive;
    void *splice_send;
};

/* Read by mount/fuse/fuseinit.py: 1 once the INIT reply carried the flag. */
int logfs_killpriv_v2_asked = 0;

/* The default mode's writes to append files (mount/fuse/fuseinit.py, `set_write_hook`,
 * and mount/fuse/_lines.pyx), taken before pyfuse3 dispatches them, with the GIL
 * that pyfuse3 holds while it receives a request. A WRITE request whose data is
 * exactly one line goes to `take(owner, fh, data, size, in_row)` (`in_row`: it came
 * right after a line taken, in `read_request`'s row), any other WRITE, and a line
 * `take` leaves, to `bulk(owner, fh, data, size)`, with the data where the request
 * holds it. Each
 * answers -1 (not taken: libfuse and pyfuse3 get the request as always), 0 (the
 * write is in the segment file) or an errno. A taken request is answered here;
 * after a line taken, `done(owner)` does the log's bookkeeping for it while the
 * writer runs (`bulk` keeps its books before its answer). libfuse is then told the
 * read was interrupted, which pyfuse3 answers by waiting for the next request.
 * All three are C functions of _lines.pyx (its `LineHooks`, handed over in a
 * capsule), which never raise. */
#define FUSE_WRITE_OPCODE 16
#define IN_HEADER_BYTES 40  /* struct fuse_in_header */
#define WRITE_IN_BYTES 40   /* struct fuse_write_in (protocol 7.9 and later) */
#define DATA_AT (IN_HEADER_BYTES + WRITE_IN_BYTES)
#define LINE_HOOKS "logfs.mount.fuse.line_hooks"

struct line_hooks {
    long (*take)(PyObject *owner, uint64_t fh, const unsigned char *data, Py_ssize_t size,
                 int in_row);
    void (*done)(PyObject *owner);
    long (*bulk)(PyObject *owner, uint64_t fh, const unsigned char *data, Py_ssize_t size);
};

static PyObject *hook_owner = NULL;
static struct line_hooks hooks;

/* A message to the kernel: into its ring entry if the request came through
 * the ring (_fusering.c), else written to /dev/fuse. An answer into the ring
 * goes out at once, or, `later`, with the wait for the next request. */
static ssize_t deliver(int fd, struct iovec *iov, int count, int later)
{
    ssize_t sent;
    if (ring_reply(iov, count, &sent))
        return later || ring_flush() == 0 ? sent : -1;
    return writev(ring_dev(fd), iov, count);
}

static ssize_t answer(int fd, uint64_t unique, int error, uint32_t size)
{
    uint32_t reply[6] = {error ? 16 : 24, (uint32_t)-error, 0, 0, size, 0};
    memcpy(&reply[2], &unique, sizeof unique);
    struct iovec whole = {reply, reply[0]};
    return deliver(fd, &whole, 1, 1);
}

/* A WRITE taken and answered (a line, or any other write to an append file): 1;
 * 0 for any other request. */
static int take_write(int fd, const unsigned char *request, ssize_t got, int in_row)
{
    if (hook_owner == NULL || got <= DATA_AT)
        return 0;
    uint32_t opcode, size;
    uint64_t unique, fh;
    memcpy(&opcode, request + 4, sizeof opcode);
    memcpy(&unique, request + 8, sizeof unique);
    memcpy(&fh, request + IN_HEADER_BYTES, sizeof fh);
    memcpy(&size, request + IN_HEADER_BYTES + 16, sizeof size);
    const unsigned char *data = request + DATA_AT;
    if (opcode != FUSE_WRITE_OPCODE || (ssize_t)size != got - DATA_AT)
        return 0;
    int line = data[size - 1] == '\n' && memchr(data, '\n', size - 1) == NULL;
    PyGILState_STATE gil = PyGILState_Ensure();
    long taken = line ? hooks.take(hook_owner, fh, data, size, in_row) : -1;
    if (taken < 0) { /* not a line, or one the line's path leaves to the general one */
        line = 0;
        taken = hooks.bulk(hook_owner, fh, data, size);
    }
    if (taken >= 0)
        answer(fd, unique, (int)taken, size);
    if (taken == 0 && line)
        hooks.done(hook_owner);
    PyGILState_Release(gil);
    return taken >= 0;
}

/* The message `iov` in one buffer of `size` bytes, if it is that long. */
static int gather(const struct iovec *iov, int count, unsigned char *into, size_t size)
{
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += iov[i].iov_len;
    if (total != size)
        return 0;
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        memcpy(into + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    return 1;
}

/* libfuse's read of the next request. WRITEs to append files are taken here
 * (`take_write`), and while they come one after the other the next request is
 * read here too: a writer of lines (or of a bulk append's large writes) then
 * costs the daemon a read, an append and an answer per write() instead of a
 * turn of pyfuse3's loop on trio. The wait for the next one
 * ends as soon as the loop has work (`loop_fd`, set by `set_loop_fd`: trio's
 * epoll set, readable when a socket, a signal or a thread's result is there
 * for the daemon's other tasks) and after NEXT_WAIT_NS otherwise. That wait is
 * longer than the kernel's tick: a timer that is the CPU's next event is
 * programmed into the (virtual) hardware at each wait, which cost a fifth of
 * the daemon's CPU per line (docs/benchmarks.md). Without `loop_fd`, the wait
 * is SHORT_WAIT_NS, so that the loop's sockets are not left waiting. Writes are
 * taken at most MAX_IN_A_ROW and ROW_NS in a row, so the loop's timers (the
 * flusher's) run late by no more than ROW_NS and a wait. Any other request goes
 * to libfuse as usual; when none is waiting, libfuse is told the read was
 * interrupted, which pyfuse3 answers by waiting for the next request. */
#define NEXT_WAIT_NS 10000000L
#define SHORT_WAIT_NS 50000L
#define ROW_NS 10000000L
#define MAX_IN_A_ROW 64

static int loop_fd = -1;

/* The wait's epoll set: /dev/fuse's `fd` and `loop_fd`, registered once (a
 * poll() registers and unregisters both at every wait); rebuilt by `set_loop_fd`
 * at each serve(), -1 until the first wait or if it could not be made. */
static int wait_set = -1;
static int wait_set_fd = -1;

static int watch(int set, int fd, uint32_t which)
{
    struct epoll_event event = {EPOLLIN, {.u32 = which}};
    return epoll_ctl(set, EPOLL_CTL_ADD, fd, &event);
}

static void drop_wait_set(void)
{
    if (wait_set >= 0)
        close(wait_set);
    wait_set = wait_set_fd = -1;
}

/* The wait set for /dev/fuse's `fd` (made at the first wait after `set_loop_fd`), or -1. */
static int wait_set_for(int fd)
{
    if (wait_set_fd == fd)
        return wait_set;
    drop_wait_set();
    wait_set = epoll_create1(EPOLL_CLOEXEC);
    if (wait_set >= 0 && watch(wait_set, fd, 0) == 0 && watch(wait_set, loop_fd, 1) == 0)
        wait_set_fd = fd;
    else
        drop_wait_set();
    return wait_set;
}

/* 1 once the next request is on /dev/fuse (and the loop has nothing waiting). */
static int wait_dev(int fd)
{
    int set = loop_fd >= 0 ? wait_set_for(fd) : -1;
    if (set >= 0) {
        struct epoll_event events[2];
        int got = epoll_wait(set, events, 2, NEXT_WAIT_NS / 1000000);
        return got == 1 && events[0].data.u32 == 0;
    }
    struct pollfd polled[2] = {{fd, POLLIN, 0}, {loop_fd, POLLIN, 0}};
    const struct timespec wait = {0, loop_fd >= 0 ? NEXT_WAIT_NS : SHORT_WAIT_NS};
    int got = ppoll(polled, loop_fd >= 0 ? 2 : 1, &wait, NULL);
    return got >= 1 && (polled[0].revents & POLLIN) && !polled[1].revents;
}

/* 1 once the next request is there (and the loop has nothing waiting): in the
 * ring, where the wait also sends the last answer (_fusering.c), else on /dev/fuse. */
static int next_request(int fd, int *misses)
{
    /* The GIL is free while waiting: the flusher's fsync threads run meanwhile. */
    PyThreadState *state = PyGILState_Check() ? PyEval_SaveThread() : NULL;
    int ready = ring_wait(loop_fd, loop_fd >= 0 ? NEXT_WAIT_NS : SHORT_WAIT_NS, misses);
    if (ready < 0)
        ready = wait_dev(fd);
    if (state != NULL)
        PyEval_RestoreThread(state);
    return ready;
}

/* The next request: from the ring if one waits there, else from /dev/fuse. */
static ssize_t next_message(int fd, void *buf, size_t len)
{
    ssize_t got = ring_next(buf, len);
    if (got == 0) {
        got = read(ring_dev(fd), buf, len);
        ring_saw_init(buf, got);
    }
    return got;
}

static ssize_t read_request(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    int64_t started = 0;
    int misses = 0; /* the ring's watches for the next line that saw nothing (_fusering_io.c) */
    for (int row = 0;; row++) {
        ssize_t got = next_message(fd, buf, len);
        if (got < 0 && (row > 0 || errno == EAGAIN) && errno != ENODEV)
            break; /* nothing to read after all: wait as usual */
        if (!take_write(fd, buf, got, row > 0)) {
            listing_saw_request(buf, got);
            return got;
        }
        if (row == 0)
            started = now_ns();
        if (row + 1 == MAX_IN_A_ROW || now_ns() - started >= ROW_NS || !next_request(fd, &misses))
            break;
    }
    ring_flush(); /* the last line's answer, if the ring holds it */
    errno = EINTR;
    return -1;
}

static ssize_t write_reply(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    unsigned char reply[INIT_REPLY_BYTES];
    if (listing_pending() && gather(iov, count, reply, LISTING_REPLY_BYTES)
        && listing_reply(reply)) { /* an OPENDIR's answer, with the listing's flags */
        struct iovec whole = {reply, LISTING_REPLY_BYTES};
        return deliver(fd, &whole, 1, 0);
    }
    if (!logfs_killpriv_v2_asked) {
        if (gather(iov, count, reply, INIT_REPLY_BYTES)) {
            int32_t error;
            uint32_t major, flags;
            memcpy(&error, reply + ERROR_AT, sizeof error);
            memcpy(&major, reply + MAJOR_AT, sizeof major);
            if (error == 0 && major == FUSE_KERNEL_MAJOR) {
                memcpy(&flags, reply + FLAGS_AT, sizeof flags);
                flags |= HANDLE_KILLPRIV_V2 | CACHE_SYMLINKS;
                flags &= ~AUTO_INVAL_DATA;
                memcpy(reply + FLAGS_AT, &flags, sizeof flags);
                int ring_asked = ring_init_reply(reply);
                logfs_killpriv_v2_asked = 1;
                struct iovec whole = {reply, INIT_REPLY_BYTES};
                ssize_t sent = writev(ring_dev(fd), &whole, 1);
                if (sent == INIT_REPLY_BYTES && ring_asked)
                    ring_start(reply);
                return sent;
            }
        }
    }
    return deliver(fd, iov, count, 0);
}

typedef int (*mount_fn)(struct fuse_session *, const char *);
typedef int (*fd_fn)(struct fuse_session *);
typedef int (*custom_io_fn)(struct fuse_session *, const struct custom_io *, int);
typedef void (*unmount_fn)(struct fuse_session *);

static void *libfuse = NULL;
static custom_io_fn custom_io = NULL;
static const struct custom_io io = {write_reply, read_request, NULL, NULL};

/* The libfuse 3 that pyfuse3 loaded: the system's, or the copy a pyfuse3 wheel carries
 * under another name (pyfuse3.libs/libfuse3-<hash>.so.*). Never loads one itself. */
static int find_libfuse(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *name = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(name, "libfuse3", strlen("libfuse3")) != 0)
        return 0;
    *(void **)found = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
    return *(void **)found != NULL;
}

int fuse_session_mount(struct fuse_session *se, const char *mountpoint)
{
    void *lib = NULL;
    dl_iterate_phdr(find_libfuse, &lib);
    libfuse = lib;
    mount_fn real_mount = lib ? (mount_fn)dlvsym(lib, "fuse_session_mount", "FUSE_3.0") : NULL;
    if (real_mount == NULL) {
        errno = ENOSYS;
        return -1;
    }
    fd_fn session_fd = (fd_fn)dlvsym(lib, "fuse_session_fd", "FUSE_3.0");
    custom_io = (custom_io_fn)dlvsym(lib, "fuse_session_custom_io", "FUSE_3.0");
    int res = real_mount(se, mountpoint);
    if (res != 0 || session_fd == NULL || custom_io == NULL)
        return res; /* mounted as pyfuse3 would have; the kernel keeps asking */
    custom_io(se, &io, ring_session_fd(session_fd(se)));
    return 0;
}

/* libfuse's unmount, on /dev/fuse again, then what the ring held (_fusering.c) let go. */
void fuse_session_unmount(struct fuse_session *se)
{
    unmount_fn real_unmount =
        libfuse ? (unmount_fn)dlvsym(libfuse, "fuse_session_unmount", "FUSE_3.0") : NULL;
    if (real_unmount == NULL) /* whichever libfuse comes after this library */
        real_unmount = (unmount_fn)dlsym(RTLD_NEXT, "fuse_session_unmount");
    int dev = ring_hand_back();
    if (dev >= 0)
        custom_io(se, &io, dev);
    if (real_unmount != NULL)
        real_unmount(se);
    ring_close();
}

static PyObject *set_write_hook(PyObject *self, PyObject *const *args, Py_ssize_t count)
{
    (void)self;
    if (count != 2 || (args[0] == Py_None) != (args[1] == Py_None)
        || (args[1] != Py_None && !PyCapsule_IsValid(args[1], LINE_HOOKS))) {
        PyErr_SetString(PyExc_TypeError,
                        "set_write_hook(owner, hooks): LineWrites and its hooks, or None twice");
        return NULL;
    }
    Py_CLEAR(hook_owner);
    if (args[0] != Py_None) {
        memcpy(&hooks, PyCapsule_GetPointer(args[1], LINE_HOOKS), sizeof hooks);
        hook_owner = Py_NewRef(args[0]);
    }
    Py_RETURN_NONE;
}

static PyObject *set_loop_fd(PyObject *self, PyObject *arg)
{
    (void)self;
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    loop_fd = fd < 0 ? -1 : (int)fd;
    drop_wait_set();
    Py_RETURN_NONE;
}

static PyObject *keep_listing(PyObject *self, PyObject *const *args, Py_ssize_t count)
{
    (void)self;
    unsigned long long fh = count == 2 ? PyLong_AsUnsignedLongLong(args[0]) : 0;
    int keep = count == 2 ? PyObject_IsTrue(args[1]) : -1;
    if (PyErr_Occurred() || keep < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "keep_listing(fh, keep)");
        return NULL;
    }
    listing_keep(fh, keep);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"keep_listing", (PyCFunction)(void (*)(void))keep_listing, METH_FASTCALL,
     "keep_listing(fh, keep): the kernel keeps the listing read through open directory fh, "
     "answering from the one it kept if keep (mount/fuse/listings.py)"},
    {"set_loop_fd", set_loop_fd, METH_O,
     "set_loop_fd(fd): the descriptor readable when the daemon's loop has work (-1: none)"},
    {"set_write_hook", (PyCFunction)(void (*)(void))set_write_hook, METH_FASTCALL,
     "set_write_hook(owner, hooks): owner's take of WRITEs to append files and its books "
     "after a line (mount/fuse/_lines.pyx, LineWrites.hooks); None twice: none"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_fuseinit", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__fuseinit(void)
{
    return PyModule_Create(&module);
}
