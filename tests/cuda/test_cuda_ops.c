/* Cross-backend suite: the CUDA backend against the CPU backend.
 *
 * 1. Table coverage (runs everywhere): every op has a CUDA kernel or a reason (sc_kernel_missing_reason).
 * 2. Per op (needs a GPU): a one-node graph with random inputs, output descs from shape inference;
 *    the CPU kernel (cpu_run_node, the reference) and the CUDA kernel run on the same inputs and the
 *    outputs must agree within the op's tolerance:  |cuda - cpu| <= tol * (1 + |cpu|). Then the
 *    node runs again over junk outputs and must repeat its bits (rerun_same_bits: what a
 *    recomputation in a checkpointing plan does; no kernel may depend on thread timing).
 *    On the CPU emulator of CUDA under ASan (tests/cuda_emu), the bytes between tensors are
 *    poisoned, so a kernel reading or writing outside its tensors is reported.
 * 3. Training (needs a GPU): 3 SGD-with-momentum steps of the mlp and residual training graphs of
 *    tests/plan_test_graphs.h through plan_exec on the CPU backend and on the CUDA backend; losses
 *    and every parameter / optimizer state must agree within 1e-4 relative; between steps the state
 *    checked on the device (plan_session_state_finite) is finite.
 * 4. The device's finite check (all_finite) on every float dtype, with Inf and NaN found.
 * Without a GPU, part 1 and the CPU half of part 2 (shape inference, the reference kernels) run,
 * then "SKIP: no CUDA device (cudaGetDeviceCount: <error>)" and exit 77 (ctest SKIP_RETURN_CODE,
 * tests/cuda.cmake); a failure there exits 1.
 *
 * Tolerances (relative, see above), and why:
 *   1e-6  exact ops: movement, copies, comparisons, casts, Relu, Where, Pad, Gather, GatherGrad
 *         (buckets summed in the CPU's order), Dropout (the mask is bit-identical by
 *         construction), optimizers (same formulas, same order), Resize (the CPU's tap tables,
 *         corners summed in double in the CPU's order)
 *   1e-5  transcendental element-wise (CUDA libm vs glibc / polynomial exp on the CPU: a few ulp),
 *         ResizeGrad (the CPU's order, but nvcc and gcc contract w * dY + acc into an FMA or not)
 *   1e-4  reductions, softmax, norms, pools, losses (summation order differs; atomics in grads)
 *   2e-4  Gemm / MatMul / Conv (cuBLAS / cuDNN blocking vs oneDNN; TF32 stays off in this test)
 * 16-bit cases (bf16, f16; both backends run the f32 kernel on widened copies and round each output
 * once, cpu_widen.c and cu_widen.cu, but for CUDA's cuBLAS products and cuDNN convolutions, which
 * take the 16-bit data and accumulate in f32): 1e-6 where the f32 results are equal (casts, movement,
 * element-wise arithmetic: one IEEE operation, then the same rounding); else one unit in the last
 * place of the 16-bit result, since f32 results a few ulp apart can round to neighbouring 16-bit
 * values: 2^-7 relative for bf16 (8e-3), 2^-10 for f16 (1e-3).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "core/half.h"
#include "tests/ref_executor.h"
#include "backends/cpu/cpu_rng.h"
#include "backends/cuda/backend_cuda.h"
#include "backends/cuda/cuda_common.h"
#include "backends/plan_exec.h"
#include "graph/shape.h"
#include "plan_test_graphs.h"
#include "tests/check.h"

enum { K_RAND, K_POS, K_INTS, K_F32V, K_LABELS, K_BOOL, K_ABSENT };

typedef struct {
    sc_dtype t;
    int rank;
    int64_t dims[5];
    int kind;
    int64_t ints[8]; /* K_INTS values (numel of dims); K_F32V: f32 values in thousandths; K_LABELS: the class count */
} in_spec;

typedef struct {
    sc_op op;
    const char *what;
    int n_in, n_out;
    in_spec in[7];
    void (*attrs)(sc_attrs *a);
    double tol;
} op_case;

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

#define F32(...) {SC_F32, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, K_RAND, {0}}
#define POS(...) {SC_F32, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, K_POS, {0}}
#define I64V(n, ...) {SC_I64, 1, {n}, K_INTS, {__VA_ARGS__}}
#define SCALAR_F32(v) {SC_F32, 0, {0}, K_INTS, {v}}
#define F32V(n, ...) {SC_F32, 1, {n}, K_F32V, {__VA_ARGS__}} /* constant, values / 1000 */
#define ABSENT {SC_DTYPE_UNDEFINED, 0, {0}, K_ABSENT, {0}}
#define BOOLS(...) {SC_BOOL, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, K_BOOL, {0}}
#define SCALAR_I64(v) {SC_I64, 0, {0}, K_INTS, {v}}
#define BF16(...) {SC_BF16, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, K_RAND, {0}}
#define F16(...) {SC_F16, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, K_RAND, {0}}
#define F64(...) {SC_F64, sizeof((int64_t[]){__VA_ARGS__}) / 8, {__VA_ARGS__}, K_RAND, {0}}
#define BF16_ULP 8e-3
#define F16_ULP 1e-3

static void a_gemm(sc_attrs *a) { a->gemm = (sc_gemm_attrs){.alpha = 0.7f, .beta = 1.3f, .trans_b = true}; }
static void a_axis1(sc_attrs *a) { a->axis = (sc_axis_attrs){.axis = 1}; }
static void a_axism1(sc_attrs *a) { a->axis = (sc_axis_attrs){.axis = -1}; }
static void a_ln(sc_attrs *a) { a->layer_norm = (sc_layer_norm_attrs){.axis = -1, .epsilon = 1e-5f, .stash_type = SC_F32}; }
static void a_bn_train(sc_attrs *a) { a->batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f, .training_mode = true}; }
static void a_bn_inf(sc_attrs *a) { a->batch_norm = (sc_batch_norm_attrs){.epsilon = 1e-5f, .momentum = 0.9f}; }
static void a_conv(sc_attrs *a) {
    a->window = (sc_window_attrs){.n_spatial = 2, .strides = {2, 1}, .dilations = {1, 1}, .pads = {1, 1, 1, 1}, .group = 1};
}
/* the inference fusions of graph/pass_fuse.c: Y = relu(conv + S) */
static void a_conv_fused(sc_attrs *a) {
    a_conv(a);
    a->window.fused_sum = true, a->window.fused_act = SC_FUSED_RELU;
}
static void a_conv_relu6(sc_attrs *a) { /* a fused Clip(0, 0.3): ReLU6's form, capped low enough to bite */
    a_conv(a);
    a->window.fused_act = SC_FUSED_RELU;
    a->window.fused_relu_max = 0.3f;
}
/* the other fused activations: the SE gate's sigmoid, EfficientNet's SiLU, MobileNetV3's hard swish */
static void a_conv_sigmoid(sc_attrs *a) { a_conv(a), a->window.fused_act = SC_FUSED_SIGMOID; }
static void a_conv_swish(sc_attrs *a) { a_conv(a), a->window.fused_sum = true, a->window.fused_act = SC_FUSED_SWISH; }
static void a_conv_hard_swish(sc_attrs *a) { a_conv(a), a->window.fused_act = SC_FUSED_HARD_SWISH; }
static void a_conv_1x1(sc_attrs *a) {
    a->window = (sc_window_attrs){.n_spatial = 2, .strides = {1, 1}, .dilations = {1, 1}, .group = 1};
}
static void a_conv_asym(sc_attrs *a) {
    a->window = (sc_window_attrs){.n_spatial = 2, .strides = {1, 1}, .dilations = {1, 2}, .pads = {0, 1, 1, 2}, .group = 2};
}
static void a_conv_asym_fused(sc_attrs *a) {
    a_conv_asym(a);
    a->window.fused_sum = true, a->window.fused_act = SC_FUSED_RELU;
}
static void a_pool(sc_attrs *a) {
    a->window = (sc_window_attrs){.n_spatial = 2, .has_kernel_shape = true, .kernel_shape = {3, 3}, .strides = {2, 2},
                                  .dilations = {1, 1}, .pads = {1, 1, 1, 1}, .count_include_pad = false};
}
static void a_scatter_add(sc_attrs *a) { a->scatter_nd.reduction = SC_SCATTER_ADD; }
static void a_gather_nd_batch1(sc_attrs *a) { a->gather_nd.batch_dims = 1; }
static void a_ge_grad3x4(sc_attrs *a) { a->axis = (sc_axis_attrs){.axis = 0, .data_rank = 2, .data_dims = {3, 4}}; }
static void a_ge_grad2x5(sc_attrs *a) { a->axis = (sc_axis_attrs){.axis = 1, .data_rank = 2, .data_dims = {2, 5}}; }
static void a_fmod(sc_attrs *a) { a->mod.fmod = true; }
static void a_cum_rev_ex(sc_attrs *a) { a->cum_sum = (sc_cum_sum_attrs){.exclusive = true, .reverse = true}; }
static void a_reduce(sc_attrs *a) { a->reduce = (sc_reduce_attrs){.keepdims = true}; }
static void a_perm(sc_attrs *a) { a->transpose = (sc_transpose_attrs){.n_perm = 3, .perm = {2, 0, 1}}; }
static void a_leaky(sc_attrs *a) { a->leaky_relu.alpha = 0.1f; }
static void a_gelu_tanh(sc_attrs *a) { a->gelu.tanh_approx = true; }
static void a_hard_sigmoid(sc_attrs *a) { a->hard_sigmoid = (sc_hard_sigmoid_attrs){.alpha = 0.3f, .beta = 0.4f}; }
static void a_sce(sc_attrs *a) { a->sce = (sc_sce_attrs){.reduction = SC_REDUCTION_MEAN}; }
static void a_sgd(sc_attrs *a) { a->sgd = (sc_sgd_attrs){.momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = true}; }
/* One rank (the test's process group): the all-reduce is the identity on both backends, through
 * their packing and unpacking (and, on CUDA, the host round trip). */
