/* oneDNN plumbing shared by the CPU kernels: one engine and stream for the process, a lock that
 * serialises primitive creation/execution against the caches, and the cache invalidation hook.
 *
 * Caches (cpu_nn_conv.c, cpu_dnnl_weights.c): convolution primitives are created once per distinct (shapes, attributes)
 * and reused; weights reordered into a primitive's preferred layout are cached by (weight data
 * pointer, shape) and stamped with cpu_params_epoch(). Anything that changes parameter values in
 * place (an optimizer step, loading new weights at a recycled address) calls cpu_params_changed()
 * (backends/cpu/cpu.h), which invalidates every reordered weight; cpu_dnnl_cache_clear() drops the
 * primitives too. A cheap sampled fingerprint of the weights is an extra guard, not the contract.
 */
#ifndef SC_CPU_DNNL_H
#define SC_CPU_DNNL_H

#include <dnnl.h>
#include <stdbool.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_kernels.h"

/* The process's engine and stream, created on first use; an error when oneDNN fails. Call with the
 * lock held. */
sc_status cpu_dnnl_context(dnnl_engine_t *eng, dnnl_stream_t *strm);

void cpu_dnnl_lock(void);
void cpu_dnnl_unlock(void);

/* Drops every cached primitive and reordered weight (declared again in cpu_kernels.h). */
void cpu_dnnl_cache_clear(void);

/* Registered by files that own caches, so cpu_dnnl_cache_clear reaches them all. */
typedef void (*cpu_dnnl_cache_clear_fn)(void);
void cpu_dnnl_register_cache(cpu_dnnl_cache_clear_fn fn);

/* Where convolution activations live while oneDNN computes (weights always take the primitive's
 * preferred layout, reordered once and cached):
 *   PLAIN:   src/dst stay in the caller's layout (NCHW, or channels-last for values that
 *            graph/pass_fuse.c marks so); oneDNN runs its GEMM-based kernels for NCHW.
 *   BLOCKED: src/dst in the primitive's preferred layout (nhwc / blocked for the AVX-512 brgconv
 *            kernels), reordered from and to the caller's on every call.
 *   AUTO:    channels-last when a side already is or the Conv has a fused summand, else PLAIN for
 *            1x1 kernels that oneDNN does not run as a GEMM (cpu_conv_plain_ok) and BLOCKED
 *            otherwise: the fastest per ResNet-50 conv shape on the AVX-512 Xeon it was measured on
 *            (2 threads; measurements in cpu_nn_conv.c).
 * Changing the layout clears the caches. */
typedef enum { CPU_CONV_LAYOUT_PLAIN, CPU_CONV_LAYOUT_BLOCKED, CPU_CONV_LAYOUT_AUTO } cpu_conv_layout;
void cpu_conv_set_layout(cpu_conv_layout layout);
cpu_conv_layout cpu_conv_get_layout(void);
/* Whether AUTO may keep a 1x1 convolution with these strides in PLAIN layout: not where oneDNN
 * would run it as "gemm:jit", whose sums depend on the thread count. oneDNN 2.6 without AVX-512 runs
 * every 1x1 on NCHW that way (forward, backward data and weights): ResNet-18's strided downsample
 * convolutions and DenseNet's bottlenecks gave other bits on 3 threads than on 1 (a 2-core AVX2
 * EPYC), where every kernel must give the same bits for any count (backends/thread_governor.h).
 * Blocked, they run jit 1x1 kernels that do not split sums. Decided once per process and stride
 * kind (unit or not) by the implementation oneDNN picks for a small plain 1x1. */
bool cpu_conv_plain_ok(int n_spatial, const int64_t *strides);

/* oneDNN's row-major tag for nd dims (1 to 6). */
dnnl_format_tag_t cpu_dnnl_plain_tag(int nd);

/* A convolution window as oneDNN's descriptors take it, for n spatial dims: strides, dilations
 * counted as gaps (ONNX's dilation - 1) and the pads before and after. */
typedef struct {
    dnnl_dims_t strides, dil, pl, pr;
} cpu_dnnl_window;
cpu_dnnl_window cpu_dnnl_window_of(int n, const int64_t *stride, const int64_t *dil, const int64_t *pad_begin,
                                   const int64_t *pad_end);

