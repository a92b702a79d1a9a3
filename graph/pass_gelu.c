/* graph_fuse_gelu (graph/passes.h): GELU written as element-wise ops becomes one Gelu node (ONNX Gelu,
 * opset 20). graph_prepare runs it for every graph, training ones included: GeluGrad reads X alone, so
 * backward keeps one tensor per MLP where the ops kept three or four (GPT-2 small at batch 8, seq
 * 1024: 300 MB a layer in f32), one kernel runs where five to nine did, and in mixed precision the
 * fused op follows its 16-bit input where the Erf or Tanh chain ran in f32.
 *
 * GELU is the product of three factors, x, 0.5 and 1 + F(x), multiplied in either association and
 * operand order, with F one of
 *   erf(x / sqrt 2)                          exact (approximate="none")
 *   tanh(sqrt(2 / pi) (x + 0.044715 x^3))    the tanh form (approximate="tanh"), x^3 as Pow(x, 3),
 *                                            Mul(x, Mul(x, x)) or Mul(Mul(x, x), x)
 * which covers what PyTorch's exporter writes for nn.GELU (x * (1 + F) first, then * 0.5), what
 * Hugging Face's gelu_new and our generator write (0.5 * x first), and either approximation. Every
 * intermediate must be read only by the pattern and not be a graph output; constants are f32
 * scalars within 1e-6 (relative) of the values above. */
#include <math.h>
#include <stdlib.h>

#include "graph/pass_internal.h"

#define GELU_MAX_DROP 10

typedef struct {
    const sc_graph *g;
    const bool *keep;
    int drop[GELU_MAX_DROP];
    int n_drop;
} gelu_match;

static bool g_is_f32(const sc_graph *g, int v) { return v >= 0 && g->values[v].desc.dtype == SC_F32; }

static bool scalar_is(const sc_graph *g, int v, double want) {
    if (!value_is_fixed(g, v) || g->values[v].desc.dtype != SC_F32 || sc_desc_numel(&g->values[v].desc) != 1)
        return false;
    double x = *(const float *)g->values[v].data;
    return fabs(x - want) <= 1e-6 * fabs(want);
}

/* The node making v when v is private to its reader, still kept, and made by op; it joins the nodes
 * the match drops. NULL otherwise. */
static const sc_node *take(gelu_match *m, int v, sc_op op) {
    const sc_graph *g = m->g;
    if (!value_is_private(g, v) || g->values[v].producer < 0 || !m->keep[g->values[v].producer]) return NULL;
    const sc_node *n = &g->nodes[g->values[v].producer];
    if (n->op != op || n->n_in < 1 || m->n_drop == GELU_MAX_DROP) return NULL;
    m->drop[m->n_drop++] = (int)(n - g->nodes);
    return n;
}

/* Operand of the binary node n that is not the scalar `want`; -1 when neither is. */
static int other_than_scalar(const sc_graph *g, const sc_node *n, double want) {
    if (!n || n->n_in != 2) return -1;
    if (scalar_is(g, n->in[1], want)) return n->in[0];
    if (scalar_is(g, n->in[0], want)) return n->in[1];
    return -1;
}

/* v is x^3: Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x). */
static bool is_cube(gelu_match *m, int v, int x) {
    int n0 = m->n_drop;
    const sc_node *p = take(m, v, SC_OP_POW);
    if (p) return p->n_in == 2 && p->in[0] == x && scalar_is(m->g, p->in[1], 3.0);
    const sc_node *mul = take(m, v, SC_OP_MUL);
    if (!mul || mul->n_in != 2) return false;
    for (int side = 0; side < 2; side++) {
        m->n_drop = n0 + 1;
        const sc_node *sq = mul->in[side] == x ? take(m, mul->in[1 - side], SC_OP_MUL) : NULL;
        if (sq && sq->n_in == 2 && sq->in[0] == x && sq->in[1] == x) return true;
    }
    return false;
}

