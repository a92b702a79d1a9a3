/* graph_fuse_inference (graph/passes.h): rewrites for a graph that will only run forward, with its
 * parameters frozen. graph_prepare runs it when sc_bind_options.inference is set (scorch-run run and
 * info); the trainer never sets it, since rewrites 1-4 treat parameters as constants or remove
 * a node that training differentiates (BatchNormalization must train on batch statistics).
 *
 *   1. Parameter folding: a node whose inputs are all parameters or constants runs once now and
 *      its outputs become constants (e.g. GPT's tied LM head Transpose(wte), 154 MB transposed on
 *      every pass otherwise). No size limit beyond SC_FUSE_FOLD_MAX_ELEMS.
 *   2. BatchNormalization (inference) after a Conv with constant weights, the Conv's only consumer:
 *      with s = scale / sqrt(var + eps),  W'[m] = W[m] s[m],  b'[m] = (b[m] - mean[m]) s[m] + B[m]
 *      (ONNX BatchNormalization: y = (x - mean) / sqrt(var + eps) * scale + B), so the pair is one
 *      Conv with new constant weights. The arithmetic runs in double and rounds once.
 *   2b. Kernel cropping: a Conv with constant f32 weights some of whose taps, along a spatial axis,
 *      read only padding for every output (a dilated kernel wider than its input: DeepLabV3's
 *      atrous 3x3 convolutions at rates 12, 24 and 36 on a 4x4 feature map read the input with
 *      their centre tap alone) gets a constant weight cut to the taps that read the input, with
 *      pad_begin lowered by (first tap kept) x dilation and pad_end by (taps dropped at the end) x
 *      dilation, so the output size is unchanged. The dropped terms are weight x 0, so the output
 *      only changes by the order of the remaining additions. Not done when a pad would turn
 *      negative or a dropped weight is not finite (inf x 0 is NaN).
 *   3. Residual Add: Add(Conv(..), S) where the Conv's output is read only by the Add and S has
 *      the same shape becomes one Conv with S as input 3 (sc_window_attrs.fused_sum), applied as a
 *      oneDNN sum post-op. The fused Conv takes the Add's place in the node order, where S and
 *      the Conv's own inputs are all computed. With both operands such Convs, the later one fuses.
 *   4. An activation after a Conv: the Conv applies it as a oneDNN post-op (sc_window_attrs.fused_act),
 *      after the sum when there is one (ResNet's Add + Relu): Relu, Clip(0, max) with constant
 *      bounds (ReLU6, capped at fused_relu_max), Sigmoid and HardSwish where the Conv's output is
 *      read by them alone, and SiLU, Mul(t, Sigmoid(t)) with t read by those two only
 *      (EfficientNet's 49 activations, MobileNetV3's hard swishes, the SE blocks' gates). A Relu
 *      after an inference BatchNormalization that a Conv could not absorb joins it the same way
 *      (sc_batch_norm_attrs.fused_relu: DenseNet's 62 pre-activations).
 *   5. GELU written as ops becomes one Gelu node: graph_fuse_gelu (graph/pass_gelu.c), which
 *      graph_prepare runs for training graphs too.
 *   6. Zero padding before an AveragePool: Pad(x, constant 0, spatial pads p) read only by an
 *      AveragePool without pads of its own (ceil_mode off) becomes AveragePool(x) with pads p and
 *      count_include_pad, which divides by the whole window as the padded pool did (PyTorch
 *      exports avg_pool2d(padding=1) this way: Inception's 9 branch pools, DenseNet's
 *      transitions). The sums differ only by the padded zeros, so the output is the same.
 *   7. Channels-last values (graph/pass_layout.c): f32 activations passed between Convs, pools,
 *      Concats, BatchNormalizations and unary elementwise ops are stored (N, D1.., C), the layout
 *      oneDNN's AVX-512 kernels compute in, so a chain of Convs runs without reordering from and to
 *      NCHW on every call.
 *   8. A MatMul or Gemm whose B is a 2-D f32 parameter or constant is flagged (b_const): the CPU
 *      runs it as oneDNN's matmul with B prepacked once instead of sgemm repacking B on every call
 *      (ConvNeXt's and ViT's MLPs, GPT's projections, classifier heads). Nothing else changes.
 * Only f32 values are rewritten in 2-8. Intermediate values that a rewrite removes must have a
 * single consumer and must not be graph outputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/pass_internal.h"

#define SC_FUSE_FOLD_MAX_ELEMS ((int64_t)1 << 28)

static int only_consumer(const sc_graph *g, int v) {
    return value_is_private(g, v) ? g->values[v].consumers[0] : -1;
}

static bool value_is_f32(const sc_graph *g, int v) { return v >= 0 && g->values[v].desc.dtype == SC_F32; }

/* ---- 1. parameter folding ---- */

