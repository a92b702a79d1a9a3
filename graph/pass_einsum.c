/* graph_lower_einsum (graph/passes.h): every Einsum becomes Transposes, Reshapes, ReduceSums and
 * MatMuls, so both backends run it with their tuned kernels and autodiff differentiates it with
 * their rules (onnxruntime's Einsum does the same decomposition).
 *
 * With the equation parsed (graph/einsum.h):
 *   0. A letter repeated r times in one operand (a diagonal, "ii->i") is taken once: its r axes are
 *      moved last and flattened to n^r elements, and Slice with step 1 + n + ... + n^(r-1) keeps
 *      the n elements whose r indices agree (index i*(1 + n + ... + n^(r-1)) of the flat axis).
 *      Slice's gradient (SliceGrad) scatters back into zeros, so the diagonal trains too.
 *   1. A letter of one operand that no other operand and not the output has is summed out of it
 *      (ReduceSum, keepdims 0).
 *   2. While two or more operands are left, the first two, A and B, become one. Their letters are
 *      batch (both, still needed: in the output or a later operand), contracted (both, not
 *      needed), and A's or B's own (needed). Then
 *          A' = Reshape(Transpose(A) to [batch, own_A, contracted]) [batch.., M, K]
 *          B' = Reshape(Transpose(B) to [batch, contracted, own_B]) [batch.., K, N]
 *          C  = Reshape(MatMul(A', B')) [batch.., own_A.., own_B..]
 *      a batch letter of size 1 on one side broadcasts in MatMul as in numpy.
 *   3. The last operand is transposed to the output's letter order.
 * Transposes and Reshapes that would not change anything are not made. The last node made writes
 * the Einsum's output value; the Einsum node goes. Needs static shapes (after graph_infer_shapes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/einsum.h"
#include "graph/pass_internal.h"
#include "graph/shape.h"

typedef struct {
    int v;                       /* value id */
    char l[SC_MAX_RANK + 1];     /* its letters */
} operand;

static int const_i64(sc_lowering *x, const int64_t *v, int n) {
    int64_t len = n;
    sc_desc d = sc_desc_make(SC_I64, 1, &len);
    return lowering_const(x, "const", &d, v);
}

/* Transposes o to the letter order `want` (a permutation of o's letters). */
static void transpose_to(sc_lowering *x, operand *o, const char *want) {
    if (strcmp(o->l, want) == 0) return;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.transpose.n_perm = (int)strlen(want);
    for (int d = 0; want[d]; d++) a.transpose.perm[d] = strchr(o->l, want[d]) - o->l;
    o->v = lowering_emit(x, SC_OP_TRANSPOSE, "transpose", &o->v, 1, &a);
    strcpy(o->l, want);
}

static int reshape(sc_lowering *x, int v, const int64_t *dims, int rank) {
    const sc_desc *d = &x->g->values[v].desc;
    if (d->rank == rank && memcmp(d->dims, dims, sizeof(int64_t) * (size_t)rank) == 0) return v;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.reshape.allowzero = true;
    int in[2] = {v, const_i64(x, dims, rank)};
    return lowering_emit(x, SC_OP_RESHAPE, "reshape", in, 2, &a);
}