static void a_all_reduce(sc_attrs *a) { a->all_reduce = (sc_all_reduce_attrs){.ranks = 1, .bucket = 0}; }
static void a_adamw(sc_attrs *a) { a->adamw = (sc_adamw_attrs){.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f}; }
static void a_pad_reflect(sc_attrs *a) { a->pad.mode = SC_PAD_REFLECT; }
static void a_cast_f64(sc_attrs *a) { a->cast.to = SC_F64; }
static void a_cast_f32(sc_attrs *a) { a->cast.to = SC_F32; }
static void a_cast_bf16(sc_attrs *a) { a->cast.to = SC_BF16; }
static void a_cast_f16(sc_attrs *a) { a->cast.to = SC_F16; }
static void a_fill_bf16(sc_attrs *a) { a->fill = (sc_fill_attrs){.dtype = SC_BF16, .value = 1.3}; }
static void a_trilu(sc_attrs *a) { a->trilu.upper = false; }
static void a_fill(sc_attrs *a) { a->fill = (sc_fill_attrs){.dtype = SC_F32, .value = 1.5}; }
static void a_dropout(sc_attrs *a) { a->dropout = (sc_dropout_attrs){.seed = 7, .has_seed = true}; }
static void a_rs_linear(sc_attrs *a) { a->resize = (sc_resize_attrs){.mode = SC_RESIZE_LINEAR, .coord = SC_CT_HALF_PIXEL}; }
static void a_rs_nearest(sc_attrs *a) {
    a->resize = (sc_resize_attrs){.mode = SC_RESIZE_NEAREST, .coord = SC_CT_ASYMMETRIC, .nearest_mode = SC_NEAREST_FLOOR};
}
static void a_rs_nearest_hp(sc_attrs *a) { a->resize = (sc_resize_attrs){.mode = SC_RESIZE_NEAREST, .coord = SC_CT_PYTORCH_HALF_PIXEL}; }
static void a_rs_align(sc_attrs *a) { a->resize = (sc_resize_attrs){.mode = SC_RESIZE_LINEAR, .coord = SC_CT_ALIGN_CORNERS}; }
static void a_rs_crop(sc_attrs *a) {
    a->resize = (sc_resize_attrs){.mode = SC_RESIZE_LINEAR, .coord = SC_CT_TF_CROP_AND_RESIZE, .extrapolation_value = 7.5f};
}

