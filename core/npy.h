/* NumPy .npy files (format versions 1.0, 2.0 and 3.0; numpy/lib/format.py), for feeding inputs
 * to and saving outputs from scorch-run.
 *
 * Reading accepts little-endian (or byte-order-free one-byte) numeric dtypes that map to sc_dtype:
 * f2 f4 f8, i1 i2 i4 i8, u1 u2 u4 u8, b1 (values must be 0 or 1), C order only. Big-endian data,
 * fortran_order True, object/string/structured dtypes, a rank over SC_MAX_RANK and a data size that
 * disagrees with the shape are errors naming the file. Writing produces version 1.0 (2.0 when the
 * header needs it) with the header padded to a multiple of 64 bytes, as numpy does, and replaces the
 * file atomically (sc_write_file_atomic).
 */
#ifndef SC_NPY_H
#define SC_NPY_H

#include <stddef.h>

#include "core/status.h"
#include "core/tensor.h"

/* On success t->data is malloc'd (64-byte aligned; free with free). On failure t is zeroed. */
sc_status sc_npy_read(const char *path, sc_tensor *t);
/* The same on bytes in memory; name is used in error messages. */
sc_status sc_npy_decode(const void *data, size_t size, const char *name, sc_tensor *t);
/* Encodes header + data into a malloc'd buffer. */
sc_status sc_npy_encode(const sc_tensor *t, void **out, size_t *out_size);
sc_status sc_npy_write(const char *path, const sc_tensor *t);
/* numpy's descr ("<f4") for a dtype, NULL when .npy cannot hold it (string, bf16). */
const char *sc_npy_descr(sc_dtype t);

#endif
