/* Typed attribute structs, one per op family, parsed once at import (docs/STYLE.md habit 3).
 *
 * The importer fills every field, applying ONNX defaults for absent attributes, so kernels and shape
 * functions never look at raw ONNX attributes. Each member's comment names the ops
 * that use it; ops without attributes leave the union zeroed.
 *
 * Parameters that later opsets moved to inputs (Squeeze/Unsqueeze/Reduce axes, Split sizes, Pad
 * pads, Clip min/max, Dropout ratio) are NOT here: the importer turns the attribute form into a
 * constant input, so downstream code reads them from inputs only.
 */
#ifndef SC_ATTRS_H
#define SC_ATTRS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#define SC_MAX_SPATIAL 3

typedef enum { SC_AUTO_PAD_NOTSET, SC_AUTO_PAD_SAME_UPPER, SC_AUTO_PAD_SAME_LOWER, SC_AUTO_PAD_VALID } sc_auto_pad;

/* An activation a Conv applies to its output (sc_window_attrs.fused_act; after the sum when there
 * is one): relu max(y, 0) (capped by fused_relu_max), sigmoid 1 / (1 + e^-y), swish (SiLU)
 * y sigmoid(y), hard swish y max(0, min(1, y / 6 + 1/2)) (ONNX HardSwish). */
typedef enum { SC_FUSED_NONE, SC_FUSED_RELU, SC_FUSED_SIGMOID, SC_FUSED_SWISH, SC_FUSED_HARD_SWISH } sc_fused_act;

/* Conv, MaxPool, AveragePool. n_spatial comes from kernel_shape when given, else from the weight's
 * rank (Conv) at shape inference. pads is [x1_begin, x2_begin, ..., x1_end, x2_end, ...] as in ONNX.
 * has_kernel_shape is false for Conv without the attribute (taken from the weight). */
typedef struct {
    int n_spatial;
    bool has_kernel_shape;
    int64_t kernel_shape[SC_MAX_SPATIAL];
    int64_t strides[SC_MAX_SPATIAL];   /* default 1 */
    int64_t dilations[SC_MAX_SPATIAL]; /* default 1 */
    int64_t pads[2 * SC_MAX_SPATIAL];  /* default 0 */
    sc_auto_pad auto_pad;
    int64_t group;          /* Conv only; default 1 */
    bool ceil_mode;         /* pools only */
    bool count_include_pad; /* AveragePool only */
    int64_t storage_order;  /* MaxPool's optional Indices output; 0 = row major */
    sc_fused_act fused_act; /* added (perf helper): Conv only, an activation applied to the output;
                               set by graph_fuse_inference (graph/pass_fuse.c), never by import */
    float fused_relu_max;   /* with SC_FUSED_RELU: > 0 also caps the output there (a fused Clip(0,
                               max), MobileNet's ReLU6); 0: no cap */
    bool fused_sum;         /* Conv only: input 3 (S, Y's shape) is added before the fused activation,
                               Y = act(conv(X) + S); set by graph_fuse_inference, never by import */
    bool nhwc_in, nhwc_out; /* Conv, MaxPool and AveragePool (both or neither), GlobalAveragePool
                               (nhwc_in only, its attrs are otherwise empty): X / Y (and a Conv's S)
                               are stored channels-last, (N, D1.., C), in the buffers; set by
                               graph_fuse_inference for f32 values passed between such ops only,
                               never by import */
} sc_window_attrs;

typedef struct {
    float epsilon;  /* default 1e-5 */
    float momentum; /* default 0.9 */
    bool training_mode;
    bool nhwc;       /* inference only: X and Y stored channels-last, (N, D1.., C); set by
                        graph_fuse_inference, never by import */
    bool fused_relu; /* inference only: Y = Relu(the normalised X), a Relu that read it alone; set by
                        graph_fuse_inference, never by import */
} sc_batch_norm_attrs;

typedef struct {
    float alpha, beta; /* default 1, 1 */
    bool trans_a, trans_b;
    bool b_const; /* as sc_matmul_attrs.b_const; set by graph_fuse_inference only */
} sc_gemm_attrs;

/* One integer axis: Softmax, LogSoftmax, Flatten, Concat, Gather, Split. Already defaulted per
 * opset but not normalised (may be negative). legacy_2d is set for Softmax/LogSoftmax before opset
 * 13, whose input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])]. num_outputs is Split's
 * opset-18 attribute (0 when absent). data_rank/data_dims: GatherGrad's output shape (the gathered
 * data's), set by autodiff so that the node need not read the data for its shape (0: not set). */