static bool fold_wanted(const sc_graph *g, const sc_node *n, const sc_node_evaluator *eval) {
    if (!eval || !eval->can_run(n->op) || n->op == SC_OP_DROPOUT) return false;
    int present = 0;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        if (!value_is_fixed(g, n->in[k])) return false;
        present++;
    }
    if (!present) return false; /* ConstantOfShape-like sources were folded already or stay */
    int64_t elems = 0;
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        if (g->values[n->out[k]].is_output) return false;
        int64_t e = sc_desc_numel(&g->values[n->out[k]].desc);
        if (e < 0) return false;
        elems += e;
    }
    return elems <= SC_FUSE_FOLD_MAX_ELEMS;
}

static sc_status fold_run(sc_graph *g, const sc_node *n, const sc_node_evaluator *eval) {
    sc_tensor in[16], out[8];
    if (n->n_in > 16 || n->n_out > 8) return SC_OK;
    for (int k = 0; k < n->n_in; k++) {
        in[k].desc = n->in[k] >= 0 ? g->values[n->in[k]].desc : (sc_desc){0};
        in[k].data = n->in[k] >= 0 ? g->values[n->in[k]].data : NULL;
    }
    for (int k = 0; k < n->n_out; k++) {
        out[k].desc = n->out[k] >= 0 ? g->values[n->out[k]].desc : (sc_desc){0};
        out[k].data = NULL;
        if (n->out[k] < 0) continue;
        SC_TRY(graph_alloc_data(g, n->out[k]));
        out[k].data = g->values[n->out[k]].data;
    }
    SC_TRY(sc_status_prefix(eval->run(n, in, n->n_in, out, n->n_out), "folding parameters: "));
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] >= 0) g->values[n->out[k]].kind = SC_VALUE_CONST;
    return SC_OK;
}

static sc_status fuse_fold_params(sc_graph *g, const sc_node_evaluator *eval, bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (!keep[i] || !fold_wanted(g, &g->nodes[i], eval) || g->nodes[i].n_in > 16 || g->nodes[i].n_out > 8) continue;
        SC_TRY(fold_run(g, &g->nodes[i], eval));
        keep[i] = false;
        (*count)++;
    }
    return SC_OK;
}

/* ---- 2. Conv + BatchNormalization ---- */

static int new_const(sc_graph *g, const char *base, const sc_desc *d, sc_status *st) {
    int id = graph_add_value_unique(g, base, SC_VALUE_CONST, d, st);
    if (id >= 0) *st = graph_alloc_data(g, id);
    return *st ? -1 : id;
}

static bool bn_foldable(const sc_graph *g, const sc_node *conv, const sc_node *bn) {
    if (bn->op != SC_OP_BATCH_NORM || bn->attrs->batch_norm.training_mode || bn->n_in != 5) return false;
    for (int k = 1; k < bn->n_out; k++)
        if (bn->out[k] >= 0) return false;
    for (int k = 1; k < 5; k++)
        if (!value_is_fixed(g, bn->in[k]) || !value_is_f32(g, bn->in[k])) return false;
    if (!value_is_fixed(g, conv->in[1]) || !value_is_f32(g, conv->in[1])) return false;
    if (node_has_input(conv, 2) && !value_is_fixed(g, conv->in[2])) return false;
    int64_t m = g->values[conv->in[1]].desc.dims[0];
    for (int k = 1; k < 5; k++)
        if (sc_desc_numel(&g->values[bn->in[k]].desc) != m) return false;
    return true;
}

