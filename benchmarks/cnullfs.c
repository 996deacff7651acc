/*
 * The floor of the FUSE transport: a do-nothing file system on libfuse's low-level
 * API, one thread (fuse_session_loop), compiled by the benchmark that mounts it
 * (benchmarks/mounts.py, build_cnullfs: gcc and libfuse3-dev's pkg-config).
 *
 * The root holds `sink`, which answers every write() with its size and keeps nothing
 * (as /dev/null), and `source`, SOURCE_BYTES of 100-byte lines. Both are opened with
 * direct_io and report st_blksize = 1 MiB, as logfs's `append` and `stream` are, so a
 * request costs what FUSE costs and nothing more.
 *
 * Given COPY_TO, `sink` answers a write() only once its bytes are appended to that
 * file (one write(), as logfs writes a request's records into its segment; EIO if
 * that fails): the floor of any file system that keeps what it is given, which is
 * the transport's plus a file's write and nothing of logfs's own. Writes of 64 KiB
 * or more reserve the blocks of themselves and four more like them (at most 8 MiB)
 * past the file's end first, with fallocate(FALLOC_FL_KEEP_SIZE), as logfs's
 * segments do (core/storage/books.pyx, `reserve_ahead`): the cheapest write into a
 * file this machine has.
 *
 *     cnullfs MOUNTPOINT [SOURCE_BYTES [COPY_TO]]     (foreground; SIGTERM unmounts)
 */
#define _GNU_SOURCE /* fallocate */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ROOT = 1, SINK = 2, SOURCE = 3, BLOCK = 1 << 20 };
static off_t source_bytes = 100 << 20;
static char line_block[BLOCK + 100];
static int copy_fd = -1; /* COPY_TO's, or -1 */
static off_t copy_size = 0, copy_reserved = 0; /* its end, and the blocks reserved to */
enum { RESERVE_FROM = 64 << 10, RESERVE_MAX = 8 << 20 };

/* As logfs's segments: a large write reserves itself and four like it past the end. */
static void reserve_ahead(size_t size)
{
    if (size < RESERVE_FROM || copy_size + (off_t)size <= copy_reserved)
        return;
    off_t start = copy_size > copy_reserved ? copy_size : copy_reserved;
    off_t end = copy_size + (off_t)size + (4 * size < RESERVE_MAX ? 4 * size : RESERVE_MAX);
    copy_reserved = end; /* tried: not again before the writes pass it */
    fallocate(copy_fd, FALLOC_FL_KEEP_SIZE, start, end - start);
}

static void attrs_of(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_blksize = BLOCK;
    st->st_nlink = ino == ROOT ? 2 : 1;
    st->st_mode = ino == ROOT ? S_IFDIR | 0755 : S_IFREG | 0644;
    st->st_size = ino == SOURCE ? source_bytes : 0;
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e = {0};
    if (parent != ROOT || (strcmp(name, "sink") != 0 && strcmp(name, "source") != 0)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    e.ino = strcmp(name, "sink") == 0 ? SINK : SOURCE;
    attrs_of(e.ino, &e.attr);
    fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    attrs_of(ino, &st);
    fuse_reply_attr(req, &st, 0);
}

static void null_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int set,
                         struct fuse_file_info *fi)
{
    (void)attr, (void)set;
    null_getattr(req, ino, fi);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    (void)fi;
    if (ino != SOURCE || off >= source_bytes) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if (size > BLOCK)
        size = BLOCK;
    if ((off_t)size > source_bytes - off)
        size = source_bytes - off;
    fuse_reply_buf(req, line_block + off % 100, size);
}

static void null_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
                       off_t off, struct fuse_file_info *fi)
{
    (void)ino, (void)off, (void)fi;
    if (copy_fd >= 0)
        reserve_ahead(size);
    for (size_t done = 0; copy_fd >= 0 && done < size;) {
        ssize_t n = write(copy_fd, buf + done, size - done);
        if (n < 0 && errno != EINTR) {
            fuse_reply_err(req, EIO);
            return;
        }
        done += n > 0 ? (size_t)n : 0;
    }
    copy_size += copy_fd >= 0 ? (off_t)size : 0;
    fuse_reply_write(req, size);
}

static void null_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino, (void)fi;
    fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = null_lookup,
    .getattr = null_getattr,
    .setattr = null_setattr,
    .open = null_open,
    .read = null_read,
    .write = null_write,
    .flush = null_ok,
    .release = null_ok,
};

int main(int argc, char *argv[])
{
    if (argc < 2) {
        fputs("usage: cnullfs MOUNTPOINT [SOURCE_BYTES [COPY_TO]]\n", stderr);
        return 2;
    }
    if (argc > 2)
        source_bytes = strtoll(argv[2], NULL, 10);
    if (argc > 3 && (copy_fd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0) {
        perror(argv[3]);
        return 1;
    }
    if (copy_fd >= 0)
        copy_size = lseek(copy_fd, 0, SEEK_END);
    for (size_t i = 0; i < sizeof line_block; i++)
        line_block[i] = i % 100 == 99 ? '\n' : 'x';
    char *fuse_argv[] = {argv[0], "-o", "fsname=cnullfs,subtype=cnullfs", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (se == NULL || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0)
        return 1;
    int res = fuse_session_loop(se);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return res ? 1 : 0;
}
