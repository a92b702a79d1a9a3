/* Atomic file replacement: write a temp file beside the target, fsync it, rename it over the target,
 * fsync the folder. A crash at any point leaves either the old file or the new one, never a mix,
 * and a failure removes the temp file. Nothing is written outside the target's folder: the temp file
 * is created fresh (never through a symlink) and rename replaces a symlink at the target itself
 * rather than the file it points to. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomic_write.h"

#include "core/free_all.h"

static sc_status write_all(int fd, const void *data, size_t size, const char *tmp) {
    const char *p = data;
    while (size) {
        ssize_t n = write(fd, p, size > (1u << 30) ? (1u << 30) : size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return sc_errorf("%s: write failed: %s", tmp, strerror(errno));
        }
        p += n;
        size -= (size_t)n;
    }
    return SC_OK;
}

static void fsync_parent(const char *path) {
    char *copy = strdup(path);
    if (!copy) return;
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(copy);
}

/* The writer buffers small writes (protobuf fields, tags) and passes large ones straight through. */
#define ATOMIC_BUF (1u << 20)

sc_status sc_atomic_open(sc_atomic_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    size_t len = strlen(path) + 32;
    f->path = strdup(path);
    f->tmp = malloc(len);
    f->buf = malloc(ATOMIC_BUF);
    if (!f->path || !f->tmp || !f->buf) {
        sc_atomic_abort(f);
        return sc_errorf("%s: out of memory", path);
    }
    snprintf(f->tmp, len, "%s.tmp.%ld", path, (long)getpid());
    /* A fresh file only: O_EXCL never follows a symlink planted at the temp name (which would make us
     * write outside the target's folder); a stale temp from a crashed run with our pid is removed. */
    unlink(f->tmp);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        sc_status st = sc_errorf("%s: cannot create temp file %s: %s", path, f->tmp, strerror(errno));
        sc_atomic_abort(f);
        return st;
    }
    return SC_OK;
}

static void atomic_flush(sc_atomic_file *f) {
    if (!f->err && f->n_buf) f->err = write_all(f->fd, f->buf, f->n_buf, f->tmp);
    f->n_buf = 0;
}

void sc_atomic_write(sc_atomic_file *f, const void *data, size_t size) {
    if (f->err || !size) return;
    f->written += size;
    if (f->n_buf + size <= ATOMIC_BUF) {
        memcpy(f->buf + f->n_buf, data, size);
        f->n_buf += size;
        return;
    }
    atomic_flush(f);
    if (size < ATOMIC_BUF) {
        memcpy(f->buf, data, size);
        f->n_buf = size;
    } else if (!f->err) {
        f->err = write_all(f->fd, data, size, f->tmp);
    }
}

sc_status sc_atomic_commit(sc_atomic_file *f) {
    atomic_flush(f);
    sc_status st = f->err;
    f->err = NULL;
    if (!st && fsync(f->fd) != 0) st = sc_errorf("%s: fsync failed: %s", f->tmp, strerror(errno));
    if (close(f->fd) != 0 && !st) st = sc_errorf("%s: close failed: %s", f->tmp, strerror(errno));
    f->fd = -1;
    if (!st && rename(f->tmp, f->path) != 0)
        st = sc_errorf("%s: cannot rename %s into place: %s", f->path, f->tmp, strerror(errno));
    if (!st) fsync_parent(f->path);
    else unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
    sc_atomic_abort(f);
    return st;
}

void sc_atomic_abort(sc_atomic_file *f) {
    if (f->fd >= 0) close(f->fd);
    if (f->tmp && f->fd >= 0) unlink(f->tmp);
    f->fd = -1;
    sc_status_free(f->err);
    SC_FREE_ALL(f->buf, f->tmp, f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

sc_status sc_write_file_atomic(const char *path, const void *data, size_t size) {
    sc_atomic_file f;
    SC_TRY(sc_atomic_open(&f, path));
    sc_atomic_write(&f, data, size);
    return sc_atomic_commit(&f);
}
