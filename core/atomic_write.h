/* Atomic file replacement (core/atomic_write.c): a temp file beside the target, fsync, rename over
 * the target, fsync the folder; a crash leaves the old file or the new one, never a mix. */
#ifndef SC_ATOMIC_WRITE_H
#define SC_ATOMIC_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* Writes bytes to path atomically: a temp file in the same folder, fsync, then rename. */
sc_status sc_write_file_atomic(const char *path, const void *data, size_t size);

/* The same, streamed: open, write any number of times (the first failure is kept and later writes
 * do nothing), then commit (flush, fsync, rename; the kept failure, if any, is returned and the temp
 * file removed) or abort (the temp file removed). */
typedef struct {
    char *path, *tmp;
    int fd;
    uint8_t *buf;
    size_t n_buf;
    uint64_t written; /* bytes passed to sc_atomic_write */
    sc_status err;
} sc_atomic_file;
sc_status sc_atomic_open(sc_atomic_file *f, const char *path);
void sc_atomic_write(sc_atomic_file *f, const void *data, size_t size);
sc_status sc_atomic_commit(sc_atomic_file *f);
void sc_atomic_abort(sc_atomic_file *f);

#endif