static const op_case cases[] = {
    {SC_OP_RELU, "relu", 1, 1, {F32(3, 5, 7)}, NULL, 1e-6},
    {SC_OP_LEAKY_RELU, "leaky", 1, 1, {F32(64)}, a_leaky, 1e-6},
    {SC_OP_SIGMOID, "sigmoid", 1, 1, {F32(300)}, NULL, 1e-5},
    {SC_OP_TANH, "tanh", 1, 1, {F32(300)}, NULL, 1e-5},
    {SC_OP_ERF, "erf", 1, 1, {F32(300)}, NULL, 1e-5},
    {SC_OP_GELU, "gelu", 1, 1, {F32(300)}, NULL, 1e-5},
    {SC_OP_GELU, "gelu_tanh", 1, 1, {F32(300)}, a_gelu_tanh, 1e-5},
    {SC_OP_HARD_SIGMOID, "hard_sigmoid", 1, 1, {F32(300)}, a_hard_sigmoid, 1e-6},
    {SC_OP_HARD_SWISH, "hard_swish", 1, 1, {F32(300)}, NULL, 1e-6},
    {SC_OP_SQRT, "sqrt", 1, 1, {POS(100)}, NULL, 1e-6},
    {SC_OP_RECIPROCAL, "reciprocal", 1, 1, {POS(100)}, NULL, 1e-6},
    {SC_OP_NEG, "neg", 1, 1, {F32(100)}, NULL, 1e-6},
    {SC_OP_EXP, "exp", 1, 1, {F32(100)}, NULL, 1e-5},
    {SC_OP_LOG, "log", 1, 1, {POS(100)}, NULL, 1e-5},
    {SC_OP_CLIP, "clip", 3, 1, {F32(100), SCALAR_F32(0), SCALAR_F32(0)}, NULL, 1e-6},
    {SC_OP_CAST, "cast", 1, 1, {F32(50)}, a_cast_f64, 1e-6},
    {SC_OP_ADD, "add_bcast", 2, 1, {F32(2, 3, 4, 5), F32(3, 1, 1)}, NULL, 1e-6},
    {SC_OP_SUB, "sub", 2, 1, {F32(4, 5), F32(5)}, NULL, 1e-6},
    {SC_OP_MUL, "mul", 2, 1, {F32(4, 1), F32(1, 6)}, NULL, 1e-6},
    {SC_OP_DIV, "div", 2, 1, {F32(4, 6), POS(6)}, NULL, 1e-6},
    {SC_OP_POW, "pow", 2, 1, {POS(4, 6), F32(6)}, NULL, 1e-5},
    {SC_OP_MAX, "max3", 3, 1, {F32(4, 6), F32(6), F32(1, 6)}, NULL, 1e-6},
    {SC_OP_MIN, "min2", 2, 1, {F32(4, 6), F32(4, 1)}, NULL, 1e-6},
    {SC_OP_LESS, "less", 2, 1, {F32(4, 6), F32(6)}, NULL, 1e-6},
    {SC_OP_GREATER, "greater", 2, 1, {F32(4, 6), F32(6)}, NULL, 1e-6},
    {SC_OP_WHERE, "where", 3, 1, {{SC_BOOL, 1, {6}, K_BOOL, {0}}, F32(4, 6), F32(4, 1)}, NULL, 1e-6},
    {SC_OP_EXPAND, "expand", 2, 1, {F32(3, 1), I64V(2, 3, 5)}, NULL, 1e-6},
    {SC_OP_REDUCE_SUM, "reduce_sum", 2, 1, {F32(4, 5, 300), I64V(2, 0, 2)}, a_reduce, 1e-4},
    {SC_OP_REDUCE_MEAN, "reduce_mean", 2, 1, {F32(4, 5, 6), I64V(1, 1)}, a_reduce, 1e-4},
    {SC_OP_SOFTMAX, "softmax", 1, 1, {F32(4, 7, 5)}, a_axis1, 1e-4},
    {SC_OP_LOG_SOFTMAX, "log_softmax", 1, 1, {F32(4, 700)}, a_axism1, 1e-4},
    {SC_OP_SOFTMAX_GRAD, "softmax_grad", 2, 1, {F32(4, 7, 5), POS(4, 7, 5)}, a_axis1, 1e-4},
    {SC_OP_LOG_SOFTMAX_GRAD, "log_softmax_grad", 2, 1, {F32(4, 70), F32(4, 70)}, a_axism1, 1e-4},
    {SC_OP_LAYER_NORM, "layer_norm", 3, 3, {F32(6, 64), F32(64), F32(64)}, a_ln, 1e-4},
    {SC_OP_LAYER_NORM_GRAD, "layer_norm_grad", 3, 3, {F32(6, 64), F32(6, 64), F32(64)}, a_ln, 1e-4},
    {SC_OP_BATCH_NORM, "bn_train", 5, 3, {F32(2, 3, 5, 5), F32(3), F32(3), F32(3), POS(3)}, a_bn_train, 1e-4},
    {SC_OP_BATCH_NORM, "bn_infer", 5, 1, {F32(2, 3, 5, 5), F32(3), F32(3), F32(3), POS(3)}, a_bn_inf, 1e-4},
    {SC_OP_BATCH_NORM_GRAD, "bn_grad", 3, 3, {F32(2, 3, 5, 5), F32(2, 3, 5, 5), F32(3)}, a_bn_train, 1e-4},
    /* 3 x 20,000 elements per channel: several chunks per channel, merged (cu_nn.cu, bn_parts); both
     * sides sum in double, so tighter than the 1e-4 of norms (dScale, dBias: the CPU's float sums) */
    {SC_OP_BATCH_NORM, "bn_train_chunks", 5, 3, {F32(5, 3, 50, 80), F32(3), F32(3), F32(3), POS(3)}, a_bn_train, 1e-6},
    {SC_OP_BATCH_NORM_GRAD, "bn_grad_chunks", 3, 3, {F32(5, 3, 50, 80), F32(5, 3, 50, 80), F32(3)}, a_bn_train, 1e-5},
    {SC_OP_GLOBAL_AVERAGE_POOL, "gap", 1, 1, {F32(2, 3, 7, 7)}, NULL, 1e-4},
    {SC_OP_MAX_POOL, "max_pool", 1, 1, {F32(2, 3, 9, 9)}, a_pool, 1e-6},
    {SC_OP_AVERAGE_POOL, "avg_pool", 1, 1, {F32(2, 3, 9, 9)}, a_pool, 1e-4},
    {SC_OP_MAX_POOL_GRAD, "max_pool_grad", 2, 1, {F32(2, 3, 5, 5), F32(2, 3, 9, 9)}, a_pool, 1e-4},
    {SC_OP_AVERAGE_POOL_GRAD, "avg_pool_grad", 2, 1, {F32(2, 3, 5, 5), F32(2, 3, 9, 9)}, a_pool, 1e-4},
    {SC_OP_GEMM, "gemm", 3, 1, {F32(7, 33), F32(5, 33), F32(5)}, a_gemm, 2e-4},
    {SC_OP_GEMM, "gemm_k0", 3, 1, {F32(7, 0), F32(5, 0), F32(5)}, a_gemm, 1e-6}, /* Y = beta C: lda 0 is invalid */
    {SC_OP_MATMUL, "matmul_batched", 2, 1, {F32(2, 3, 4, 16), F32(3, 16, 5)}, NULL, 2e-4},
    {SC_OP_MATMUL, "matmul_partial", 2, 1, {F32(2, 1, 4, 16), F32(1, 3, 16, 5)}, NULL, 2e-4},
    {SC_OP_CONV, "conv", 3, 1, {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4)}, a_conv, 2e-4},
    {SC_OP_CONV, "conv_asym_group", 2, 1, {F32(2, 4, 8, 8), F32(6, 2, 2, 3)}, a_conv_asym, 2e-4},
    {SC_OP_CONV, "conv_fused_relu6", 3, 1, {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4)}, a_conv_relu6, 2e-4},
    {SC_OP_CONV, "conv_fused_sum_relu", 4, 1, {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4), F32(2, 4, 5, 9)}, a_conv_fused, 2e-4},
    {SC_OP_CONV, "conv_fused_sigmoid", 3, 1, {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4)}, a_conv_sigmoid, 2e-4},
    {SC_OP_CONV, "conv_fused_sum_swish", 4, 1, {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4), F32(2, 4, 5, 9)}, a_conv_swish, 2e-4},
    {SC_OP_CONV, "conv_fused_hard_swish", 3, 1, {F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4)}, a_conv_hard_swish, 2e-4},
    {SC_OP_CONV, "conv_asym_fused", 4, 1, {F32(2, 4, 8, 8), F32(6, 2, 2, 3), ABSENT, F32(2, 6, 8, 7)}, a_conv_asym_fused, 2e-4},
    {SC_OP_CONV_GRAD, "conv_grad", 3, 3, {F32(2, 4, 5, 9), F32(2, 3, 9, 9), F32(4, 3, 3, 3)}, a_conv, 2e-4},
    /* 10,240 positions per output channel: the bias gradient sums several chunks (ch_parts) */
    {SC_OP_CONV_GRAD, "conv_grad_bias_chunks", 3, 3, {F32(2, 3, 64, 80), F32(2, 2, 64, 80), F32(3, 2, 1, 1)}, a_conv_1x1, 2e-4},
    {SC_OP_TRANSPOSE, "transpose", 1, 1, {F32(3, 4, 5)}, a_perm, 1e-6},
    {SC_OP_CONCAT, "concat", 2, 1, {F32(2, 3, 4), F32(2, 5, 4)}, a_axis1, 1e-6},
    {SC_OP_SPLIT, "split", 2, 2, {F32(2, 8, 3), I64V(2, 3, 5)}, a_axis1, 1e-6},
    {SC_OP_SLICE, "slice", 5, 1, {F32(6, 8), I64V(2, 1, -1), I64V(2, 5, 0), I64V(2, 0, 1), I64V(2, 2, -3)}, NULL, 1e-6},
    {SC_OP_SLICE_GRAD, "slice_grad", 6, 1, {F32(2, 3), F32(6, 8), I64V(2, 1, -1), I64V(2, 5, 0), I64V(2, 0, 1), I64V(2, 2, -3)}, NULL, 1e-6},
    {SC_OP_GATHER, "gather", 2, 1, {F32(10, 4), I64V(5, 3, -1, 0, 3, 9)}, NULL, 1e-6},
    {SC_OP_GATHER_GRAD, "gather_grad", 3, 1, {F32(5, 4), I64V(5, 3, -1, 0, 3, 9), F32(10, 4)}, NULL, 1e-6},
    {SC_OP_GATHER_GRAD, "gather_grad_rep", 3, 1, {F32(8, 3), I64V(8, 2, 2, 5, 2, -3, 0, 5, 2), F32(6, 3)}, NULL, 1e-6},
    /* base: the rows are added into a running gradient sum (a tied embedding), in place too */
    {SC_OP_GATHER_GRAD, "gather_grad_base", 4, 1, {F32(8, 3), I64V(8, 2, 2, 5, 2, -3, 0, 5, 2), F32(6, 3), F32(6, 3)}, NULL, 1e-6},
    {SC_OP_GATHER_GRAD, "gather_grad_base_no_data", 4, 1, {F32(8, 3), I64V(8, 2, 2, 5, 2, -3, 0, 5, 2), ABSENT, F32(6, 3)}, NULL, 1e-6},
    /* same-shape operands, so the in-place check (output over input 0 or 1) applies */
    {SC_OP_ADD, "add_same", 2, 1, {F32(3, 70), F32(3, 70)}, NULL, 1e-6},
    {SC_OP_SUB, "sub_same", 2, 1, {F32(3, 70), F32(70)}, NULL, 1e-6},
    {SC_OP_MUL, "mul_same", 2, 1, {F32(3, 70), F32(3, 70)}, NULL, 1e-6},
    {SC_OP_DIV, "div_same", 2, 1, {F32(3, 70), POS(3, 70)}, NULL, 1e-6},
    {SC_OP_PAD, "pad_reflect", 2, 1, {F32(3, 5), I64V(4, 1, 2, 2, 1)}, a_pad_reflect, 1e-6},
    {SC_OP_TRILU, "trilu", 1, 1, {F32(2, 4, 5)}, a_trilu, 1e-6},
    {SC_OP_TILE, "tile", 2, 1, {F32(2, 3, 4), I64V(3, 2, 1, 3)}, NULL, 0},
    {SC_OP_GATHER_ELEMENTS, "gather_elements", 2, 1, {F32(3, 4), {SC_I64, 2, {2, 4}, K_INTS, {0, 2, -1, 1, 2, 0, 1, -3}}}, NULL, 0},
    {SC_OP_GATHER_ELEMENTS, "gather_elements_axis1", 2, 1, {F32(2, 5), {SC_I64, 2, {2, 3}, K_INTS, {4, 0, -1, 2, 2, -5}}}, a_axis1, 0},
    {SC_OP_GATHER_ELEMENTS_GRAD, "gather_elements_grad", 2, 1, {F32(2, 4), {SC_I64, 2, {2, 4}, K_INTS, {0, 2, -1, 1, 2, 2, 0, -3}}}, a_ge_grad3x4, 0},
    {SC_OP_GATHER_ELEMENTS_GRAD, "gather_elements_grad_axis1", 2, 1, {F32(2, 3), {SC_I64, 2, {2, 3}, K_INTS, {4, 0, 4, 2, 2, -5}}}, a_ge_grad2x5, 0},
    /* rows 1 and -3 (= 1 again) of a [4, 5] table: the later update wins, or both add in order */
    {SC_OP_SCATTER_ND, "scatter_nd", 3, 1, {F32(4, 5), {SC_I64, 2, {3, 1}, K_INTS, {1, 3, -3}}, F32(3, 5)}, NULL, 0},
    {SC_OP_SCATTER_ND, "scatter_nd_add", 3, 1, {F32(4, 5), {SC_I64, 2, {3, 1}, K_INTS, {1, 3, -3}}, F32(3, 5)}, a_scatter_add, 0},
    {SC_OP_SCATTER_ND, "scatter_nd_elems", 3, 1, {F32(2, 3, 4), {SC_I64, 2, {2, 3}, K_INTS, {0, 2, 3, 1, -1, 0}}, F32(2)}, NULL, 0},
    {SC_OP_GATHER_ND, "gather_nd_rows", 2, 1, {F32(4, 5), {SC_I64, 2, {3, 1}, K_INTS, {1, 3, -3}}}, NULL, 0},
    {SC_OP_GATHER_ND, "gather_nd_elems", 2, 1, {F32(2, 3, 4), {SC_I64, 2, {2, 3}, K_INTS, {0, 2, 3, 1, -1, 0}}}, NULL, 0},
    {SC_OP_GATHER_ND, "gather_nd_batch1", 2, 1, {F32(2, 3, 4), {SC_I64, 3, {2, 2, 1}, K_INTS, {2, 0, -1, 1}}}, a_gather_nd_batch1, 0},
    {SC_OP_MOD, "mod_fmod_f32", 2, 1, {F32(3, 4), POS(4)}, a_fmod, 1e-6},
    {SC_OP_MOD, "mod_i64", 2, 1, {I64V(6, 7, -7, 7, -7, 5, -3), I64V(6, 3, 3, -3, -3, 5, 2)}, NULL, 0},
    {SC_OP_MOD, "mod_i64_fmod", 2, 1, {I64V(6, 7, -7, 7, -7, 5, -3), I64V(6, 3, 3, -3, -3, 5, 2)}, a_fmod, 0},
    {SC_OP_CUM_SUM, "cum_sum", 2, 1, {F32(3, 5, 4), SCALAR_I64(1)}, NULL, 0},
    {SC_OP_CUM_SUM, "cum_sum_rev_excl", 2, 1, {F32(3, 5, 4), SCALAR_I64(-1)}, a_cum_rev_ex, 0},
    {SC_OP_CUM_SUM, "cum_sum_i64", 2, 1, {I64V(7, 1, 1, 0, 1, 1, 0, 1), SCALAR_I64(0)}, NULL, 0},
    /* Resize: scales (x2, x1.5 up; x1.7 / x2 nearest), sizes (a downsampled axis), a tf_crop_and_resize
     * roi reaching outside X on both sides (extrapolated taps), and each one's gradient */
    {SC_OP_RESIZE, "resize_linear", 4, 1, {F32(2, 3, 5, 7), ABSENT, F32V(4, 1000, 1000, 2000, 1500), ABSENT}, a_rs_linear, 1e-6},
    {SC_OP_RESIZE, "resize_nearest", 4, 1, {F32(2, 3, 6, 5), ABSENT, F32V(4, 1000, 1000, 1700, 2000), ABSENT}, a_rs_nearest, 1e-6},
    {SC_OP_RESIZE, "resize_nearest_pt", 4, 1, {F32(2, 3, 6, 5), ABSENT, ABSENT, I64V(4, 2, 3, 4, 11)}, a_rs_nearest_hp, 1e-6},
    {SC_OP_RESIZE, "resize_sizes_align", 4, 1, {F32(1, 2, 4, 9), ABSENT, ABSENT, I64V(4, 1, 2, 7, 4)}, a_rs_align, 1e-6},
    {SC_OP_RESIZE, "resize_crop", 4, 1,
     {F32(1, 2, 6, 6), F32V(8, 0, 0, -200, 100, 1000, 1000, 1100, 900), ABSENT, I64V(4, 1, 2, 5, 4)}, a_rs_crop, 1e-6},
    {SC_OP_RESIZE_GRAD, "resize_grad_linear", 5, 1,
     {F32(2, 3, 10, 10), F32(2, 3, 5, 7), ABSENT, F32V(4, 1000, 1000, 2000, 1500), ABSENT}, a_rs_linear, 1e-5},
    {SC_OP_RESIZE_GRAD, "resize_grad_nearest", 5, 1,
     {F32(2, 3, 10, 10), F32(2, 3, 6, 5), ABSENT, F32V(4, 1000, 1000, 1700, 2000), ABSENT}, a_rs_nearest, 1e-5},
    {SC_OP_RESIZE_GRAD, "resize_grad_align", 5, 1,
     {F32(1, 2, 7, 4), F32(1, 2, 4, 9), ABSENT, ABSENT, I64V(4, 1, 2, 7, 4)}, a_rs_align, 1e-5},
    {SC_OP_RESIZE_GRAD, "resize_grad_crop", 5, 1,
     {F32(1, 2, 5, 4), F32(1, 2, 6, 6), F32V(8, 0, 0, -200, 100, 1000, 1000, 1100, 900), ABSENT, I64V(4, 1, 2, 5, 4)}, a_rs_crop, 1e-5},
    /* gradient only: dX over several blocks, three interpolated axes (the gather's odometer and
     * weight products), a roi reaching outside X on both resized axes */
    {SC_OP_RESIZE_GRAD, "resize_grad_up2", 5, 1,
     {F32(2, 3, 14, 18), F32(2, 3, 7, 9), ABSENT, F32V(4, 1000, 1000, 2000, 2000), ABSENT}, a_rs_align, 1e-5},
    {SC_OP_RESIZE_GRAD, "resize_grad_3axes", 5, 1,
     {F32(2, 4, 7, 12), F32(2, 3, 4, 5), ABSENT, F32V(4, 1000, 1500, 1750, 2500), ABSENT}, a_rs_linear, 1e-5},
    {SC_OP_RESIZE_GRAD, "resize_grad_crop2", 5, 1,
     {F32(2, 3, 11, 13), F32(2, 3, 7, 9), F32V(8, 0, 0, -300, -100, 1000, 1000, 1200, 1400), ABSENT, I64V(4, 2, 3, 11, 13)},
     a_rs_crop, 1e-5},
    {SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS, "sce", 2, 2, {F32(6, 5), {SC_I64, 1, {6}, K_LABELS, {5}}}, a_sce, 1e-4},
    {SC_OP_SOFTMAX_CROSS_ENTROPY_LOSS_GRAD, "sce_grad", 3, 1, {F32(1), F32(6, 5), {SC_I64, 1, {6}, K_LABELS, {5}}}, a_sce, 1e-4},
    {SC_OP_RELU_GRAD, "relu_grad", 2, 1, {F32(50), F32(50)}, NULL, 1e-6},
    {SC_OP_GELU_GRAD, "gelu_grad", 2, 1, {F32(50), F32(50)}, NULL, 1e-5},
    {SC_OP_DROPOUT, "dropout_train", 3, 2, {F32(1000), SCALAR_F32(0), {SC_BOOL, 0, {0}, K_INTS, {1}}}, a_dropout, 1e-6},
    /* logic, comparisons on integers (random floats are never equal), copies and shape ops */
    {SC_OP_NOT, "not", 1, 1, {BOOLS(4, 6)}, NULL, 1e-6},
    {SC_OP_AND, "and_bcast", 2, 1, {BOOLS(4, 6), BOOLS(6)}, NULL, 1e-6},
    {SC_OP_OR, "or_bcast", 2, 1, {BOOLS(4, 1), BOOLS(1, 6)}, NULL, 1e-6},
    {SC_OP_EQUAL, "equal", 2, 1, {I64V(6, 1, 2, 3, 4, 5, 6), I64V(6, 1, 0, 3, 0, 5, 0)}, NULL, 1e-6},
    {SC_OP_IDENTITY, "identity", 1, 1, {F32(3, 5)}, NULL, 1e-6},
    {SC_OP_RESHAPE, "reshape", 2, 1, {F32(2, 3, 4), I64V(2, 4, -1)}, NULL, 1e-6},
    {SC_OP_FLATTEN, "flatten", 1, 1, {F32(2, 3, 4)}, a_axis1, 1e-6},
    {SC_OP_SQUEEZE, "squeeze", 2, 1, {F32(2, 1, 4), I64V(1, 1)}, NULL, 1e-6},
    {SC_OP_UNSQUEEZE, "unsqueeze", 2, 1, {F32(2, 4), I64V(1, 1)}, NULL, 1e-6},
    {SC_OP_SHAPE, "shape", 1, 1, {F32(2, 3, 4)}, NULL, 1e-6},
    {SC_OP_CONSTANT_OF_SHAPE, "constant_of_shape", 1, 1, {I64V(2, 3, 4)}, a_fill, 1e-6},
    {SC_OP_RANGE, "range", 3, 1, {SCALAR_I64(2), SCALAR_I64(20), SCALAR_I64(3)}, NULL, 1e-6},
    {SC_OP_SGD_UPDATE, "sgd", 4, 2, {F32(40), F32(40), F32(40), SCALAR_F32(0)}, a_sgd, 1e-6},
    {SC_OP_ADAMW_UPDATE, "adamw", 6, 3, {F32(40), F32(40), F32(40), POS(40), SCALAR_F32(0), {SC_I64, 0, {0}, K_INTS, {3}}}, a_adamw, 1e-5},
    {SC_OP_ALL_REDUCE, "all_reduce", 3, 3, {F32(40), F32(3, 5), F32(7)}, a_all_reduce, 0},
    {SC_OP_REDUCE, "reduce", 2, 2, {F32(40), F32(3, 5)}, a_all_reduce, 0},
    {SC_OP_BROADCAST, "broadcast", 2, 2, {F32(6), F32(2, 9)}, a_all_reduce, 0},
    /* 16-bit floats (mixed precision): casts both ways, then ops on widened copies */
    {SC_OP_CAST, "cast_f32_bf16", 1, 1, {F32(300)}, a_cast_bf16, 1e-6},
    {SC_OP_CAST, "cast_f32_f16", 1, 1, {F32(300)}, a_cast_f16, 1e-6},
    {SC_OP_CAST, "cast_f64_f16", 1, 1, {F64(300)}, a_cast_f16, 1e-6},
    {SC_OP_CAST, "cast_bf16_f32", 1, 1, {BF16(300)}, a_cast_f32, 1e-6},
    {SC_OP_CAST, "cast_f16_bf16", 1, 1, {F16(300)}, a_cast_bf16, 1e-6},
    {SC_OP_CONSTANT_OF_SHAPE, "constant_of_shape_bf16", 1, 1, {I64V(2, 3, 4)}, a_fill_bf16, 1e-6},
    {SC_OP_RELU, "relu_bf16", 1, 1, {BF16(3, 5, 7)}, NULL, 1e-6},
    {SC_OP_ADD, "add_bcast_bf16", 2, 1, {BF16(2, 3, 4, 5), BF16(3, 1, 1)}, NULL, 1e-6},
    {SC_OP_MUL, "mul_f16", 2, 1, {F16(4, 1), F16(1, 6)}, NULL, 1e-6},
    {SC_OP_GELU, "gelu_bf16", 1, 1, {BF16(300)}, NULL, BF16_ULP},
    {SC_OP_TRANSPOSE, "transpose_f16", 1, 1, {F16(3, 4, 5)}, a_perm, 1e-6},
    {SC_OP_CONCAT, "concat_bf16", 2, 1, {BF16(2, 3, 4), BF16(2, 5, 4)}, a_axis1, 1e-6},
    {SC_OP_GATHER, "gather_bf16", 2, 1, {BF16(10, 4), I64V(5, 3, -1, 0, 3, 9)}, NULL, 1e-6},
    {SC_OP_SHAPE, "shape_bf16", 1, 1, {BF16(2, 3, 4)}, NULL, 1e-6},
    {SC_OP_SOFTMAX, "softmax_bf16", 1, 1, {BF16(4, 7, 5)}, a_axis1, BF16_ULP},
    {SC_OP_REDUCE_SUM, "reduce_sum_f16", 2, 1, {F16(4, 5, 300), I64V(2, 0, 2)}, a_reduce, F16_ULP},
    {SC_OP_GEMM, "gemm_bf16", 3, 1, {BF16(7, 33), BF16(5, 33), BF16(5)}, a_gemm, BF16_ULP},
    {SC_OP_MATMUL, "matmul_batched_f16", 2, 1, {F16(2, 3, 4, 16), F16(3, 16, 5)}, NULL, F16_ULP},
    {SC_OP_MATMUL, "matmul_partial_bf16", 2, 1, {BF16(2, 1, 4, 16), BF16(1, 3, 16, 5)}, NULL, BF16_ULP},
    {SC_OP_GEMM, "gemm_f16_mixed_c", 3, 1, {F16(7, 33), F16(5, 33), F32(5)}, a_gemm, F16_ULP}, /* widened */
    {SC_OP_CONV, "conv_bf16", 3, 1, {BF16(2, 3, 9, 9), BF16(4, 3, 3, 3), BF16(4)}, a_conv, BF16_ULP},
    {SC_OP_CONV_GRAD, "conv_grad_bf16", 3, 3, {BF16(2, 4, 5, 9), BF16(2, 3, 9, 9), BF16(4, 3, 3, 3)}, a_conv, BF16_ULP},
    /* cuDNN's 16-bit convolutions on CUDA (a bias too; not dB) */
    {SC_OP_CONV, "conv_bf16_native", 2, 1, {BF16(2, 3, 9, 9), BF16(4, 3, 3, 3)}, a_conv, BF16_ULP},
    {SC_OP_CONV, "conv_bias_f16_native", 3, 1, {F16(2, 3, 9, 9), F16(4, 3, 3, 3), F16(4)}, a_conv, F16_ULP},
    {SC_OP_CONV, "conv_f16_native", 2, 1, {F16(2, 3, 9, 9), F16(4, 3, 3, 3)}, a_conv, F16_ULP},
    {SC_OP_CONV_GRAD, "conv_grad_bf16_native", 3, 2, {BF16(2, 4, 5, 9), BF16(2, 3, 9, 9), BF16(4, 3, 3, 3)}, a_conv, BF16_ULP},
    {SC_OP_CONV_GRAD, "conv_grad_f16_native", 3, 2, {F16(2, 4, 5, 9), F16(2, 3, 9, 9), F16(4, 3, 3, 3)}, a_conv, F16_ULP},
    {SC_OP_CONV_GRAD, "conv_grad_bias_bf16_native", 3, 3, {BF16(2, 4, 5, 9), BF16(2, 3, 9, 9), BF16(4, 3, 3, 3)}, a_conv, BF16_ULP},
    {SC_OP_CONV_GRAD, "conv_grad_bias_f16_native", 3, 3, {F16(2, 4, 5, 9), F16(2, 3, 9, 9), F16(4, 3, 3, 3)}, a_conv, F16_ULP},
    /* 16-bit, but pads cuDNN cannot take: cu_conv widens them itself */
    {SC_OP_CONV, "conv_bf16_asym", 2, 1, {BF16(2, 4, 8, 8), BF16(6, 2, 2, 3)}, a_conv_asym, BF16_ULP},
    {SC_OP_CONV_GRAD, "conv_grad_f16_asym", 3, 2, {F16(2, 6, 8, 7), F16(2, 4, 8, 8), F16(6, 2, 2, 3)}, a_conv_asym, F16_ULP},
};