/* Step 0 for operand o: the letter c, which repeats in it, is taken once (its diagonal). */
static void take_diagonal(sc_lowering *x, operand *o, char c) {
    char rest[SC_MAX_RANK + 1], want[SC_MAX_RANK + 1];
    int nr = 0, r = 0;
    for (int d = 0; o->l[d]; d++)
        if (o->l[d] == c) r++;
        else rest[nr++] = o->l[d];
    rest[nr] = 0;
    /* transpose_to needs distinct letters: the axes of c keep their relative order */
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.transpose.n_perm = nr + r;
    int k = 0;
    for (int d = 0; o->l[d]; d++)
        if (o->l[d] != c) a.transpose.perm[k++] = d;
    for (int d = 0; o->l[d]; d++)
        if (o->l[d] == c) a.transpose.perm[k++] = d;
    bool moved = false;
    for (int d = 0; d < nr + r; d++) moved |= a.transpose.perm[d] != d;
    if (moved) o->v = lowering_emit(x, SC_OP_TRANSPOSE, "transpose", &o->v, 1, &a);
    if (x->st) return;
    const sc_desc *d = &x->g->values[o->v].desc;
    int64_t n = d->dims[nr], flat = 1, step = 0, dims[SC_MAX_RANK]; /* this operand's size (1 may broadcast) */
    for (int i = 0; i < r; i++) step = step * n + 1, flat *= n;
    for (int i = 0; i < nr; i++) dims[i] = d->dims[i];
    dims[nr] = flat;
    int v = reshape(x, o->v, dims, nr + 1);
    int64_t start = 0, axis = nr;
    int in[5] = {v, const_i64(x, &start, 1), const_i64(x, &flat, 1), const_i64(x, &axis, 1), const_i64(x, &step, 1)};
    o->v = lowering_emit(x, SC_OP_SLICE, "diagonal", in, 5, NULL);
    snprintf(want, sizeof want, "%s%c", rest, c);
    strcpy(o->l, want);
}

static void take_diagonals(sc_lowering *x, operand *o) {
    for (int d = 0; o->l[d] && !x->st; d++)
        if (strchr(o->l + d + 1, o->l[d])) {
            take_diagonal(x, o, o->l[d]);
            d = -1; /* the letters moved: look again from the start */
        }
}

/* Whether letter c is still needed after operands [0, upto): in the output or a later operand. */
static bool needed(const sc_einsum_spec *sp, const operand *ops, int n_ops, int from, char c) {
    if (strchr(sp->out, c)) return true;
    for (int k = from; k < n_ops; k++)
        if (strchr(ops[k].l, c)) return true;
    return false;
}

/* Step 1 for operand k: sums out the letters nothing else has. */
static void sum_private(sc_lowering *x, const sc_einsum_spec *sp, operand *ops, int n_ops, int k) {
    int64_t axes[SC_MAX_RANK];
    int na = 0;
    char keep[SC_MAX_RANK + 1];
    int nk = 0;
    for (int d = 0; ops[k].l[d]; d++) {
        char c = ops[k].l[d];
        bool other = strchr(sp->out, c) != NULL;
        for (int j = 0; j < n_ops && !other; j++) other = j != k && strchr(ops[j].l, c);
        if (other) keep[nk++] = c;
        else axes[na++] = d;
    }
    keep[nk] = 0;
    if (!na) return;
    sc_attrs a;
    memset(&a, 0, sizeof a);
    a.reduce.keepdims = false;
    int in[2] = {ops[k].v, const_i64(x, axes, na)};
    ops[k].v = lowering_emit(x, SC_OP_REDUCE_SUM, "sum", in, 2, &a);
    strcpy(ops[k].l, keep);
}

static int64_t letters_numel(const sc_einsum_spec *sp, const char *l, const sc_desc *d, const char *of) {
    int64_t n = 1;
    for (int i = 0; l[i]; i++) n *= d ? d->dims[strchr(of, l[i]) - of] : sp->size[(unsigned char)l[i]];
    return n;
}