/* Writes W' and b' into new constants and points the Conv at them and at BN's output. */
static sc_status bn_fold(sc_graph *g, int ci, int bi) {
    sc_status st = SC_OK;
    int w_id = g->nodes[ci].in[1], b_id = node_has_input(&g->nodes[ci], 2) ? g->nodes[ci].in[2] : -1;
    sc_desc wd = g->values[w_id].desc, bd = g->values[g->nodes[bi].in[1]].desc;
    bd.rank = 1;
    bd.dims[0] = wd.dims[0];
    int nw = new_const(g, "bn_folded.W", &wd, &st);
    if (st) return st;
    int nb = new_const(g, "bn_folded.B", &bd, &st);
    if (st) return st;
    sc_node *conv = &g->nodes[ci], *bn = &g->nodes[bi];
    const float *w = g->values[w_id].data, *b = b_id >= 0 ? g->values[b_id].data : NULL;
    const float *scale = g->values[bn->in[1]].data, *beta = g->values[bn->in[2]].data;
    const float *mean = g->values[bn->in[3]].data, *var = g->values[bn->in[4]].data;
    float *w2 = g->values[nw].data, *b2 = g->values[nb].data;
    int64_t m = wd.dims[0], per = sc_desc_numel(&wd) / m;
    double eps = bn->attrs->batch_norm.epsilon;
    for (int64_t o = 0; o < m; o++) {
        double s = (double)scale[o] / sqrt((double)var[o] + eps);
        for (int64_t j = 0; j < per; j++) w2[o * per + j] = (float)(w[o * per + j] * s);
        b2[o] = (float)(((b ? (double)b[o] : 0.0) - mean[o]) * s + beta[o]);
    }
    if (conv->n_in < 3) {
        int *in = sc_arena_alloc_array(&g->arena, 3, sizeof *in);
        if (!in) return sc_errorf("out of memory folding BatchNormalization '%s'", bn->name);
        in[0] = conv->in[0];
        conv->in = in;
        conv->n_in = 3;
    }
    conv->in[1] = nw;
    conv->in[2] = nb;
    conv->out[0] = bn->out[0];
    return SC_OK;
}

static sc_status fuse_conv_bn(sc_graph *g, bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *c = &g->nodes[i];
        if (!keep[i] || c->op != SC_OP_CONV || !value_is_f32(g, c->out[0])) continue;
        int j = only_consumer(g, c->out[0]);
        if (j < 0 || !keep[j] || !bn_foldable(g, c, &g->nodes[j]) || g->nodes[j].in[0] != c->out[0]) continue;
        SC_TRY(bn_fold(g, i, j));
        keep[j] = false;
        (*count)++;
    }
    return SC_OK;
}

/* ---- 2b. kernel cropping ---- */

/* Along spatial axis a of Conv n: the first and last tap that read the input for some output
 * (input position o s - pad_begin + t d within [0, in)); false when no tap does. */
static bool used_taps(const sc_graph *g, const sc_node *n, int a, int64_t *lo, int64_t *hi) {
    const sc_window_attrs *w = &n->attrs->window;
    int64_t in = g->values[n->in[0]].desc.dims[2 + a], out = g->values[n->out[0]].desc.dims[2 + a];
    int64_t k = g->values[n->in[1]].desc.dims[2 + a], s = w->strides[a], d = w->dilations[a], pb = w->pads[a];
    *lo = k;
    *hi = -1;
    for (int64_t t = 0; t < k; t++)
        for (int64_t o = 0; o < out; o++) {
            int64_t p = o * s - pb + t * d;
            if (p >= 0 && p < in) {
                if (t < *lo) *lo = t;
                *hi = t;
                break;
            }
        }
    return *hi >= 0;
}

/* Whether every weight of W outside the kept box [lo, hi] (per spatial axis) is finite. */
static bool dropped_finite(const sc_desc *wd, const float *w, const int64_t *lo, const int64_t *hi) {
    int ns = wd->rank - 2;
    int64_t per = sc_desc_numel(wd) / (wd->dims[0] * wd->dims[1]);
    for (int64_t j = 0; j < wd->dims[0] * wd->dims[1]; j++)
        for (int64_t e = 0; e < per; e++) {
            int64_t f = e;
            bool kept = true;
            for (int a = ns - 1; a >= 0; a--) {
                int64_t t = f % wd->dims[2 + a];
                f /= wd->dims[2 + a];
                kept = kept && t >= lo[a] && t <= hi[a];
            }
            if (!kept && !isfinite(w[j * per + e])) return false;
        }
    return true;
}