/* Scalars given as K_INTS on f32 inputs: clip bounds, lr, ratio (by case name and input). */
static double f32_scalar_value(const op_case *oc, int k) {
    if (oc->op == SC_OP_CLIP) return k == 1 ? -0.3 : 0.4;
    if (oc->op == SC_OP_DROPOUT) return 0.3;
    return 0.01; /* learning rates */
}

/* A random float input's element i (f32, f64, or rounded to bf16 / f16). */
static void put_float(sc_tensor *t, int64_t i, double v) {
    switch (t->desc.dtype) {
    case SC_F64: ((double *)t->data)[i] = v; break;
    case SC_BF16: ((uint16_t *)t->data)[i] = sc_f32_to_bf16((float)v); break;
    case SC_F16: ((uint16_t *)t->data)[i] = sc_f64_to_f16(v); break;
    default: ((float *)t->data)[i] = (float)v; break;
    }
}

static void fill_input(const op_case *oc, int k, sc_tensor *t) {
    const in_spec *s = &oc->in[k];
    int64_t n = sc_desc_numel(&t->desc);
    for (int64_t i = 0; i < n; i++) {
        switch (s->kind) {
        case K_RAND: put_float(t, i, 4 * urand() - 2); break;
        case K_POS: put_float(t, i, 0.1 + 2 * urand()); break;
        case K_LABELS: ((int64_t *)t->data)[i] = (int64_t)(urand() * (double)s->ints[0]) % s->ints[0]; break;
        case K_BOOL: ((uint8_t *)t->data)[i] = urand() < 0.5; break;
        case K_F32V: ((float *)t->data)[i] = (float)s->ints[i] / 1000.0f; break;
        case K_INTS:
            if (s->t == SC_I64) ((int64_t *)t->data)[i] = s->ints[i];
            else if (s->t == SC_BOOL) ((uint8_t *)t->data)[i] = (uint8_t)s->ints[i];
            else ((float *)t->data)[i] = (float)f32_scalar_value(oc, k);
            break;
        }
    }
}