/* The forward-training convolution primitive descriptor (no bias) that oneDNN's backward
 * convolution descriptors take as a hint; the caller destroys it. */
sc_status cpu_dnnl_conv_hint(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *src,
                             const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *dst, const cpu_dnnl_window *w,
                             dnnl_primitive_desc_t *hint);

/* Whether pd runs one of oneDNN's optimised kernels, not its reference loops (an implementation
 * named "ref..."): a bf16 primitive without them runs widened instead. */
bool cpu_dnnl_optimised(const_dnnl_primitive_desc_t pd);

/* "oneDNN <what> failed: <status name>" as a kernel status. */
sc_status cpu_dnnl_error(const sc_kernel_call *call, const char *what, dnnl_status_t s);

/* A reorder primitive from one layout to another, and a memory object over handle (or
 * DNNL_MEMORY_ALLOCATE), as kernel statuses. */
sc_status cpu_dnnl_reorder_create(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to, dnnl_primitive_t *out);
sc_status cpu_dnnl_memory_new(const sc_kernel_call *call, dnnl_engine_t eng, const dnnl_memory_desc_t *md, void *handle,
                              dnnl_memory_t *out);

/* The weight memory to pass to a primitive (cpu_dnnl_weights.c): user (its handle set to w) when
 * prim_md is user_md, else w reordered into prim_md, cached by (w, prim_md) and made again on first
 * sight, after cpu_params_changed() or when its sampled fingerprint changed. w must be a parameter
 * or a constant: a value that changes without cpu_params_changed() could be served stale. */
sc_status cpu_dnnl_weight(const sc_kernel_call *call, dnnl_engine_t eng, dnnl_stream_t strm, dnnl_memory_t user,
                          const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *prim_md, const float *w,
                          int64_t numel, dnnl_memory_t *out);

/* Convolution weights from their plain rows (row-major, dense) into a blocked layout of oneDNN's,
 * by our own loops (cpu_weight_reorder.c), with the same bits as oneDNN's reorder. NULL where the
 * pair of layouts is not one the loops cover (inner blocks on more than two adjacent leading dims,
 * types other than f32 and bf16, ...) or, with only_faster, where oneDNN's reorder is the faster
 * (all but bf16 into brgconv's VNNI-pair layouts), or with SCORCH_CPU_WEIGHT_REORDER=dnnl: the
 * caller runs oneDNN's reorder then. */
typedef struct cpu_weight_reorder cpu_weight_reorder;
cpu_weight_reorder *cpu_weight_reorder_new(const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *blocked,
                                           bool only_faster);
void cpu_weight_reorder_free(cpu_weight_reorder *r);
/* plain -> blocked (padding zeroed), on the OpenMP threads when parallel. */
void cpu_weight_reorder_to_blocked(const cpu_weight_reorder *r, const void *plain, void *blocked, bool parallel);

/* C = alpha op(A) op(B) + beta C, row-major f32 with dnnl_sgemm's arguments, over `batch` problems:
 * problem k reads A + ao[k] and B + bo[k] (NULL: offset 0) and writes C + k * M * N. Every tile of
 * every problem is an item; threads take them as they come free, each sgemm on one thread, and the
 * tiles depend on the shapes and the core count only (cpu_nn_sgemm.c). mt and nt are the cut,
 * filled in by the call. */
typedef struct {
    char ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int64_t lda, ldb, ldc;
    int64_t mt, nt; /* tiles along M and N */
} cpu_sgemm;

dnnl_status_t cpu_sgemm_tiled(cpu_sgemm t, int64_t batch, const int64_t *ao, const int64_t *bo);

/* The tiles of an (M, N) product over K: mt along M, nt along N, enough for 4 per core where the
 * flops allow, splitting the longer side while its tiles stay 32 long. The machine's core count
 * sets the cut, the thread count never does (cpu_nn_sgemm.c). */
void cpu_gemm_cut(int64_t M, int64_t N, int64_t K, int64_t *mt, int64_t *nt);