/* Copies the box [lo, hi] of W (wd) into W2 (w2d, the box's shape). */
static void crop_copy(const sc_desc *wd, const float *w, const sc_desc *w2d, float *w2, const int64_t *lo) {
    int ns = wd->rank - 2;
    int64_t per = sc_desc_numel(wd) / (wd->dims[0] * wd->dims[1]), per2 = sc_desc_numel(w2d) / (wd->dims[0] * wd->dims[1]);
    for (int64_t j = 0; j < wd->dims[0] * wd->dims[1]; j++)
        for (int64_t e = 0; e < per2; e++) {
            int64_t f = e, src = 0, stride = 1;
            for (int a = ns - 1; a >= 0; a--) {
                int64_t t = f % w2d->dims[2 + a] + lo[a];
                f /= w2d->dims[2 + a];
                src += t * stride;
                stride *= wd->dims[2 + a];
            }
            w2[j * per2 + e] = w[j * per + src];
        }
}

static sc_status crop_conv_kernel(sc_graph *g, sc_node *n, bool *done) {
    *done = false;
    const sc_window_attrs *wa = &n->attrs->window;
    if (!value_is_fixed(g, n->in[1]) || !value_is_f32(g, n->in[1]) || wa->auto_pad != SC_AUTO_PAD_NOTSET) return SC_OK;
    const sc_desc *wd = &g->values[n->in[1]].desc;
    int ns = wd->rank - 2;
    if (ns < 1 || ns > SC_MAX_SPATIAL || g->values[n->in[0]].desc.rank != wd->rank) return SC_OK;
    int64_t lo[SC_MAX_SPATIAL], hi[SC_MAX_SPATIAL];
    bool crop = false;
    for (int a = 0; a < ns; a++) {
        if (!used_taps(g, n, a, &lo[a], &hi[a])) return SC_OK; /* the output is the bias alone: leave it */
        int64_t k = wd->dims[2 + a], d = wa->dilations[a];
        if (wa->pads[a] - lo[a] * d < 0) lo[a] = wa->pads[a] / d; /* keep pads non-negative */
        if (wa->pads[ns + a] - (k - 1 - hi[a]) * d < 0) hi[a] = k - 1 - wa->pads[ns + a] / d;
        crop = crop || lo[a] > 0 || hi[a] < k - 1;
    }
    if (!crop || !dropped_finite(wd, g->values[n->in[1]].data, lo, hi)) return SC_OK;
    sc_desc w2d = *wd;
    for (int a = 0; a < ns; a++) w2d.dims[2 + a] = hi[a] - lo[a] + 1;
    sc_status st = SC_OK;
    int nw = new_const(g, "cropped.W", &w2d, &st);
    if (st) return st;
    wd = &g->values[n->in[1]].desc; /* the value table may have moved */
    crop_copy(wd, g->values[n->in[1]].data, &w2d, g->values[nw].data, lo);
    sc_attrs at = *n->attrs;
    for (int a = 0; a < ns; a++) {
        int64_t d = at.window.dilations[a];
        at.window.pads[a] -= lo[a] * d;
        at.window.pads[ns + a] -= (wd->dims[2 + a] - 1 - hi[a]) * d;
        at.window.kernel_shape[a] = w2d.dims[2 + a];
    }
    SC_TRY(graph_node_set_attrs(g, n, &at));
    n->in[1] = nw;
    *done = true;
    return SC_OK;
}

static sc_status fuse_crop_kernels(sc_graph *g, const bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (!keep[i] || g->nodes[i].op != SC_OP_CONV) continue;
        bool done;
        SC_TRY(crop_conv_kernel(g, &g->nodes[i], &done));
        *count += done;
    }
    return SC_OK;
}

/* ---- 3. Conv + Add ---- */

/* The node index of the Conv making operand `side` of add when it can absorb the Add (f32, read only
 * by the Add, no post-ops yet, the other operand of the very same shape: no broadcasting), else -1. */
static int sum_conv_of(const sc_graph *g, const bool *keep, const sc_node *add, int side) {
    int c = add->in[side], s = add->in[1 - side];
    if (!value_is_private(g, c) || c == s || !value_is_f32(g, c) || !value_is_f32(g, s)) return -1;
    int p = g->values[c].producer;
    if (p < 0 || !keep[p]) return -1;
    const sc_node *conv = &g->nodes[p];
    if (conv->op != SC_OP_CONV || conv->n_out != 1 || conv->attrs->window.fused_act || conv->attrs->window.fused_sum)
        return -1;
    const sc_desc *y = &g->values[add->out[0]].desc;
    if (!sc_desc_same_shape(&g->values[c].desc, y) || !sc_desc_same_shape(&g->values[s].desc, y)) return -1;
    return p;
}