static double to_double(const sc_tensor *t, int64_t i) {
    switch (t->desc.dtype) {
    case SC_F32: return ((const float *)t->data)[i];
    case SC_F64: return ((const double *)t->data)[i];
    case SC_BF16: return sc_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case SC_F16: return sc_f16_to_f32(((const uint16_t *)t->data)[i]);
    case SC_I64: return (double)((const int64_t *)t->data)[i];
    case SC_I32: return ((const int32_t *)t->data)[i];
    case SC_BOOL: case SC_U8: return ((const uint8_t *)t->data)[i];
    default: return NAN;
    }
}

/* A tensor's place in the test arena: rounded up to 256 bytes, then 256 bytes of guard. */
static int64_t slot_bytes(int64_t b) { return (b + 255) / 256 * 256 + 256; }

/* On the CUDA emulator (tests/cuda_emu) under AddressSanitizer, device memory is host memory:
 * poisoning the bytes between tensors makes any kernel read or write outside its tensors an ASan
 * report naming the kernel, what compute-sanitizer's memcheck does per allocation on a GPU. */
#if defined(SCORCH_CUDA_EMU) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
static void guard_after(void *p, int64_t b) { ASAN_POISON_MEMORY_REGION((char *)p + b, (size_t)(slot_bytes(b) - b)); }
static void unguard(void *base, int64_t total) { ASAN_UNPOISON_MEMORY_REGION(base, (size_t)total); }
#else
static void guard_after(void *p, int64_t b) { (void)p, (void)b; }
static void unguard(void *base, int64_t total) { (void)base, (void)total; }
#endif