/* Step 2: ops[0] and ops[1] become one operand in ops[0]. */
static void contract_pair(sc_lowering *x, const sc_einsum_spec *sp, operand *ops, int n_ops) {
    operand *A = &ops[0], *B = &ops[1];
    char batch[SC_MAX_RANK + 1] = "", own_a[SC_MAX_RANK + 1] = "", own_b[SC_MAX_RANK + 1] = "", con[SC_MAX_RANK + 1] = "";
    int nb = 0, na = 0, nbb = 0, nc = 0;
    for (int d = 0; A->l[d]; d++) {
        char c = A->l[d];
        bool in_b = strchr(B->l, c) != NULL, need = needed(sp, ops, n_ops, 2, c);
        if (in_b && need) batch[nb++] = c;
        else if (in_b) con[nc++] = c;
        else own_a[na++] = c;
    }
    for (int d = 0; B->l[d]; d++)
        if (!strchr(A->l, B->l[d])) own_b[nbb++] = B->l[d];
    batch[nb] = own_a[na] = own_b[nbb] = con[nc] = 0;
    char la[2 * SC_MAX_RANK + 1], lb[2 * SC_MAX_RANK + 1];
    snprintf(la, sizeof la, "%s%s%s", batch, own_a, con);
    snprintf(lb, sizeof lb, "%s%s%s", batch, con, own_b);
    transpose_to(x, A, la);
    transpose_to(x, B, lb);
    if (x->st) return;
    const sc_desc da = x->g->values[A->v].desc, db = x->g->values[B->v].desc;
    int64_t ra[SC_MAX_RANK], rb[SC_MAX_RANK], ry[SC_MAX_RANK];
    for (int i = 0; i < nb; i++) ra[i] = da.dims[i], rb[i] = db.dims[i], ry[i] = da.dims[i] > db.dims[i] ? da.dims[i] : db.dims[i];
    int64_t M = letters_numel(sp, own_a, &da, la), K = letters_numel(sp, con, &da, la), N = letters_numel(sp, own_b, &db, lb);
    ra[nb] = M, ra[nb + 1] = K;
    rb[nb] = K, rb[nb + 1] = N;
    int in[2] = {reshape(x, A->v, ra, nb + 2), reshape(x, B->v, rb, nb + 2)};
    int y = lowering_emit(x, SC_OP_MATMUL, "matmul", in, 2, NULL);
    int ny = nb;
    for (int i = 0; own_a[i]; i++) ry[ny++] = da.dims[nb + i];
    for (int i = 0; own_b[i]; i++) ry[ny++] = db.dims[nb + nc + i];
    if (x->st) return;
    A->v = reshape(x, y, ry, ny);
    snprintf(A->l, sizeof A->l, "%s%s%s", batch, own_a, own_b);
    memmove(&ops[1], &ops[2], sizeof(operand) * (size_t)(n_ops - 2));
}

/* Lowers node i; the new nodes are appended. Returns the value the last one writes, or -1. */
static int lower_node(sc_lowering *x, int i) {
    sc_graph *g = x->g;
    const sc_node *n = &g->nodes[i];
    const sc_desc *ins[SC_EINSUM_MAX_IN];
    operand ops[SC_EINSUM_MAX_IN];
    int n_ops = n->n_in;
    for (int k = 0; k < n_ops && k < SC_EINSUM_MAX_IN; k++) ins[k] = &g->values[n->in[k]].desc;
    sc_einsum_spec sp;
    char why[256];
    if (!sc_einsum_parse(n->attrs->einsum.equation, n_ops, ins, &sp, why, sizeof why)) {
        x->st = sc_errorf("node '%s' (Einsum): %s", n->name, why);
        return -1;
    }
    for (int k = 0; k < n_ops; k++) ops[k].v = n->in[k], strcpy(ops[k].l, sp.in[k]);
    for (int k = 0; k < n_ops; k++) take_diagonals(x, &ops[k]);
    for (int k = 0; k < n_ops; k++) sum_private(x, &sp, ops, n_ops, k);
    for (; n_ops > 1 && !x->st; n_ops--) contract_pair(x, &sp, ops, n_ops);
    transpose_to(x, &ops[0], sp.out);
    return x->st ? -1 : ops[0].v;
}

sc_status graph_lower_einsum(sc_graph *g, int *count) {
    int done = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != SC_OP_EINSUM) continue;
        char base[256];
        snprintf(base, sizeof base, "%s", g->nodes[i].name);
        sc_lowering x = {g, base, SC_OK};
        int n0 = g->n_nodes, y = lower_node(&x, i);
        if (x.st) return x.st;
        if (y == g->nodes[i].in[0] || g->values[y].producer < n0) { /* nothing made ("ij->ij"): copy */
            int in = y;
            lowering_emit(&x, SC_OP_IDENTITY, "copy", &in, 1, NULL);
            if (x.st) return x.st;
        }
        SC_TRY(graph_splice_lowered(g, &i, n0));
        done++;
    }
    if (count) *count = done;
    return SC_OK;
}