/* Node ai (the Add) becomes Conv ci with the Add's other operand s as input 3 and the Add's output. */
static sc_status sum_fuse(sc_graph *g, int ci, int ai, int s) {
    int *in = sc_arena_alloc_array(&g->arena, 4, sizeof *in);
    if (!in) return sc_errorf("out of memory fusing Add '%s' into Conv '%s'", g->nodes[ai].name, g->nodes[ci].name);
    sc_node conv = g->nodes[ci];
    in[0] = conv.in[0];
    in[1] = conv.in[1];
    in[2] = node_has_input(&conv, 2) ? conv.in[2] : -1;
    in[3] = s;
    conv.in = in;
    conv.n_in = 4;
    conv.out[0] = g->nodes[ai].out[0];
    sc_attrs a = *conv.attrs;
    a.window.fused_sum = true;
    SC_TRY(graph_node_set_attrs(g, &conv, &a));
    g->nodes[ai] = conv;
    return SC_OK;
}

static sc_status fuse_conv_sum(sc_graph *g, bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *add = &g->nodes[i];
        if (!keep[i] || add->op != SC_OP_ADD || add->n_in != 2 || add->n_out != 1 || add->in[0] < 0 || add->in[1] < 0)
            continue;
        int c0 = sum_conv_of(g, keep, add, 0), c1 = sum_conv_of(g, keep, add, 1);
        int side = c1 > c0 ? 1 : 0, ci = side ? c1 : c0;
        if (ci < 0) continue;
        SC_TRY(sum_fuse(g, ci, i, add->in[1 - side]));
        keep[ci] = false;
        (*count)++;
    }
    return SC_OK;
}

/* ---- 4. Conv + activation ---- */

/* The cap of Clip(x, 0, max) with constant f32 scalar bounds and max > 0, else 0 (not a ReLU6). */
static float relu_clip_max(const sc_graph *g, const sc_node *n) {
    if (n->op != SC_OP_CLIP || n->n_in != 3) return 0;
    for (int k = 1; k < 3; k++)
        if (!value_is_fixed(g, n->in[k]) || !value_is_f32(g, n->in[k]) || sc_desc_numel(&g->values[n->in[k]].desc) != 1)
            return 0;
    float lo = *(const float *)g->values[n->in[1]].data, hi = *(const float *)g->values[n->in[2]].data;
    return lo == 0.0f && hi > 0.0f && hi < INFINITY ? hi : 0;
}

/* x sigmoid(x) as exported (SiLU, Swish): Mul(t, Sigmoid(t)) in either operand order, where the
 * Sigmoid's output is read by that Mul alone. The Mul node's index, or -1. */
static int swish_mul_of(const sc_graph *g, const bool *keep, int t, int sig) {
    const sc_node *s = &g->nodes[sig];
    if (!keep[sig] || s->op != SC_OP_SIGMOID || s->in[0] != t) return -1;
    int m = only_consumer(g, s->out[0]);
    if (m < 0 || !keep[m]) return -1;
    const sc_node *mul = &g->nodes[m];
    bool pair = mul->op == SC_OP_MUL && mul->n_in == 2 &&
                ((mul->in[0] == t && mul->in[1] == s->out[0]) || (mul->in[1] == t && mul->in[0] == s->out[0]));
    return pair && value_is_f32(g, mul->out[0]) ? m : -1;
}

/* The activation Conv output t feeds into that the Conv can apply itself, the node whose output
 * becomes the Conv's (*last) and the nodes it replaces (drop[0..*n_drop)). */