/* Runs the node again with other bytes in its outputs (and the workspace as the first run left
 * it): the outputs must be bit-identical to the first run's. A recomputation in a checkpointing
 * plan is exactly this, so an op that reads its output before writing it, or reads workspace it
 * did not write, breaks the plan invariant on the GPU. Ops that update inputs in place are
 * skipped (their inputs changed). */
static sc_status rerun_same_bits(sc_backend *be, const op_case *oc, const sc_node *node, sc_tensor *dev_in,
                                 sc_tensor *dev_out, const sc_tensor *first) {
    for (int k = 0; k < oc->n_out; k++)
        if (sc_op_inplace_input(oc->op, k) >= 0) return SC_OK;
    int64_t t = 0;
    sc_status st = SC_OK;
    for (int k = 0; k < oc->n_out && !st; k++) {
        int64_t b = sc_desc_bytes(&dev_out[k].desc);
        if (!dev_out[k].data || b <= 0) continue;
        void *junk = malloc((size_t)b);
        memset(junk, 0x5a, (size_t)b);
        st = be->iface->copy_h2d(be, dev_out[k].data, junk, b, &t);
        if (!st) st = be->iface->wait(be, t);
        free(junk);
    }
    if (!st) st = be->iface->run_node(be, node, dev_in, oc->n_in, dev_out, oc->n_out);
    if (!st) st = be->iface->synchronize(be);
    for (int k = 0; k < oc->n_out && !st; k++) {
        int64_t b = sc_desc_bytes(&dev_out[k].desc);
        if (!dev_out[k].data || b <= 0 || !first[k].data) continue;
        void *again = malloc((size_t)b);
        st = be->iface->copy_d2h(be, again, dev_out[k].data, b, &t);
        if (!st) st = be->iface->wait(be, t);
        CHECK(st || memcmp(again, first[k].data, (size_t)b) == 0, "%s: output %d differs when run again", oc->what, k);
        free(again);
    }
    return st;
}

/* Inputs whose block the planner may give to output 0 (sc_op_donor_input_ok, same dtype and
 * shape): for each, the op runs with its output written over a copy of that input and must give
 * the out-of-place bits, on the CPU (ref) and, with a backend, on the device (first). */
static bool donor_applies(const op_case *oc, const sc_tensor *in, const sc_tensor *out0, int k) {
    return in[k].data && sc_op_donor_input_ok(oc->op, k) && in[k].desc.dtype == out0->desc.dtype &&
           (sc_desc_same_shape(&in[k].desc, &out0->desc) ||
            (sc_op_is_view(oc->op) && sc_desc_bytes(&in[k].desc) == sc_desc_bytes(&out0->desc)));
}

static void inplace_cpu_check(const op_case *oc, const sc_node *node, const sc_tensor *in, const sc_tensor *ref) {
    for (int k = 0; k < oc->n_in; k++) {
        if (!donor_applies(oc, in, &ref[0], k)) continue;
        int64_t b = sc_desc_bytes(&in[k].desc);
        sc_tensor args[8], out[4];
        memcpy(args, in, sizeof(sc_tensor) * (size_t)oc->n_in);
        args[k].data = malloc((size_t)(b > 0 ? b : 1));
        memcpy(args[k].data, in[k].data, (size_t)b);
        out[0] = (sc_tensor){ref[0].desc, args[k].data};
        sc_status st = cpu_run_node(node, args, oc->n_in, out, 1);
        CHECK(!st && memcmp(out[0].data, ref[0].data, (size_t)b) == 0, "%s: CPU output written over input %d differs%s%s",
              oc->what, k, st ? ": " : "", st ? sc_status_message(st) : "");
        sc_status_free(st);
        free(args[k].data);
    }
}

static sc_status inplace_device_check(sc_backend *be, const op_case *oc, const sc_node *node, const sc_tensor *in,
                                      sc_tensor *dev_in, const sc_tensor *dev_out, const sc_tensor *first) {
    sc_status st = SC_OK;
    for (int k = 0; k < oc->n_in && !st; k++) {
        if (!donor_applies(oc, in, &dev_out[0], k) || !first[0].data) continue;
        int64_t b = sc_desc_bytes(&in[k].desc), t = 0;
        sc_tensor out[4];
        memcpy(out, dev_out, sizeof(sc_tensor) * (size_t)oc->n_out);
        out[0].data = dev_in[k].data;
        st = be->iface->run_node(be, node, dev_in, oc->n_in, out, oc->n_out);
        void *got = malloc((size_t)(b > 0 ? b : 1));
        if (!st) st = be->iface->copy_d2h(be, got, out[0].data, b, &t);
        if (!st) st = be->iface->wait(be, t);
        CHECK(st || memcmp(got, first[0].data, (size_t)b) == 0, "%s: device output written over input %d differs", oc->what, k);
        if (!st) st = be->iface->copy_h2d(be, dev_in[k].data, in[k].data, b, &t); /* restore the input */
        if (!st) st = be->iface->wait(be, t);
        free(got);
    }
    return st;
}

