/*
 * Two things pyfuse3 3.5 and libfuse 3.14 cannot do (docs/mount.md, "Writers that
 * write a line at a time"): ask the kernel for FUSE_HANDLE_KILLPRIV_V2 at mount
 * time, and let the file system answer a request before pyfuse3 dispatches it
 * (the one-line write() of the default mode, `read_request` below).
 *
 * Without it the kernel asks the file system for a file's security.capability
 * attribute before every write() that goes through its page cache (to drop
 * set-user-ID privileges): one FUSE round trip per write() in the buffered
 * mode, which is the round trip that mode exists to remove. With it the file
 * system clears those bits itself (logfs keeps none on files) and the kernel
 * stops asking once it has seen a file without them.
 *
 * How: this library is loaded with RTLD_GLOBAL before pyfuse3 (mount/fuseinit.py),
 * so pyfuse3's call of libfuse's fuse_session_mount() reaches the function below.
 * It mounts with libfuse's own function, then hands the session a custom I/O
 * (fuse_session_custom_io, libfuse >= 3.14) whose writev() is the plain system
 * call, except that the reply to the kernel's INIT request (the first reply, of
 * a fixed size and shape) gets one more flag set. libfuse's functions are those
 * of the libfuse already loaded by pyfuse3 (found at run time), so the library
 * loads, and does nothing, in a process that never mounts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as Python asks; it defines _GNU_SOURCE (dlvsym) */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define INIT_REPLY_BYTES 80 /* struct fuse_out_header (16) + struct fuse_init_out (64) */
#define ERROR_AT 4          /* fuse_out_header.error */
#define MAJOR_AT 16         /* fuse_init_out.major */
#define FLAGS_AT 28         /* fuse_init_out.flags */
#define FUSE_KERNEL_MAJOR 7
#define HANDLE_KILLPRIV_V2 (1u << 28)

struct fuse_session;

/* libfuse 3.14's struct fuse_custom_io (fuse_lowlevel.h). */
struct custom_io {
    ssize_t (*writev)(int fd, struct iovec *iov, int count, void *userdata);
    ssize_t (*read)(int fd, void *buf, size_t len, void *userdata);
    void *splice_receive;
    void *splice_send;
};

/* Read by mount/fuseinit.py: 1 once the INIT reply carried the flag. */
int logfs_killpriv_v2_asked = 0;

/* The one-line write() of the default mode (mount/fuseinit.py, `set_write_hook`):
 * a WRITE request whose data is exactly one line goes to the hook, with the GIL
 * that pyfuse3 holds while it receives a request. The hook answers -1 (not taken:
 * libfuse and pyfuse3 get the request as always), 0 (appended) or an errno; a taken
 * request is answered here, and libfuse is told the read was interrupted, which
 * pyfuse3 answers by waiting for the next request. */
#define FUSE_WRITE_OPCODE 16
#define IN_HEADER_BYTES 40  /* struct fuse_in_header */
#define WRITE_IN_BYTES 40   /* struct fuse_write_in (protocol 7.9 and later) */
#define DATA_AT (IN_HEADER_BYTES + WRITE_IN_BYTES)

static PyObject *write_hook = NULL;

static ssize_t answer(int fd, uint64_t unique, int error, uint32_t size)
{
    uint32_t reply[6] = {error ? 16 : 24, (uint32_t)-error, 0, 0, size, 0};
    memcpy(&reply[2], &unique, sizeof unique);
    struct iovec whole = {reply, reply[0]};
    return writev(fd, &whole, 1);
}

static long call_hook(uint64_t fh, const char *data, uint32_t size)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    long taken = -1;
    PyObject *result = PyObject_CallFunction(write_hook, "Ky#", (unsigned long long)fh, data,
                                             (Py_ssize_t)size);
    if (result != NULL) {
        taken = PyLong_AsLong(result);
        Py_DECREF(result);
    }
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(write_hook);
        taken = -1;
    }
    PyGILState_Release(gil);
    return taken;
}

static ssize_t read_request(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    ssize_t got = read(fd, buf, len);
    if (write_hook == NULL || got <= DATA_AT)
        return got;
    const unsigned char *request = buf;
    uint32_t opcode, size;
    uint64_t unique, fh;
    memcpy(&opcode, request + 4, sizeof opcode);
    memcpy(&unique, request + 8, sizeof unique);
    memcpy(&fh, request + IN_HEADER_BYTES, sizeof fh);
    memcpy(&size, request + IN_HEADER_BYTES + 16, sizeof size);
    const char *data = (const char *)request + DATA_AT;
    if (opcode != FUSE_WRITE_OPCODE || (ssize_t)size != got - DATA_AT || data[size - 1] != '\n'
        || memchr(data, '\n', size - 1) != NULL)
        return got;
    long taken = call_hook(fh, data, size);
    if (taken < 0)
        return got;
    answer(fd, unique, (int)taken, size);
    errno = EINTR;
    return -1;
}

static ssize_t write_reply(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    if (!logfs_killpriv_v2_asked) {
        unsigned char reply[INIT_REPLY_BYTES];
        size_t total = 0;
        for (int i = 0; i < count; i++)
            total += iov[i].iov_len;
        if (total == INIT_REPLY_BYTES) {
            size_t at = 0;
            for (int i = 0; i < count; i++) {
                memcpy(reply + at, iov[i].iov_base, iov[i].iov_len);
                at += iov[i].iov_len;
            }
            int32_t error;
            uint32_t major, flags;
            memcpy(&error, reply + ERROR_AT, sizeof error);
            memcpy(&major, reply + MAJOR_AT, sizeof major);
            if (error == 0 && major == FUSE_KERNEL_MAJOR) {
                memcpy(&flags, reply + FLAGS_AT, sizeof flags);
                flags |= HANDLE_KILLPRIV_V2;
                memcpy(reply + FLAGS_AT, &flags, sizeof flags);
                logfs_killpriv_v2_asked = 1;
                struct iovec whole = {reply, INIT_REPLY_BYTES};
                return writev(fd, &whole, 1);
            }
        }
    }
    return writev(fd, iov, count);
}

typedef int (*mount_fn)(struct fuse_session *, const char *);
typedef int (*fd_fn)(struct fuse_session *);
typedef int (*custom_io_fn)(struct fuse_session *, const struct custom_io *, int);

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
    mount_fn real_mount = lib ? (mount_fn)dlvsym(lib, "fuse_session_mount", "FUSE_3.0") : NULL;
    if (real_mount == NULL) {
        errno = ENOSYS;
        return -1;
    }
    fd_fn session_fd = (fd_fn)dlvsym(lib, "fuse_session_fd", "FUSE_3.0");
    custom_io_fn custom_io = (custom_io_fn)dlvsym(lib, "fuse_session_custom_io", "FUSE_3.0");
    int res = real_mount(se, mountpoint);
    if (res != 0 || session_fd == NULL || custom_io == NULL)
        return res; /* mounted as pyfuse3 would have; the kernel keeps asking */
    static const struct custom_io io = {write_reply, read_request, NULL, NULL};
    custom_io(se, &io, session_fd(se));
    return 0;
}

static PyObject *set_write_hook(PyObject *self, PyObject *hook)
{
    (void)self;
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "the write hook must be callable or None");
        return NULL;
    }
    Py_XDECREF(write_hook);
    write_hook = hook == Py_None ? NULL : hook;
    Py_XINCREF(write_hook);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_write_hook", set_write_hook, METH_O,
     "hook(fh, data) -> -1 (not taken), 0 (appended) or an errno, for one-line WRITEs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_fuseinit", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__fuseinit(void)
{
    return PyModule_Create(&module);
}