/* u is sqrt(2 / pi) (x + 0.044715 x^3). */
static bool is_tanh_inner(gelu_match *m, int u, int x) {
    int s = other_than_scalar(m->g, take(m, u, SC_OP_MUL), 0.7978845608028654);
    const sc_node *add = s >= 0 ? take(m, s, SC_OP_ADD) : NULL;
    if (!add || add->n_in != 2) return false;
    int n0 = m->n_drop;
    for (int side = 0; side < 2; side++) {
        m->n_drop = n0;
        if (add->in[side] != x) continue;
        int cube = other_than_scalar(m->g, take(m, add->in[1 - side], SC_OP_MUL), 0.044715);
        if (cube >= 0 && is_cube(m, cube, x)) return true;
    }
    return false;
}

/* v is 1 + F(x); sets *tanh_form for the tanh approximation. */
static bool is_one_plus_f(gelu_match *m, int v, int x, bool *tanh_form) {
    int f = other_than_scalar(m->g, take(m, v, SC_OP_ADD), 1.0);
    if (f < 0) return false;
    int n0 = m->n_drop;
    const sc_node *erf = take(m, f, SC_OP_ERF);
    if (erf) {
        const sc_node *div = take(m, erf->in[0], SC_OP_DIV);
        *tanh_form = false;
        return div && div->n_in == 2 && div->in[0] == x && scalar_is(m->g, div->in[1], 1.4142135623730951);
    }
    m->n_drop = n0;
    const sc_node *t = take(m, f, SC_OP_TANH);
    *tanh_form = true;
    return t && is_tanh_inner(m, t->in[0], x);
}

/* Factors (a, b, c) in some order are x, 0.5 and 1 + F(x). */
static bool factors_match(gelu_match *m, const int f[3], int *x, bool *tanh_form) {
    int n0 = m->n_drop;
    for (int h = 0; h < 3; h++) {
        if (!scalar_is(m->g, f[h], 0.5)) continue;
        for (int k = 0; k < 3; k++) {
            if (k == h) continue;
            int xi = f[3 - h - k];
            m->n_drop = n0;
            if (g_is_f32(m->g, xi) && is_one_plus_f(m, f[k], xi, tanh_form)) {
                *x = xi;
                return true;
            }
        }
    }
    return false;
}

/* Mul node `root` is GELU of *x: its operands, one of them a private Mul, give the three factors. */
static bool gelu_at(gelu_match *m, const sc_node *root, int *x, bool *tanh_form) {
    if (root->op != SC_OP_MUL || root->n_in != 2 || !g_is_f32(m->g, root->out[0])) return false;
    for (int side = 0; side < 2; side++) {
        m->n_drop = 0;
        const sc_node *inner = take(m, root->in[side], SC_OP_MUL);
        if (!inner || inner->n_in != 2) continue;
        int f[3] = {root->in[1 - side], inner->in[0], inner->in[1]};
        if (factors_match(m, f, x, tanh_form)) return true;
    }
    return false;
}

sc_status graph_fuse_gelu(sc_graph *g, int *count) {
    SC_TRY(graph_link(g));
    bool *keep = malloc(sizeof *keep * (size_t)(g->n_nodes + 1));
    if (!keep) return sc_errorf("out of memory fusing GELU");
    for (int i = 0; i < g->n_nodes; i++) keep[i] = true;
    int fused = 0;
    sc_status st = SC_OK;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        gelu_match m = {.g = g, .keep = keep};
        int x;
        bool tanh_form;
        if (!keep[i] || !gelu_at(&m, &g->nodes[i], &x, &tanh_form)) continue;
        for (int k = 0; k < m.n_drop; k++) keep[m.drop[k]] = false;
        sc_node *n = &g->nodes[i];
        n->op = SC_OP_GELU;
        n->n_in = 1;
        n->in[0] = x;
        sc_attrs a = {0};
        a.gelu.tanh_approx = tanh_form;
        st = graph_node_set_attrs(g, n, &a);
        fused++;
    }
    if (!st && fused) st = graph_compact_nodes(g, keep);
    free(keep);
    if (count) *count = fused;
    return st;
}