typedef struct {
    int64_t axis;
    bool legacy_2d;
    int64_t num_outputs;
    int data_rank;
    int64_t data_dims[SC_MAX_RANK];
    bool nhwc; /* Concat only: every input and the output stored channels-last, (N, D1.., C), in the
                  buffers (the axis still names the logical dim); set by graph_fuse_inference,
                  never by import */
} sc_axis_attrs;

typedef struct {
    int64_t axis;  /* default -1 */
    float epsilon; /* default 1e-5 */
    sc_dtype stash_type;
} sc_layer_norm_attrs;

typedef struct {
    int n_perm; /* 0: reverse the dims (ONNX default) */
    int64_t perm[SC_MAX_RANK];
} sc_transpose_attrs;

typedef struct { bool tanh_approx; } sc_gelu_attrs;        /* approximate="tanh" */
typedef struct { sc_dtype to; } sc_cast_attrs;

/* The structs of scalar attributes, from the SC_ATTRS rows of graph/ops.def. */
#define SC_ATTR_FLOAT(name, def) float name;
#define SC_ATTR_INT(name, def) int64_t name;
#define SC_ATTR_FLAG(name, def) bool name;
#define SC_ATTRS(stem, fields) typedef struct { fields } sc_##stem##_attrs;
#include "graph/ops.def"
#undef SC_ATTRS
typedef enum { SC_SCATTER_NONE, SC_SCATTER_ADD, SC_SCATTER_MUL, SC_SCATTER_MAX, SC_SCATTER_MIN } sc_scatter_reduction;
typedef struct { sc_scatter_reduction reduction; } sc_scatter_nd_attrs; /* default none */
typedef struct { int64_t batch_dims; } sc_gather_nd_attrs;              /* default 0 */
typedef struct { bool fmod; } sc_mod_attrs;                /* default false: the divisor's sign */
typedef struct { char equation[96]; } sc_einsum_attrs;      /* spaces removed */
typedef struct { bool allowzero; } sc_reshape_attrs;
typedef struct { int64_t start, end; bool has_end; } sc_shape_attrs; /* opset 15 slicing */
typedef struct { int64_t seed; bool has_seed; } sc_dropout_attrs;

/* ConstantOfShape's fill value: dtype plus the value as double (every supported dtype fits).
 * Constant nodes never reach the graph: the importer turns them into constant values. */
typedef struct {
    sc_dtype dtype; /* default f32 */
    double value;   /* default 0 */
} sc_fill_attrs;

typedef enum { SC_RESIZE_NEAREST, SC_RESIZE_LINEAR, SC_RESIZE_CUBIC } sc_resize_mode;
typedef enum {
    SC_CT_HALF_PIXEL,
    SC_CT_HALF_PIXEL_SYMMETRIC,
    SC_CT_PYTORCH_HALF_PIXEL,
    SC_CT_ALIGN_CORNERS,
    SC_CT_ASYMMETRIC,
    SC_CT_TF_CROP_AND_RESIZE
} sc_coord_transform;
typedef enum { SC_NEAREST_ROUND_PREFER_FLOOR, SC_NEAREST_ROUND_PREFER_CEIL, SC_NEAREST_FLOOR, SC_NEAREST_CEIL } sc_nearest_mode;
typedef enum { SC_KEEP_ASPECT_STRETCH, SC_KEEP_ASPECT_NOT_LARGER, SC_KEEP_ASPECT_NOT_SMALLER } sc_keep_aspect;

typedef struct {
    sc_resize_mode mode;                 /* default nearest */
    sc_coord_transform coord;            /* default half_pixel */
    sc_nearest_mode nearest_mode;        /* default round_prefer_floor */
    float cubic_coeff_a;                 /* default -0.75 */
    bool exclude_outside;
    float extrapolation_value;
    bool antialias;
    int n_axes;                          /* 0: all axes */
    int64_t axes[SC_MAX_RANK];
    sc_keep_aspect keep_aspect_ratio_policy;
} sc_resize_attrs;

typedef enum { SC_PAD_CONSTANT, SC_PAD_REFLECT, SC_PAD_EDGE, SC_PAD_WRAP } sc_pad_mode;
typedef struct { sc_pad_mode mode; } sc_pad_attrs;

/* SoftmaxCrossEntropyLoss and its gradient. */
typedef enum { SC_REDUCTION_MEAN, SC_REDUCTION_SUM, SC_REDUCTION_NONE } sc_reduction;
typedef struct {
    sc_reduction reduction;  /* default mean */
    bool has_ignore_index;
    int64_t ignore_index;
} sc_sce_attrs;

/* SGDUpdate, PyTorch's torch.optim.SGD rule (dampening 0):
 *   g = grad * grad_scale + weight_decay * w;  m = momentum * m + g  (m = g on step 1 is the same
 *   because m starts at 0);  d = nesterov ? g + momentum * m : m;  w -= lr * d.
 * momentum == 0 skips the buffer. */
