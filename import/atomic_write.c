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

#include "import/onnx.h"

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

sc_status sc_write_file_atomic(const char *path, const void *data, size_t size) {
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp) return sc_errorf("%s: out of memory", path);
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    /* A fresh file only: O_EXCL never follows a symlink planted at the temp name (which would make us
     * write outside the target's folder); a stale temp from a crashed run with our pid is removed. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        sc_status st = sc_errorf("%s: cannot create temp file %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return st;
    }
    sc_status st = write_all(fd, data, size, tmp);
    if (!st && fsync(fd) != 0) st = sc_errorf("%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !st) st = sc_errorf("%s: close failed: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0) st = sc_errorf("%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (st)
        unlink(tmp);
    else
        fsync_parent(path);
    free(tmp);
    return st;
}