/* One op case: graph -> shapes -> CPU reference -> CUDA -> compare every output. be NULL (no GPU):
 * the CPU half alone, so a malformed case fails here rather than in a GPU session. */
/* The "_native" 16-bit convolutions must reach cuDNN's 16-bit path (cu_nn_conv.c), not the widened
 * f32 copies, where this build has cuDNN: a fallback would pass the comparison unnoticed. Checked
 * twice: the dispatcher hands the call over as it is, and the run (given the count of widened runs
 * before it) widened nothing inside the kernel either. */
static void native_check(const op_case *oc, const sc_node *node, const sc_tensor *in, sc_tensor *out,
                         int64_t widened_before) {
    if (!strstr(oc->what, "_native") || !backend_cuda_has_cudnn()) return;
    cu_call call = {.node = node, .in = in, .n_in = oc->n_in, .out = out, .n_out = oc->n_out};
    CHECK(!cu_needs_widening(&call), "%s: runs on widened f32 copies, not on cuDNN's 16-bit path", oc->what);
    CHECK(cu_widened_runs() == widened_before, "%s: the kernel ran %lld calls on widened f32 copies", oc->what,
          (long long)(cu_widened_runs() - widened_before));
}

static void run_case(sc_backend *be, const op_case *oc) {
    sc_graph g;
    graph_init(&g);
    sc_status st = SC_OK;
    int in_ids[8], out_ids[4];
    char name[64];
    for (int k = 0; k < oc->n_in; k++) {
        if (oc->in[k].kind == K_ABSENT) {
            in_ids[k] = -1;
            continue;
        }
        snprintf(name, sizeof name, "in%d", k);
        sc_desc d = sc_desc_make(oc->in[k].t, oc->in[k].rank, oc->in[k].dims);
        bool cst = oc->in[k].kind == K_INTS || oc->in[k].kind == K_F32V;
        in_ids[k] = graph_add_value(&g, name, cst ? SC_VALUE_CONST : SC_VALUE_INPUT, &d, &st);
        SC_ASSERT(in_ids[k] >= 0 && !graph_alloc_data(&g, in_ids[k]));
        sc_tensor t = {d, g.values[in_ids[k]].data};
        fill_input(oc, k, &t);
    }
    for (int k = 0; k < oc->n_out; k++) {
        snprintf(name, sizeof name, "out%d", k);
        out_ids[k] = graph_add_value(&g, name, SC_VALUE_ACT, NULL, &st);
    }
    int nid = graph_add_node(&g, oc->op, oc->what, in_ids, oc->n_in, out_ids, oc->n_out, &st);
    SC_ASSERT(nid >= 0);
    sc_node *node = &g.nodes[nid];
    if (oc->attrs) oc->attrs(graph_node_attrs_mut(&g, node));
    st = sc_shape_fns[oc->op](&g, node);
    CHECK(!st, "%s: shape inference: %s", oc->what, st ? sc_status_message(st) : "");
    if (st) {
        sc_status_free(st);
        graph_free(&g);
        return;
    }
    sc_tensor in[8], ref[4], dev_in[8], dev_out[4], first[4];
    memset(first, 0, sizeof first);
    int64_t total = 0;
    for (int k = 0; k < oc->n_in; k++) {
        in[k] = (sc_tensor){in_ids[k] >= 0 ? g.values[in_ids[k]].desc : (sc_desc){0}, in_ids[k] >= 0 ? g.values[in_ids[k]].data : NULL};
        total += slot_bytes(sc_desc_bytes(&in[k].desc));
    }
    for (int k = 0; k < oc->n_out; k++) {
        ref[k].desc = g.values[out_ids[k]].desc;
        total += slot_bytes(sc_desc_bytes(&ref[k].desc));
    }
    /* in-place optimizers: the CPU updates its own copies of W, M, V */
    sc_tensor cpu_in[8];
    for (int k = 0; k < oc->n_in; k++) {
        cpu_in[k] = in[k];
        if (!in[k].data) continue;
        int64_t b = sc_desc_bytes(&in[k].desc);
        cpu_in[k].data = malloc((size_t)(b > 0 ? b : 1));
        memcpy(cpu_in[k].data, in[k].data, (size_t)b);
    }
    for (int k = 0; k < oc->n_out; k++) {
        int a = sc_op_inplace_input(oc->op, k);
        ref[k].data = a >= 0 ? cpu_in[a].data : malloc((size_t)(slot_bytes(sc_desc_bytes(&ref[k].desc)) + 8));
    }
    cpu_set_dropout_rng(1234, 5);
    st = cpu_run_node(node, cpu_in, oc->n_in, ref, oc->n_out);
    CHECK(!st, "%s: CPU: %s", oc->what, st ? sc_status_message(st) : "");
    if (!st) inplace_cpu_check(oc, node, in, ref);
    sc_status_free(st);
    void *base = NULL;
    st = be ? be->iface->arena_create(be, total, &base) : SC_OK;
    CHECK(!st, "%s: arena: %s", oc->what, st ? sc_status_message(st) : "");
    if (!st && be) {
        char *p = base;
        int64_t t = 0;
        for (int k = 0; k < oc->n_in && !st; k++) {
            dev_in[k] = in[k];
            if (!in[k].data) continue;
            dev_in[k].data = p;
            int64_t b = sc_desc_bytes(&in[k].desc);
            if (b > 0) st = be->iface->copy_h2d(be, p, in[k].data, b, &t);
            guard_after(p, b);
            p += slot_bytes(b);
        }
        for (int k = 0; k < oc->n_out; k++) {
            int a = sc_op_inplace_input(oc->op, k);
            dev_out[k].desc = ref[k].desc;
            dev_out[k].data = a >= 0 ? dev_in[a].data : p;
            if (a >= 0) continue;
            guard_after(p, sc_desc_bytes(&ref[k].desc));
            p += slot_bytes(sc_desc_bytes(&ref[k].desc));
        }
        if (!st && t) st = be->iface->wait(be, t);
        int64_t widened_before = cu_widened_runs();
        if (!st) st = be->iface->run_node(be, node, dev_in, oc->n_in, dev_out, oc->n_out);
        if (!st) st = be->iface->synchronize(be);
        if (!st) native_check(oc, node, dev_in, dev_out, widened_before);
        CHECK(!st, "%s: CUDA: %s", oc->what, st ? sc_status_message(st) : "");
        for (int k = 0; k < oc->n_out && !st; k++) {
            int64_t b = sc_desc_bytes(&ref[k].desc), n = sc_desc_numel(&ref[k].desc);
            sc_tensor got = {ref[k].desc, malloc((size_t)(b > 0 ? b : 1))};
            int64_t x = 0;
            st = be->iface->copy_d2h(be, got.data, dev_out[k].data, b, &x);
            if (!st && b > 0) st = be->iface->wait(be, x);
            double worst = 0;
            int64_t at = -1;
            for (int64_t i = 0; !st && i < n; i++) {
                double r = to_double(&ref[k], i), v = to_double(&got, i);
                double err = fabs(v - r) / (1 + fabs(r));
                if (isnan(r) != isnan(v)) err = INFINITY;
                if (err > worst) worst = err, at = i;
            }
            CHECK(worst <= oc->tol, "%s: output %d element %lld: cuda %.9g, cpu %.9g (error %.3g > %.1g)", oc->what, k,
                  (long long)at, at >= 0 ? to_double(&got, at) : 0.0, at >= 0 ? to_double(&ref[k], at) : 0.0, worst, oc->tol);
            first[k] = got;
        }
        if (!st) st = rerun_same_bits(be, oc, node, dev_in, dev_out, first);
        CHECK(!st, "%s: rerun: %s", oc->what, st ? sc_status_message(st) : "");
        if (!st) st = inplace_device_check(be, oc, node, in, dev_in, dev_out, first);
        CHECK(!st, "%s: in place: %s", oc->what, st ? sc_status_message(st) : "");
        for (int k = 0; k < oc->n_out; k++) free(first[k].data);
        sc_status_free(st);
        unguard(base, total);
        be->iface->arena_destroy(be);
    }
    for (int k = 0; k < oc->n_out; k++)
        if (sc_op_inplace_input(oc->op, k) < 0) free(ref[k].data);
    for (int k = 0; k < oc->n_in; k++) free(cpu_in[k].data);
    graph_free(&g);
}