typedef struct {
    float momentum, weight_decay;
    bool nesterov;
} sc_sgd_attrs;

/* AdamWUpdate, PyTorch's torch.optim.AdamW rule (decoupled weight decay, bias correction):
 *   w *= 1 - lr * weight_decay;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *   w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps),   t = step (1-based). */
typedef struct {
    float beta1, beta2, eps, weight_decay;
} sc_adamw_attrs;

/* AllReduce, Reduce, Broadcast (data parallel, graph/ops_train.def): the ranks of the job (for the
 * cost: each rank sends and receives 2 (ranks - 1) / ranks of an all-reduced bucket's bytes, and
 * (ranks - 1) / ranks of a reduced or broadcast one on average over the owners), the bucket's index
 * in the order backward completes the buckets, and (Reduce, Broadcast) the rank that owns it. */
typedef struct {
    int ranks, bucket, owner;
} sc_all_reduce_attrs;

/* Add, Sub, Mul (their attrs are otherwise empty): nhwc set by graph_fuse_inference, never by
 * import, when the output and every input of the output's shape are stored channels-last,
 * (N, D1.., C); any other input broadcasts with C == 1 or every spatial dim 1, whose bytes are the
 * same in either layout. */
typedef struct {
    bool nhwc;
} sc_binary_attrs;

/* MatMul: b_const, B is a 2-D f32 initializer that no node writes while the graph runs, so a kernel
 * may keep it in a layout of its own between calls (the CPU's prepacked oneDNN matmul). Set by
 * graph_fuse_inference only; training graphs, whose weights change every step, keep it false. */
typedef struct {
    bool b_const;
} sc_matmul_attrs;

/* Loop and If (graph/pass_control.c). body[0] is Loop's body or If's then_branch, body[1] If's
 * else_branch: subgraphs the importer built, owned by the top-level graph (graph_own_subgraph).
 * A subgraph reads values of enclosing scopes; the importer makes each such capture an explicit
 * input of the node, after the ONNX inputs: Loop (M, cond, v_initial..., captures of body[0]), If
 * (cond, captures of body[0], captures of body[1]); n_captures[b] counts them per subgraph, and
 * each subgraph lists its captured values in the same order (sc_graph.captures). */
struct sc_graph;
typedef struct {
    const struct sc_graph *body[2];
    int n_captures[2];
} sc_control_attrs;

/* SplitToSequence (flag: keepdims, default 1) and ConcatFromSequence (flag: new_axis, default 0). */
typedef struct {
    int64_t axis; /* default 0 */
    bool flag;
} sc_sequence_attrs;

typedef union {
    sc_window_attrs window;         /* Conv, MaxPool, AveragePool (GlobalAveragePool: nhwc_in) */
    sc_batch_norm_attrs batch_norm; /* BatchNormalization */
    sc_gemm_attrs gemm;             /* Gemm */
    sc_axis_attrs axis;             /* Softmax, LogSoftmax, Flatten, Concat, Gather, Split */
    sc_layer_norm_attrs layer_norm;
    sc_transpose_attrs transpose;
    sc_gelu_attrs gelu;
    sc_cast_attrs cast;
    sc_mod_attrs mod;
    sc_einsum_attrs einsum;
    sc_scatter_nd_attrs scatter_nd;
    sc_gather_nd_attrs gather_nd;
    sc_reshape_attrs reshape;
    sc_shape_attrs shape;
    sc_dropout_attrs dropout;
    sc_fill_attrs fill;             /* ConstantOfShape */
    sc_resize_attrs resize;
    sc_pad_attrs pad;
    sc_sce_attrs sce;               /* SoftmaxCrossEntropyLoss(Grad) */
    sc_sgd_attrs sgd;               /* SGDUpdate */
    sc_adamw_attrs adamw;           /* AdamWUpdate */
    sc_all_reduce_attrs all_reduce; /* AllReduce */
    sc_binary_attrs binary;         /* Add, Sub, Mul (set by graph_fuse_inference only) */
    sc_matmul_attrs matmul;         /* MatMul (set by graph_fuse_inference only) */
    sc_control_attrs control;       /* Loop, If */
    sc_sequence_attrs sequence;     /* SplitToSequence, ConcatFromSequence */
#define SC_ATTRS(stem, fields) sc_##stem##_attrs stem;
#include "graph/ops.def"
#undef SC_ATTRS
} sc_attrs;

#undef SC_ATTR_FLOAT
#undef SC_ATTR_INT
#undef SC_ATTR_FLAG

/* All zero: the attributes of every node whose op has none (a node holds a pointer, graph.h). */
extern const sc_attrs sc_attrs_none;

#endif
