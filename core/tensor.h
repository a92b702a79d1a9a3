/* Tensor descriptors and views (docs/STYLE.md habit 3): a descriptor (dtype, rank, dims in ONNX order,
 * outermost first) is separate from its storage. All tensors are dense and row-major. */
#ifndef SC_TENSOR_H
#define SC_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Numbering is ONNX's TensorProto.DataType, so import needs no translation table. */
typedef enum {
    SC_DTYPE_UNDEFINED = 0,
    SC_F32 = 1,
    SC_U8 = 2,
    SC_I8 = 3,
    SC_U16 = 4,
    SC_I16 = 5,
    SC_I32 = 6,
    SC_I64 = 7,
    SC_STRING = 8,
    SC_BOOL = 9, /* stored as one byte, 0 or 1 */
    SC_F16 = 10,
    SC_F64 = 11,
    SC_U32 = 12,
    SC_U64 = 13,
    SC_BF16 = 16,
    SC_DTYPE_MAX = 17
} sc_dtype;

/* Bytes per element; 0 for undefined, string and unknown codes. */
size_t sc_dtype_size(sc_dtype t);
const char *sc_dtype_name(sc_dtype t);
bool sc_dtype_is_float(sc_dtype t);
/* A 16-bit float: bf16 or f16 (core/half.h converts them). */
bool sc_dtype_is_half(sc_dtype t);

#define SC_MAX_RANK 8

/* A dim < 0 is not known yet (symbolic until bound at load). */
typedef struct {
    sc_dtype dtype;
    int rank;
    int64_t dims[SC_MAX_RANK];
} sc_desc;

/* Elements; -1 if a dim is unknown or the product overflows int64. Rank 0 has one element. */
int64_t sc_desc_numel(const sc_desc *d);
/* Bytes; -1 as above. */
int64_t sc_desc_bytes(const sc_desc *d);
bool sc_desc_is_static(const sc_desc *d);
bool sc_desc_same_shape(const sc_desc *a, const sc_desc *b);
/* "f32[1,3,224,224]" into buf; returns buf. */
char *sc_desc_str(const sc_desc *d, char *buf, size_t size);
sc_desc sc_desc_make(sc_dtype t, int rank, const int64_t *dims);

/* A view of dense storage. data is NULL for an omitted optional input. */
typedef struct {
    sc_desc desc;
    void *data;
} sc_tensor;

/* Frees t->data (malloc'd: outputs handed out by the executors) and clears it. */
void sc_tensor_free_data(sc_tensor *t);

/* Whether every element of host data of descriptor d is finite (no Inf, no NaN); integer and bool
 * data always are. The per-step check of the training state (train/train_nan.c) and the CPU
 * backend's all_finite (backends/backend.h) use it. */
bool sc_data_all_finite(const sc_desc *d, const void *data);

#endif