/* 3 training steps of a plan_test_graphs model on the CPU and on the CUDA backend. */
static void run_training(pt_kind kind) {
    pt_model a, b;
    pt_build(&a, kind);
    pt_build(&b, kind);
    sc_plan_options o = {0};
    sc_plan p;
    sc_status st = plan_build(&a.g, &a.tg, &o, &p);
    SC_ASSERT(!st);
    sc_backend *cpu = NULL, *gpu = NULL;
    sc_plan_session *sa = NULL, *sb = NULL;
    st = backend_cpu_create(0, &cpu);
    if (!st) st = backend_cuda_create(0, &gpu);
    if (!st) st = plan_session_create(cpu, &a.g, &p, &sa);
    if (!st) st = plan_session_create(gpu, &b.g, &p, &sb);
    for (int step = 1; !st && step <= 3; step++) {
        pt_feeds f;
        pt_feeds_fill(&a, step, &f);
        sc_tensor oa[16], ob[16];
        cpu_set_dropout_rng(99, (uint64_t)step);
        st = plan_session_step(sa, f.t, oa);
        if (!st) st = plan_session_step(sb, f.t, ob);
        if (st) break;
        for (int i = 0; i < a.g.n_outputs; i++) {
            int64_t n = sc_desc_numel(&oa[i].desc);
            for (int64_t j = 0; j < n; j++) {
                double r = to_double(&oa[i], j), v = to_double(&ob[i], j);
                CHECK(fabs(v - r) <= 1e-4 * (1 + fabs(r)), "%s step %d output %s[%lld]: cuda %.9g cpu %.9g", pt_kind_name(kind),
                      step, a.g.values[a.g.outputs[i]].name, (long long)j, v, r);
            }
            sc_tensor_free_data(&oa[i]);
            sc_tensor_free_data(&ob[i]);
        }
    }
    bool finite = false;
    if (!st) st = plan_session_state_finite(sb, &finite);
    CHECK(st || finite, "%s: the state on the device is not finite after 3 steps", pt_kind_name(kind));
    if (!st) st = plan_exec_sync_params_to_host(sa);
    if (!st) st = plan_exec_sync_params_to_host(sb);
    CHECK(!st, "%s training: %s", pt_kind_name(kind), st ? sc_status_message(st) : "");
    sc_status_free(st);
    for (int v = 0; v < a.g.n_values && !st; v++) {
        const sc_value *x = &a.g.values[v], *y = &b.g.values[v];
        if (x->kind != SC_VALUE_PARAM && x->kind != SC_VALUE_OPT_STATE) continue;
        for (int64_t j = 0; j < sc_desc_numel(&x->desc); j++) {
            double r = ((const float *)x->data)[j], g = ((const float *)y->data)[j];
            if (fabs(g - r) > 1e-4 * (1 + fabs(r))) {
                CHECK(0, "%s: '%s'[%lld] cuda %.9g cpu %.9g after 3 steps", pt_kind_name(kind), x->name, (long long)j, g, r);
                break;
            }
        }
    }
    printf("training %-8s 3 steps compared\n", pt_kind_name(kind));
    plan_session_free(sa);
    plan_session_free(sb);
    backend_destroy(cpu);
    backend_destroy(gpu);
    plan_free(&p);
    graph_free(&a.g);
    graph_free(&b.g);
}

/* 4. The state's finite check on the device (the backend's all_finite, backends/backend.h): f32 long
 * enough for many blocks, f64, f16 and bf16 holding their largest finite value, a subnormal and zeros
 * pass, as does an i32 tensor with an Inf's bits; an Inf or NaN put at the end of any float tensor
 * is found. */
static void test_all_finite(void) {
    enum { N = 300001, K = 5 };
    static const sc_dtype dt[K] = {SC_F32, SC_F64, SC_F16, SC_BF16, SC_I32};
    static const int64_t n[K] = {N, 3, 3, 3, 2};
    static const uint64_t big[K] = {0x7f7fffffu, 0x7fefffffffffffffull, 0x7bffu, 0x7f7fu, 0x7f800000u};
    static const uint64_t bad[K] = {0x7fc00000u, 0xfff0000000000000ull, 0x7c00u, 0x7fc1u, 0};
    sc_backend *be = NULL;
    sc_status st = backend_cuda_create(0, &be);
    int64_t off[K + 1] = {0};
    for (int k = 0; k < K; k++) off[k + 1] = off[k] + (n[k] * (int64_t)sc_dtype_size(dt[k]) + 63) / 64 * 64;
    char *base = NULL, *host = calloc((size_t)off[K], 1);
    if (!st) st = be->iface->arena_create(be, off[K], (void **)&base);
    sc_tensor t[K];
    for (int k = 0; k < K && host; k++) {
        t[k] = (sc_tensor){.desc = {.dtype = dt[k], .rank = 1, .dims = {n[k]}}, .data = base + off[k]};
        size_t es = sc_dtype_size(dt[k]);
        memcpy(host + off[k], &big[k], es); /* little-endian: the low bytes of the pattern */
        uint64_t sub = 1;
        memcpy(host + off[k] + es, &sub, es);
    }
    int64_t id = 0;
    if (!st && host) st = be->iface->copy_h2d(be, base, host, off[K], &id);
    if (!st) st = be->iface->wait(be, id);
    bool finite = false;
    if (!st) st = be->iface->all_finite(be, t, K, &finite);
    CHECK(!st && finite, "all_finite: finite tensors reported otherwise (%s)", st ? sc_status_message(st) : "");
    for (int k = 0; k < K - 1 && !st; k++) {
        size_t es = sc_dtype_size(dt[k]);
        char *last = host + off[k] + (size_t)(n[k] - 1) * es;
        memcpy(last, &bad[k], es);
        st = be->iface->copy_h2d(be, base + (last - host), last, (int64_t)es, &id);
        if (!st) st = be->iface->wait(be, id);
        finite = true;
        if (!st) st = be->iface->all_finite(be, t, K, &finite);
        CHECK(!st && !finite, "all_finite: a non-finite %s at the end of %lld elements not found", sc_dtype_name(dt[k]),
              (long long)n[k]);
        memset(last, 0, es);
        if (!st) st = be->iface->copy_h2d(be, base + (last - host), last, (int64_t)es, &id);
        if (!st) st = be->iface->wait(be, id);
    }
    CHECK(!st, "all_finite: %s", st ? sc_status_message(st) : "");
    sc_status_free(st);
    printf("all_finite          %s\n", failures ? "FAILED" : "ok");
    free(host);
    backend_destroy(be);
}

int main(void) {
    for (int op = 0; op < SC_OP_COUNT; op++)
        CHECK(cu_kernels[op] || sc_kernel_missing_reason((sc_op)op), "op %s has no CUDA kernel and no reason",
              sc_op_name((sc_op)op));
    printf("CUDA backend: convolutions on %s\n", backend_cuda_has_cudnn() ? "cuDNN" : "im2col + cuBLAS");
    char why[256];
    if (!backend_cuda_available(why, sizeof why)) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(NULL, &cases[i]);
        printf("%zu cases: shape inference and the CPU reference %s\n", sizeof cases / sizeof cases[0],
               failures ? "FAILED" : "ran");
        printf("SKIP: no CUDA device (%s)\n", why);
        return failures ? 1 : 77;
    }
    sc_backend *be = NULL;
    sc_status st = backend_cuda_create(0, &be);
    CHECK(!st, "backend_cuda_create: %s", st ? sc_status_message(st) : "");
    if (st) return 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int before = failures;
        run_case(be, &cases[i]);
        printf("%-20s %s\n", cases[i].what, failures == before ? "ok" : "FAILED");
    }
    backend_destroy(be);
    run_training(PT_MLP);
    run_training(PT_RESIDUAL);
    test_all_finite();
    printf(failures ? "%d failure(s)\n" : "all CUDA checks passed\n", failures);
    return failures ? 1 : 0;
}
