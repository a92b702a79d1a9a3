/* Channels-last values for inference (graph_fuse_inference's last rewrite, graph/pass_fuse.c).
 *
 * oneDNN's AVX-512 convolutions compute in (N, D1.., C): a value between Convs stored NCHW costs a
 * reorder on each side of every call. This pass picks which f32 activations (rank 3 to 5) are stored
 * channels-last, (N, D1.., C) in the buffer, while their desc stays (N, C, D1..). A value may be
 * when every op that makes or reads it has a channels-last kernel for that side:
 *   - Conv (X, and the summand S of a fused_sum Conv), MaxPool (values only) and AveragePool
 *     (sc_window_attrs.nhwc_in / nhwc_out), GlobalAveragePool (reads only: its output is (N, C, 1..));
 *   - Concat (sc_axis_attrs.nhwc): the axis names the logical dim, so the kernel concatenates along
 *     the buffer's last dim for axis 1 (Inception's, GoogLeNet's and SqueezeNet's branch joins);
 *   - BatchNormalization in inference form (sc_batch_norm_attrs.nhwc): a per-channel affine map,
 *     DenseNet's pre-activation after each Concat;
 *   - unary elementwise ops (Relu, Clip, Sigmoid, Tanh, LeakyRelu, HardSigmoid, HardSwish), whose
 *     kernels treat the buffer as flat and so need no flag at all;
 *   - Add, Sub and Mul (sc_binary_attrs.nhwc) whose inputs have the output's shape or broadcast
 *     over bytes that read the same in either layout (C == 1, or every spatial dim 1): the
 *     squeeze-and-excitation gate x * sigmoid(fc(pool(x))) of MobileNetV3 and EfficientNet.
 * Some values must share a layout: a Conv's summand and output (the sum post-op reads S from the
 * output buffer), a pool's, BatchNormalization's or unary op's input and output, and every input
 * of a Concat with its output, and the full-shape inputs of Add, Sub and Mul with theirs. Where
 * one of a tied group cannot go channels-last, none does; the rule is applied until nothing
 * changes. No other op ever sees a channels-last value, and no graph output is one.
 */
#include <stdlib.h>

#include "graph/pass_internal.h"

static bool max_pool_values_only(const sc_node *n) {
    return n->op == SC_OP_MAX_POOL && (n->n_out < 2 || n->out[1] < 0);
}

static bool batch_norm_inference(const sc_node *n) {
    if (n->op != SC_OP_BATCH_NORM || n->attrs->batch_norm.training_mode) return false;
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] >= 0) return false;
    return true;
}

static bool layout_free_unary(const sc_node *n) {
    switch (n->op) {
    case SC_OP_RELU:
    case SC_OP_CLIP:
    case SC_OP_SIGMOID:
    case SC_OP_TANH:
    case SC_OP_LEAKY_RELU:
    case SC_OP_HARD_SIGMOID:
    case SC_OP_HARD_SWISH: return true;
    default: return false;
    }
}

/* Add, Sub, Mul whose output is rank 3..5 and each input either has the output's shape (it then
 * shares the output's layout) or broadcasts with C == 1 or all spatial dims 1 (the same bytes in
 * either layout: an SE block's per-channel gate, a scalar). */
static bool full_input(const sc_graph *g, const sc_node *n, int j) {
    const sc_desc *x = &g->values[n->in[j]].desc, *y = &g->values[n->out[0]].desc;
    if (x->rank != y->rank) return false;
    for (int i = 0; i < y->rank; i++)
        if (x->dims[i] != y->dims[i]) return false;
    return true;
}

static bool layout_free_binary(const sc_graph *g, const sc_node *n) {
    if ((n->op != SC_OP_ADD && n->op != SC_OP_SUB && n->op != SC_OP_MUL) || n->n_in != 2) return false;
    const sc_desc *y = &g->values[n->out[0]].desc;
    if (y->rank < 3 || y->rank > 5) return false;
    for (int j = 0; j < 2; j++) {
        const sc_desc *x = &g->values[n->in[j]].desc;
        if (full_input(g, n, j)) continue;
        if (x->rank > y->rank) return false;
        int lead = y->rank - x->rank;
        bool c1 = lead > 1 || x->dims[1 - lead] == 1, spatial1 = true;
        for (int i = 2; i < y->rank; i++) spatial1 = spatial1 && (i < lead || x->dims[i - lead] == 1);
        if (!c1 && !spatial1) return false;
    }
    return true;
}

/* Ops that map a channels-last input 0 to a channels-last output 0 of the same layout. */
static bool passes_layout_through(const sc_node *n) {
    return max_pool_values_only(n) || n->op == SC_OP_AVERAGE_POOL || batch_norm_inference(n) ||
           layout_free_unary(n);
}

/* Ops with a channels-last kernel for input j (backends/cpu: cpu_nn_conv.c, cpu_nn_pool_cl.c,
 * cpu_movement.c, cpu_nn_norm.c). */