static sc_fused_act act_after(const sc_graph *g, const bool *keep, int t, int *last, int drop[2], int *n_drop,
                              float *cap) {
    const sc_value *v = &g->values[t];
    *cap = 0;
    *n_drop = 0;
    if (v->is_output) return SC_FUSED_NONE;
    if (v->n_consumers == 2) { /* SiLU: t is read by the Sigmoid and the Mul */
        for (int k = 0; k < 2; k++) {
            int m = swish_mul_of(g, keep, t, v->consumers[k]);
            if (m >= 0 && v->consumers[1 - k] == m) {
                drop[0] = v->consumers[k], drop[1] = m, *n_drop = 2, *last = m;
                return SC_FUSED_SWISH;
            }
        }
        return SC_FUSED_NONE;
    }
    int j = only_consumer(g, t);
    if (j < 0 || !keep[j]) return SC_FUSED_NONE;
    const sc_node *n = &g->nodes[j];
    *cap = relu_clip_max(g, n);
    sc_fused_act act = n->op == SC_OP_RELU || *cap > 0 ? SC_FUSED_RELU
                       : n->op == SC_OP_SIGMOID        ? SC_FUSED_SIGMOID
                       : n->op == SC_OP_HARD_SWISH     ? SC_FUSED_HARD_SWISH
                                                       : SC_FUSED_NONE;
    if (act != SC_FUSED_NONE) drop[0] = j, *n_drop = 1, *last = j;
    return act;
}

static sc_status fuse_conv_act(sc_graph *g, bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *c = &g->nodes[i];
        if (!keep[i] || c->op != SC_OP_CONV || c->attrs->window.fused_act || !value_is_f32(g, c->out[0])) continue;
        int last = -1, drop[2], n_drop;
        float cap;
        sc_fused_act act = act_after(g, keep, c->out[0], &last, drop, &n_drop, &cap);
        if (act == SC_FUSED_NONE) continue;
        c->out[0] = g->nodes[last].out[0];
        sc_attrs a = *c->attrs;
        a.window.fused_act = act;
        a.window.fused_relu_max = cap;
        SC_TRY(graph_node_set_attrs(g, c, &a));
        for (int k = 0; k < n_drop; k++) keep[drop[k]] = false;
        (*count)++;
    }
    return SC_OK;
}

/* A Relu that alone reads an inference BatchNormalization's output (DenseNet's pre-activation
 * BN + Relu before each Conv) becomes part of it (sc_batch_norm_attrs.fused_relu). */
static sc_status fuse_bn_relu(sc_graph *g, bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *bn = &g->nodes[i];
        if (!keep[i] || bn->op != SC_OP_BATCH_NORM || bn->attrs->batch_norm.training_mode ||
            bn->attrs->batch_norm.fused_relu || !value_is_f32(g, bn->out[0]))
            continue;
        bool extra = false;
        for (int k = 1; k < bn->n_out; k++) extra = extra || bn->out[k] >= 0;
        int j = only_consumer(g, bn->out[0]);
        if (extra || j < 0 || !keep[j] || g->nodes[j].op != SC_OP_RELU) continue;
        sc_attrs a = *bn->attrs;
        a.batch_norm.fused_relu = true;
        SC_TRY(graph_node_set_attrs(g, bn, &a));
        bn->out[0] = g->nodes[j].out[0];
        keep[j] = false;
        (*count)++;
    }
    return SC_OK;
}

/* ---- 6. Pad + AveragePool ---- */

/* The spatial pads (begin..., end...) of a Pad that adds zeros to the spatial dims of x only; false
 * when it does anything else (other modes or values, negative pads, axes given, N or C padded). */
static bool zero_spatial_pads(const sc_graph *g, const sc_node *pad, int64_t *pads) {
    if (pad->op != SC_OP_PAD || pad->attrs->pad.mode != SC_PAD_CONSTANT || pad->n_in < 2 ||
        (pad->n_in > 3 && pad->in[3] >= 0) || !value_is_fixed(g, pad->in[1]))
        return false;
    if (pad->n_in > 2 && pad->in[2] >= 0) {
        int cv = pad->in[2];
        if (!value_is_fixed(g, cv) || !value_is_f32(g, cv) || sc_desc_numel(&g->values[cv].desc) != 1 ||
            *(const float *)g->values[cv].data != 0.0f)
            return false;
    }
    const sc_value *p = &g->values[pad->in[1]];
    int rank = g->values[pad->in[0]].desc.rank, ns = rank - 2;
    if (p->desc.dtype != SC_I64 || sc_desc_numel(&p->desc) != 2 * rank || ns < 1 || ns > SC_MAX_SPATIAL) return false;
    const int64_t *pv = p->data;
    for (int side = 0; side < 2; side++) {
        if (pv[side * rank] != 0 || pv[side * rank + 1] != 0) return false;
        for (int i = 0; i < ns; i++) {
            int64_t v = pv[side * rank + 2 + i];
            if (v < 0) return false;
            pads[side * ns + i] = v;
        }
    }
    return true;
}

