/* numpy-style broadcasting for element-wise CPU kernels (ONNX "multidirectional broadcasting").
 *
 * cpu_bcast_init maps each input onto the output's dims (right-aligned; a size-1 or missing input
 * dim gets stride 0), drops output dims of size 1 and merges adjacent dims that are contiguous in
 * every input. After that the hot cases become short loops: same shape -> one row of numel,
 * scalar -> stride 0, bias [1,C,1,1] on [N,C,H,W] -> [N,C,H*W] with strides (0,1,0), [C] on
 * [B,T,C] -> [B*T,C] with strides (0,1).
 *
 * cpu_bcast_run calls a row function for each run of the innermost merged dim. Every input's
 * innermost stride is 0 (broadcast) or 1 (contiguous), so row functions specialise on those two
 * cases and vectorise. Large outputs are split across OpenMP threads by flat output range.
 */
#ifndef SC_CPU_BROADCAST_H
#define SC_CPU_BROADCAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

/* Below this many elements a kernel runs on one thread: spawning threads costs more. */
#define CPU_PAR_MIN 32768

/* for (int64_t I = 0; I < N; I++) { body } as a vector loop, split across threads from CPU_PAR_MIN
 * iterations on. Below that it runs inline under `omp simd`: an `omp parallel for simd if (0)` region
 * still runs the loop in an outlined function, where gcc 12 left it scalar (Sigmoid on 16k floats took
 * 34 us instead of 3.6, Clip 4.3 instead of 0.8, and ReLU6 28 us per MobileNet call).
 * Threads take blocks of CPU_SIMD_BLOCK iterations, a vector loop each: the vector body and the
 * scalar peel and tail (whose contractions and rounding can differ, as GeluGrad's did) then fall on
 * the same elements for any thread count, where `parallel for simd` cut at N / threads. */
#define CPU_SIMD_BLOCK 4096
#define CPU_SIMD_LOOP(I, N, ...)                                                                           \
    do {                                                                                                   \
        int64_t simd_n_ = (N);                                                                             \
        if (simd_n_ >= CPU_PAR_MIN) {                                                                      \
            _Pragma("omp parallel for schedule(static)")                                                   \
            for (int64_t simd_b_ = 0; simd_b_ < simd_n_; simd_b_ += CPU_SIMD_BLOCK) {                      \
                int64_t simd_e_ = simd_b_ + CPU_SIMD_BLOCK < simd_n_ ? simd_b_ + CPU_SIMD_BLOCK : simd_n_; \
                _Pragma("omp simd") for (int64_t I = simd_b_; I < simd_e_; I++) { __VA_ARGS__; }           \
            }                                                                                              \
        } else {                                                                                           \
            _Pragma("omp simd") for (int64_t I = 0; I < simd_n_; I++) { __VA_ARGS__; }                     \
        }                                                                                                  \
    } while (0)
#define CPU_BCAST_MAX_IN 3

typedef struct {
    int rank; /* after merging; at least 1 */
    int n_in;
    int64_t numel;
    int64_t dims[SC_MAX_RANK];
    int64_t strides[CPU_BCAST_MAX_IN][SC_MAX_RANK]; /* in elements */
} cpu_bcast;

/* False if some input cannot be broadcast to out (the caller names the node). */
bool cpu_bcast_init(cpu_bcast *b, const sc_desc *out, const sc_desc *const *in, int n_in);

/* Kernels that only move elements serve every dtype by its size: CPU_BY_SIZE instantiates
 * MACRO(NAME_<bytes>, T) for the unsigned types of 1, 2, 4 and 8 bytes, CPU_BY_SIZE_PICK names the
 * instance for element size es (NULL for another). */
#define CPU_BY_SIZE(MACRO, NAME) MACRO(NAME##_1, uint8_t) MACRO(NAME##_2, uint16_t) MACRO(NAME##_4, uint32_t) MACRO(NAME##_8, uint64_t)
#define CPU_BY_SIZE_PICK(NAME, es) \
    ((es) == 1 ? NAME##_1 : (es) == 2 ? NAME##_2 : (es) == 4 ? NAME##_4 : (es) == 8 ? NAME##_8 : NULL)

/* o: output row, in[k]: input k's row start, s[k]: input k's element stride (0 or 1), n elements. */
typedef void (*cpu_bcast_row_fn)(const void *ctx, void *o, const void *const *in, const int64_t *s, int64_t n);

void cpu_bcast_run(const cpu_bcast *b, cpu_bcast_row_fn fn, const void *ctx, void *out, size_t out_esize,
                   const void *const *in, const size_t *in_esize);

/* Dtype lists for X-macros in element-wise kernels: X(code, C type, short name, extra...). These
 * are the types C computes with; f16 and bf16 are bit patterns (core/half.h) whose kernels widen to
 * float (cpu_half_arith_row below, or per element for selections and comparisons). */
#define CPU_FLOAT_TYPES(X, ...) X(SC_F32, float, f32, __VA_ARGS__) X(SC_F64, double, f64, __VA_ARGS__)
#define CPU_SINT_TYPES(X, ...)                                                                     \
    X(SC_I8, int8_t, i8, __VA_ARGS__) X(SC_I16, int16_t, i16, __VA_ARGS__)                          \
    X(SC_I32, int32_t, i32, __VA_ARGS__) X(SC_I64, int64_t, i64, __VA_ARGS__)
#define CPU_UINT_TYPES(X, ...)                                                                     \
    X(SC_U8, uint8_t, u8, __VA_ARGS__) X(SC_U16, uint16_t, u16, __VA_ARGS__)                        \
    X(SC_U32, uint32_t, u32, __VA_ARGS__) X(SC_U64, uint64_t, u64, __VA_ARGS__)
#define CPU_INT_TYPES(X, ...) CPU_SINT_TYPES(X, __VA_ARGS__) CPU_UINT_TYPES(X, __VA_ARGS__)
#define CPU_NUM_TYPES(X, ...) CPU_FLOAT_TYPES(X, __VA_ARGS__) CPU_INT_TYPES(X, __VA_ARGS__)

/* A row of an arithmetic op on f16 or bf16 (t) computed by its f32 row: each block of every input
 * run is widened to float, f32_row computes it, and the block is rounded back once. For +, -, *, /
 * that is the correctly rounded 16-bit result (core/half.h), the same bits as native half
 * arithmetic. in and o may alias (in-place variadic ops): a block is read before it is written. */
void cpu_half_arith_row(sc_dtype t, cpu_bcast_row_fn f32_row, const void *ctx, void *o, const void *const *in,
                        const int64_t *s, int64_t n, int n_in);

/* Converts n elements between any two of f32, f64, f16, bf16, the integer types and bool with
 * ONNX Cast semantics (float -> int truncates toward zero, -> bool is x != 0). False if a dtype is
 * not one of those. Defined in cpu_elementwise_cast.c; Pow uses it to bring exponents to a common type. */
bool cpu_convert(void *dst, sc_dtype dst_type, const void *src, sc_dtype src_type, int64_t n);

/* memcpy split across threads for large copies; a no-op when dst == src (in-place). */
void cpu_copy(void *dst, const void *src, int64_t n_bytes);

#endif