static bool reads_channels_last(const sc_graph *g, const sc_node *n, int j) {
    if (n->op == SC_OP_CONV) return j == 0 || j == 3;
    if (n->op == SC_OP_CONCAT || layout_free_binary(g, n)) return true;
    return j == 0 && (passes_layout_through(n) || n->op == SC_OP_GLOBAL_AVERAGE_POOL);
}

static bool makes_channels_last(const sc_graph *g, const sc_node *n) {
    return n->op == SC_OP_CONV || n->op == SC_OP_CONCAT || passes_layout_through(n) || layout_free_binary(g, n);
}

/* v may live channels-last: an f32 activation of rank 3..5, made by an op above, not a graph
 * output, every read of it by an op that reads channels-last there. */
static bool channels_last_ok(const sc_graph *g, int v) {
    const sc_value *val = &g->values[v];
    if (val->is_output || val->producer < 0 || val->n_consumers == 0 || val->desc.dtype != SC_F32 ||
        val->desc.rank < 3 || val->desc.rank > 5)
        return false;
    if (!makes_channels_last(g, &g->nodes[val->producer])) return false;
    for (int k = 0; k < val->n_consumers; k++) {
        const sc_node *c = &g->nodes[val->consumers[k]];
        for (int j = 0; j < c->n_in; j++)
            if (c->in[j] == v && !reads_channels_last(g, c, j)) return false;
    }
    return true;
}

/* The values of node n whose layouts must agree, into tied (room for n_in + 1); their count, or 0. */
static int tied_values(const sc_graph *g, const sc_node *n, int *tied) {
    int k = 0;
    if (n->op == SC_OP_CONV && n->attrs->window.fused_sum) tied[k++] = n->in[3];
    else if (passes_layout_through(n)) tied[k++] = n->in[0];
    else if (n->op == SC_OP_CONCAT)
        for (int j = 0; j < n->n_in; j++) tied[k++] = n->in[j];
    else if (layout_free_binary(g, n))
        for (int j = 0; j < n->n_in; j++) {
            if (full_input(g, n, j)) tied[k++] = n->in[j];
        }
    else return 0;
    tied[k++] = n->out[0];
    return k;
}

/* Clears every member of a tied group when one of them cannot be channels-last (v < 0 never can). */
static bool untie(bool *cl, const int *tied, int n) {
    bool all = true, any = false;
    for (int k = 0; k < n; k++) {
        bool c = tied[k] >= 0 && cl[tied[k]];
        all = all && c;
        any = any || c;
    }
    if (all || !any) return false;
    for (int k = 0; k < n; k++)
        if (tied[k] >= 0) cl[tied[k]] = false;
    return true;
}

/* Writes the chosen layouts into the attributes of the ops that carry a flag; counts the nodes
 * that read or write a channels-last value. */
static sc_status set_layout_flags(sc_graph *g, const bool *cl, int *count) {
    for (int i = 0; i < g->n_nodes; i++) {
        sc_node *n = &g->nodes[i];
        bool in = n->n_in > 0 && n->in[0] >= 0 && cl[n->in[0]], out = n->n_out > 0 && n->out[0] >= 0 && cl[n->out[0]];
        sc_attrs a = *n->attrs;
        if (n->op == SC_OP_CONV || max_pool_values_only(n) || n->op == SC_OP_AVERAGE_POOL) {
            a.window.nhwc_in = in;
            a.window.nhwc_out = out;
        } else if (n->op == SC_OP_GLOBAL_AVERAGE_POOL) {
            a.window.nhwc_in = in;
        } else if (n->op == SC_OP_CONCAT) {
            a.axis.nhwc = out;
        } else if (batch_norm_inference(n)) {
            a.batch_norm.nhwc = out;
        } else if (layout_free_binary(g, n)) {
            a.binary.nhwc = out;
        } else {
            *count += layout_free_unary(n) && out;
            continue;
        }
        SC_TRY(graph_node_set_attrs(g, n, &a));
        *count += in || out;
    }
    return SC_OK;
}

sc_status graph_fuse_channels_last(sc_graph *g, int *count) {
    int most = 1;
    for (int i = 0; i < g->n_nodes; i++) most = g->nodes[i].n_in + 1 > most ? g->nodes[i].n_in + 1 : most;
    bool *cl = calloc((size_t)g->n_values + 1, sizeof *cl);
    int *tied = malloc(sizeof *tied * (size_t)most);
    if (!cl || !tied) {
        free(cl);
        free(tied);
        return sc_errorf("out of memory choosing activation layouts");
    }
    for (int v = 0; v < g->n_values; v++) cl[v] = channels_last_ok(g, v);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            int n_tied = tied_values(g, &g->nodes[i], tied);
            if (n_tied && untie(cl, tied, n_tied)) changed = true;
        }
    }
    sc_status st = set_layout_flags(g, cl, count);
    free(cl);
    free(tied);
    return st;
}