static bool pool_without_pads(const sc_node *n) {
    const sc_window_attrs *w = &n->attrs->window;
    if (n->op != SC_OP_AVERAGE_POOL || w->ceil_mode || w->auto_pad != SC_AUTO_PAD_NOTSET) return false;
    for (int i = 0; i < 2 * w->n_spatial; i++)
        if (w->pads[i]) return false;
    return true;
}

static sc_status fuse_pad_pool(sc_graph *g, bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *pad = &g->nodes[i];
        int64_t pads[2 * SC_MAX_SPATIAL];
        if (!keep[i] || !value_is_f32(g, pad->out[0]) || !zero_spatial_pads(g, pad, pads)) continue;
        int j = only_consumer(g, pad->out[0]);
        if (j < 0 || !keep[j] || !pool_without_pads(&g->nodes[j])) continue;
        sc_node *pool = &g->nodes[j];
        sc_attrs a = *pool->attrs;
        for (int k = 0; k < 2 * a.window.n_spatial; k++) a.window.pads[k] = pads[k];
        a.window.count_include_pad = true;
        SC_TRY(graph_node_set_attrs(g, pool, &a));
        pool->in[0] = pad->in[0];
        keep[i] = false;
        (*count)++;
    }
    return SC_OK;
}

/* ---- 8. MatMul with a constant B ---- */

/* A MatMul or Gemm whose B is a 2-D f32 parameter or constant of an inference graph: nothing
 * writes B while the graph runs (sc_matmul_attrs.b_const, sc_gemm_attrs.b_const). */
static sc_status mark_const_matmuls(sc_graph *g, const bool *keep, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *n = &g->nodes[i];
        bool mm = n->op == SC_OP_MATMUL;
        if (!keep[i] || (!mm && n->op != SC_OP_GEMM)) continue;
        const sc_value *b = &g->values[n->in[1]];
        if ((b->kind != SC_VALUE_PARAM && b->kind != SC_VALUE_CONST) || b->desc.rank != 2 || !value_is_f32(g, n->in[1]))
            continue;
        sc_attrs a = *n->attrs;
        if (mm) a.matmul.b_const = true;
        else a.gemm.b_const = true;
        SC_TRY(graph_node_set_attrs(g, n, &a));
        (*count)++;
    }
    return SC_OK;
}

/* ---- driver ---- */

static sc_status fuse_compact(sc_graph *g, bool *keep) {
    sc_status st = graph_compact_nodes(g, keep);
    for (int i = 0; i < g->n_nodes; i++) keep[i] = true;
    return st;
}

sc_status graph_fuse_inference(sc_graph *g, const sc_node_evaluator *eval) {
    SC_TRY(graph_link(g));
    bool *keep = malloc(sizeof *keep * (size_t)(g->n_nodes + 1));
    if (!keep) return sc_errorf("out of memory fusing the graph");
    for (int i = 0; i < g->n_nodes; i++) keep[i] = true;
    int folded = 0, bn = 0, crop = 0, sum = 0, act = 0, pool = 0, cl = 0, mm = 0;
    sc_status st = fuse_fold_params(g, eval, keep, &folded);
    if (!st) st = fuse_compact(g, keep);
    if (!st) st = fuse_conv_bn(g, keep, &bn);
    if (!st) st = fuse_compact(g, keep);
    if (!st) st = fuse_crop_kernels(g, keep, &crop);
    if (!st) st = fuse_conv_sum(g, keep, &sum);
    if (!st) st = fuse_compact(g, keep);
    if (!st) st = fuse_conv_act(g, keep, &act);
    if (!st) st = fuse_compact(g, keep);
    if (!st) st = fuse_bn_relu(g, keep, &act);
    if (!st) st = fuse_pad_pool(g, keep, &pool);
    if (!st) st = fuse_compact(g, keep);
    if (!st) st = mark_const_matmuls(g, keep, &mm);
    if (!st) st = graph_fuse_channels_last(g, &cl);
    free(keep);
    if (!st)
        sc_log(SC_LOG_DEBUG,
               "inference fusion: %d nodes folded, %d BatchNormalization into Conv, %d Conv kernels cropped, %d Add "
               "into Conv, %d activations into Conv or BatchNormalization, %d Pad into AveragePool, %d nodes with "
               "channels-last activations, %d MatMul or Gemm with a constant B",
               folded, bn, crop, sum, act, pool, cl, mm);
    return st;
}