/* Y = alpha op(A) op(B) + beta C with bf16 A and B on the CPU's bf16 dot products
 * (cpu_nn_bgemm.c): f32 sums, Y f32 or bf16 (rounded once), row-major (M, N); C optional, f32 or
 * bf16, element (i, j) at C[i * c_rs + j * c_cs] (0 strides broadcast). Over `batch` problems as
 * cpu_sgemm_tiled: problem k reads A + ao[k], B + bo[k] (NULL: 0) and writes Y + k * M * N; C only
 * with batch 1. *native false (nothing written) where oneDNN has no bf16 kernel for a tile: the
 * caller widens instead. The same bits for any thread count. */
typedef struct {
    char ta, tb;
    int64_t M, N, K;
    float alpha, beta;
    const uint16_t *A, *B;
    int64_t lda, ldb;
    const void *C;
    sc_dtype c_type;
    int64_t c_rs, c_cs;
    void *Y;
    sc_dtype y_type;
} cpu_bgemm;
sc_status cpu_bgemm_tiled(const sc_kernel_call *call, const cpu_bgemm *t, int64_t batch, const int64_t *ao,
                          const int64_t *bo, bool *native);
/* Whether oneDNN has bf16 kernels on this CPU (AVX512_BF16, AMX, or AVX-512's emulation), not only
 * its reference loops, by a probe of its matmul: bf16 MatMul, Gemm and Conv then run on them instead
 * of widened to f32 (cpu_widen.c). False with SCORCH_CPU_BF16=widen. Decided once per process. */
bool cpu_bf16_native(void);

/* Y (M, N) = A (M, K) @ B (K, N), all row-major f32 (B stored (N, K) when trans_b), B constant
 * while the graph runs (cpu_nn_matmul_packed.c). */
sc_status cpu_matmul_packed_f32(const sc_kernel_call *call, int64_t M, int64_t K, int64_t N, bool trans_b,
                                const float *A, const float *B, float *Y);

/* dW (M, C/G, k..) of a convolution from X and dY (NCHW-style plain), the same bits for any thread
 * count (cpu_nn_conv_grad_w.c); plain keeps activations in their layout for the primitive. X and dY
 * are f32, or bf16 with dW bf16 or f32 (summed in f32, rounded once): the types of call's inputs and
 * of its output 1. Call with the lock held. */
sc_status cpu_conv_grad_weights(const sc_kernel_call *call, const cpu_window *w, int64_t N, int64_t C, int64_t M,
                                int64_t G, bool plain, const void *dy, const void *x, void *dw);

/* A cache of primitive entries, each a heap struct of entry_size bytes whose first member is its key
 * of key_size bytes (compared bytewise, so keys are zero-initialised before filling). build fills a
 * new entry; release frees one, half-built ones included. Shapes per model are few, so lookup is a
 * linear scan. The convolution (forward, backward data, backward weights) and packed matmul caches
 * are these, each a static initialised with its sizes and functions. */
typedef sc_status (*cpu_prim_build_fn)(const sc_kernel_call *call, dnnl_engine_t eng, void *entry);
typedef struct {
    size_t key_size, entry_size;
    cpu_prim_build_fn build;
    void (*release)(void *entry);
    void **items;
    int n, cap;
} cpu_prim_list;

/* The entry of key, found or else made: zeroed, the key copied to its start, then built; a failed
 * build or a full list releases it. */
sc_status cpu_prim_list_get(const sc_kernel_call *call, dnnl_engine_t eng, cpu_prim_list *l, const void *key,
                            void **out);
/* Destroys the non-NULL primitives prims[0..n_prims) and memories mems[0..n_mems) of a cache entry:
 * the body of its release function. */
void cpu_dnnl_destroy(const dnnl_primitive_t *prims, int n_prims, const dnnl_memory_t *mems, int n_mems);
/* Releases every entry (the list stays usable). */
void cpu_prim_list_clear(cpu_prim_list *l);

/* A cached primitive ready to run: its entry, and the process's engine and stream. */
typedef struct {
    void *entry;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
} cpu_prim_ready;
sc_status cpu_prim_get(const sc_kernel_call *call, cpu_prim_list *l, const void *key, cpu_prim_ready *out);

#endif
