/* Row blocks of large parameters (autodiff/autodiff.h, param_blocks_split; docs/DESIGN.md, autodiff/).
 *
 * Why: a parameter's gradient exists whole on the device from the node that makes it to its update.
 * For a tied embedding that is the floor of every plan: GPT-2's dW = dY^T h is 154 MB (made from
 * 26 MB of logit gradients), and with the parameter streamed the whole table must be on the device
 * for the head's Gemm as well. Trained as K row blocks W_k = W[r_k : r_k+1], each block is a
 * parameter of its own: it is prefetched, differentiated, updated and freed alone, so no node holds
 * more than one block of the table or of its gradient.
 *
 * A 2-D trainable parameter W [V, D] over opt->param_block bytes is split when every reader reads
 * whole rows of it:
 *   - Gemm(A, W, transB=1) without C:  Y = A W^T = Concat_k(A W_k^T) along axis 1 (each output column
 *     is the dot product of one row of W with A's rows, the same sum whichever block holds the row);
 *   - Gather(W, ids) on axis 0:  Y = sum_k Gather(W_k, clamp(ids - r_k)) * [r_k <= ids < r_k+1]
 *     (each id lies in exactly one block: the other terms are exact zeros, so the sum is the row;
 *     the ids are first checked and wrapped as Gather does, by a Gather from 0..V-1);
 *   - Cast(W) read only by such nodes (mixed precision casts each block instead).
 * The gradients follow from the ordinary rules: Concat's is a Slice of dY per block, Gather's a
 * GatherGrad that adds the block's rows (zero rows for ids outside it add +0) into the running sum.
 *
 * Storage: W_k's data points into W's (rows are contiguous), so the loaded weights are trained in
 * place and saving writes W as it was read; W itself becomes a constant nothing reads, kept for its
 * name and data. Block sizes are rounded so that block starts fall on 4 KiB boundaries of W's data
 * where the row size allows it (a pinned host range is registered once per page). Every plan of the
 * graph sees the same blocks, so plans still agree bit for bit; against the unsplit graph, A's
 * gradient sums the K blocks' partial products in another order (float32 rounding).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/train_internal.h"
#include "core/units.h"

/* Whether node n reads value w only as whole rows: as Gemm's transposed B without C, or as Gather's
 * data on axis 0; or, through_cast, as a Cast whose output only such nodes read. */
static bool rows_reader(const sc_graph *g, const sc_node *n, int w, bool through_cast) {
    if (n->op == SC_OP_GEMM)
        return n->n_in >= 2 && n->in[1] == w && n->in[0] != w && !node_has_input(n, 2) && n->attrs->gemm.trans_b;
    if (n->op == SC_OP_GATHER) {
        int64_t axis = n->attrs->axis.axis;
        return n->in[0] == w && n->in[1] != w && (axis == 0 || axis == -2);
    }
    if (n->op == SC_OP_CAST && through_cast && n->in[0] == w) {
        const sc_value *x = &g->values[n->out[0]];
        if (x->is_output || !x->n_consumers) return false;
        for (int c = 0; c < x->n_consumers; c++)
            if (!rows_reader(g, &g->nodes[x->consumers[c]], n->out[0], false)) return false;
        return true;
    }
    return false;
}

static bool splittable(const sc_graph *g, int w, int64_t block) {
    const sc_value *x = &g->values[w];
    if (x->desc.rank != 2 || x->desc.dims[0] < 2 || !x->data || x->is_output || !x->n_consumers) return false;
    if (sc_desc_bytes(&x->desc) <= block) return false;
    for (int c = 0; c < x->n_consumers; c++)
        if (!rows_reader(g, &g->nodes[x->consumers[c]], w, true)) return false;
    return true;
}

/* Rows per block: about `block` bytes each, a multiple of the rows that make whole 4 KiB pages. */
static int64_t block_rows(int64_t rows, int64_t row_bytes, int64_t block) {
    int64_t k = (rows * row_bytes + block - 1) / block;
    int64_t per = (rows + k - 1) / k;
    int64_t page_rows = 4096 / sc_gcd64(row_bytes, 4096);
    per = (per + page_rows - 1) / page_rows * page_rows;
    return per < rows ? per : rows - 1;
}

typedef struct {
    int n;        /* blocks */
    int *param;   /* their parameter values */
    int64_t *row0;/* first row of each, and row0[n] = V */
} blocks;

/* The block parameters "<W>.rows<a>_<b>", viewing W's data. */
static void blocks_make(tb_builder *b, int w, int64_t per, blocks *bl) {
    sc_graph *g = b->g;
    sc_value x = g->values[w]; /* a copy: adding values moves g->values */
    int64_t rows = x.desc.dims[0], row_bytes = sc_desc_bytes(&x.desc) / rows;
    bl->n = (int)((rows + per - 1) / per);
    bl->param = sc_arena_alloc_array(&g->arena, (size_t)bl->n, sizeof(int));
    bl->row0 = sc_arena_alloc_array(&g->arena, (size_t)bl->n + 1, sizeof(int64_t));
    if (!bl->param || !bl->row0) {
        tb_fail(b, sc_errorf("out of memory splitting parameter '%s'", x.name));
        return;
    }
    for (int k = 0; k <= bl->n; k++) bl->row0[k] = k < bl->n ? k * per : rows;
    for (int k = 0; k < bl->n && !b->st; k++) {
        char name[512];
        snprintf(name, sizeof name, "%s.rows%lld_%lld", x.name, (long long)bl->row0[k], (long long)bl->row0[k + 1]);
        sc_desc d = x.desc;
        d.dims[0] = bl->row0[k + 1] - bl->row0[k];
        sc_status st = SC_OK;
        int v = graph_add_value_unique(g, name, SC_VALUE_PARAM, &d, &st);
        if (v < 0) {
            tb_fail(b, st);
            return;
        }
        g->values[v].data = (unsigned char *)x.data + bl->row0[k] * row_bytes;
        bl->param[k] = v;
    }
}

/* Block k as node n reads it: the block itself, or a Cast of it like n's input (emitted here). */
static int block_source(tb_builder *b, const sc_node *cast, const blocks *bl, int k) {
    if (!cast) return bl->param[k];
    char name[512];
    snprintf(name, sizeof name, "%s.rows%lld", cast->name, (long long)bl->row0[k]);
    return tb_emit(b, SC_OP_CAST, name, &bl->param[k], 1, 1, NULL, cast->attrs, SC_VALUE_ACT);
}

/* Node j, Gemm(A, W^T): the blocks' Gemms are emitted and j becomes their Concat on axis 1. */
static void gemm_split(tb_builder *b, int j, const sc_node *cast, const blocks *bl) {
    sc_graph *g = b->g;
    sc_node n = g->nodes[j];
    sc_attrs ga = *n.attrs;
    int *ys = malloc(sizeof(int) * (size_t)bl->n);
    if (!ys) {
        tb_fail(b, sc_errorf("out of memory splitting node '%s'", n.name));
        return;
    }
    for (int k = 0; k < bl->n; k++) {
        char name[512];
        snprintf(name, sizeof name, "%s.rows%lld", n.name, (long long)bl->row0[k]);
        int in[2] = {n.in[0], block_source(b, cast, bl, k)};
        ys[k] = tb_emit(b, SC_OP_GEMM, name, in, 2, 1, NULL, &ga, SC_VALUE_ACT);
    }
    if (!b->st) {
        sc_attrs ca = {0};
        ca.axis.axis = 1;
        g->nodes[j].op = SC_OP_CONCAT;
        tb_node_set_inputs(b, j, ys, bl->n);
        sc_status st = graph_node_set_attrs(g, &g->nodes[j], &ca);
        if (st) tb_fail(b, st);
    }
    free(ys);
}

/* The ids Gather reads, checked and wrapped as Gather checks and wraps them: Gather(0..V-1, ids). An
 * id out of [-V, V) fails there as it failed before, and the ids still reach a Gather of V rows
 * first, which is how a language model's vocabulary is recognised (graph_gather_rows). */
static int ids_wrapped(tb_builder *b, const char *name, int ids, int64_t rows) {
    sc_dtype t = b->g->values[ids].desc.dtype;
    char buf[512];
    snprintf(buf, sizeof buf, "%s.ids", name);
    sc_desc d = sc_desc_make(t, 1, (int64_t[]){rows});
    void *iota = malloc((size_t)sc_desc_bytes(&d));
    if (!iota) return tb_fail(b, sc_errorf("out of memory splitting node '%s'", name));
    for (int64_t r = 0; r < rows; r++) {
        if (t == SC_I64) ((int64_t *)iota)[r] = r;
        else ((int32_t *)iota)[r] = (int32_t)r;
    }
    int table = tb_const(b, buf, &d, iota);
    free(iota);
    return tb_emit(b, SC_OP_GATHER, buf, (const int[]){table, ids}, 2, 1, NULL, &sc_attrs_none, SC_VALUE_ACT);
}

/* One block's term of a split Gather: Gather(W_k, in ? ids - r_k : 0) * in, in = r_k <= ids < r_k+1,
 * the mask unsqueezed to broadcast over the row. */
static int gather_term(tb_builder *b, const sc_node *n, const sc_node *cast, const blocks *bl, int k, int ids) {
    sc_graph *g = b->g;
    sc_desc idd = g->values[ids].desc;
    sc_dtype t = idd.dtype, yt = g->values[n->out[0]].desc.dtype;
    char name[512], nm[560];
    snprintf(name, sizeof name, "%s.rows%lld", n->name, (long long)bl->row0[k]);
#define NM(what) (snprintf(nm, sizeof nm, "%s/" what, name), nm)
    int64_t r0 = bl->row0[k], len = bl->row0[k + 1] - r0;
    int local = tb_emit(b, SC_OP_SUB, NM("local"), (const int[]){ids, tb_const_scalar(b, name, t, (double)r0)}, 2, 1, NULL,
                        NULL, SC_VALUE_ACT);
    int ge = tb_emit(b, SC_OP_GREATER, NM("ge"), (const int[]){local, tb_const_scalar(b, name, t, -1)}, 2, 1, NULL, NULL,
                     SC_VALUE_ACT);
    int lt = tb_emit(b, SC_OP_LESS, NM("lt"), (const int[]){local, tb_const_scalar(b, name, t, (double)len)}, 2, 1, NULL,
                     NULL, SC_VALUE_ACT);
    int in = tb_emit(b, SC_OP_AND, NM("in"), (const int[]){ge, lt}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    int safe = tb_emit(b, SC_OP_WHERE, NM("safe"), (const int[]){in, local, tb_const_scalar(b, name, t, 0)}, 3, 1, NULL,
                       NULL, SC_VALUE_ACT);
    int rows = tb_emit(b, SC_OP_GATHER, NM("gather"), (const int[]){block_source(b, cast, bl, k), safe}, 2, 1, NULL, n->attrs,
                       SC_VALUE_ACT);
    sc_attrs ca = {0};
    ca.cast.to = yt;
    int mask = tb_emit(b, SC_OP_CAST, NM("mask"), &in, 1, 1, NULL, &ca, SC_VALUE_ACT);
    int64_t axis = idd.rank;
    sc_desc ad = sc_desc_make(SC_I64, 1, (int64_t[]){1});
    int axes = tb_const(b, name, &ad, &axis);
    int mask_row = tb_emit(b, SC_OP_UNSQUEEZE, NM("mask_row"), (const int[]){mask, axes}, 2, 1, NULL, NULL, SC_VALUE_ACT);
    return tb_emit(b, SC_OP_MUL, NM("term"), (const int[]){rows, mask_row}, 2, 1, NULL, NULL, SC_VALUE_ACT);
#undef NM
}

/* Node j, Gather(W, ids): the blocks' terms are emitted and j becomes the last Add of their sum. */
static void gather_split(tb_builder *b, int j, const sc_node *cast, const blocks *bl) {
    sc_graph *g = b->g;
    sc_node n = g->nodes[j];
    int ids = ids_wrapped(b, n.name, n.in[1], bl->row0[bl->n]);
    int acc = gather_term(b, &n, cast, bl, 0, ids);
    for (int k = 1; k < bl->n - 1; k++)
        acc = tb_emit(b, SC_OP_ADD, n.name, (const int[]){acc, gather_term(b, &n, cast, bl, k, ids)}, 2, 1, NULL, NULL,
                      SC_VALUE_ACT);
    int last = gather_term(b, &n, cast, bl, bl->n - 1, ids);
    if (b->st) return;
    g->nodes[j].op = SC_OP_ADD;
    tb_node_set_inputs(b, j, (const int[]){acc, last}, 2);
    sc_status st = graph_node_set_attrs(g, &g->nodes[j], &sc_attrs_none);
    if (st) tb_fail(b, st);
}

/* Rewrites reader j of W (or of cast, a Cast of W) over the blocks; its new nodes go right before it. */
static void reader_split(tb_builder *b, int j, const sc_node *cast, const blocks *bl, int **pos, int first) {
    int before = b->g->n_nodes;
    if (b->g->nodes[j].op == SC_OP_GEMM) gemm_split(b, j, cast, bl);
    else gather_split(b, j, cast, bl);
    int added = b->g->n_nodes - first;
    int *p = realloc(*pos, sizeof(int) * (size_t)(added + 1));
    if (!p) {
        tb_fail(b, sc_errorf("out of memory splitting parameters"));
        return;
    }
    for (int m = before; m < b->g->n_nodes; m++) p[m - first] = j - 1;
    *pos = p;
}

/* Removes the nodes marked in drop (Casts of split parameters, now read by nothing). */
static void nodes_drop(sc_graph *g, const bool *drop) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!drop[i]) g->nodes[k++] = g->nodes[i];
    g->n_nodes = k;
}

/* Splits parameter w: its readers (and Casts) rewritten; returns the blocks in bl. */
static sc_status param_split(sc_graph *g, int w, int64_t block, blocks *bl) {
    tb_builder b = {g, SC_OK};
    int64_t rows = g->values[w].desc.dims[0];
    blocks_make(&b, w, block_rows(rows, sc_desc_bytes(&g->values[w].desc) / rows, block), bl);
    SC_TRY(b.st);
    /* Readers listed first: rewriting changes the consumer lists. */
    int n0 = g->n_nodes, n_read = 0;
    int *reader = malloc(sizeof(int) * (size_t)(n0 + 1)), *via = malloc(sizeof(int) * (size_t)(n0 + 1));
    int *pos = NULL;
    if (!reader || !via) b.st = sc_errorf("out of memory splitting parameter '%s'", g->values[w].name);
    for (int i = 0; i < n0 && !b.st; i++) {
        const sc_node *n = &g->nodes[i];
        if (n->op == SC_OP_CAST && n->in[0] == w) {
            for (int j = i + 1; j < n0; j++)
                for (int q = 0; q < g->nodes[j].n_in; q++)
                    if (g->nodes[j].in[q] == n->out[0] && (!n_read || reader[n_read - 1] != j))
                        reader[n_read] = j, via[n_read++] = i;
        } else if (n->op != SC_OP_CAST) {
            for (int q = 0; q < n->n_in; q++)
                if (n->in[q] == w) {
                    reader[n_read] = i, via[n_read++] = -1;
                    break;
                }
        }
    }
    for (int r = 0; r < n_read && !b.st; r++) {
        sc_node cast = via[r] >= 0 ? g->nodes[via[r]] : (sc_node){0};
        reader_split(&b, reader[r], via[r] >= 0 ? &cast : NULL, bl, &pos, n0);
    }
    sc_status st = b.st ? b.st : tb_place_new_nodes(g, n0, pos);
    if (!st) { /* the old Casts of W, read by nothing now */
        bool *drop = calloc((size_t)g->n_nodes + 1, 1);
        if (!drop) st = sc_errorf("out of memory splitting parameters");
        for (int i = 0; drop && i < g->n_nodes; i++) drop[i] = g->nodes[i].op == SC_OP_CAST && g->nodes[i].in[0] == w;
        if (drop) nodes_drop(g, drop);
        free(drop);
        if (!st) st = graph_link(g);
    }
    if (!st) g->values[w].kind = SC_VALUE_CONST; /* kept for its name and data, read by nothing */
    free(reader);
    free(via);
    free(pos);
    return st;
}

sc_status param_blocks_split(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    int64_t block = opt->param_block ? opt->param_block : SC_PARAM_BLOCK_DEFAULT;
    if (block < 0) return SC_OK;
    SC_TRY(graph_link(g));
    int extra = 0;
    blocks *bl = calloc((size_t)tg->n_params + 1, sizeof(blocks));
    if (!bl) return sc_errorf("out of memory splitting parameters");
    sc_status st = SC_OK;
    for (int i = 0; i < tg->n_params && !st; i++) {
        if (!splittable(g, tg->params[i], block)) continue;
        st = param_split(g, tg->params[i], block, &bl[i]);
        extra += bl[i].n - 1;
        if (!st) sc_log(SC_LOG_INFO, "parameter '%s' trains as %d row blocks (--param-block %lld bytes)",
                        g->values[tg->params[i]].name, bl[i].n, (long long)block);
    }
    if (!st && extra) {
        int *params = sc_arena_alloc_array(&g->arena, (size_t)(tg->n_params + extra) + 1, sizeof(int));
        int *of = sc_arena_alloc_array(&g->arena, (size_t)(tg->n_params + extra) + 1, sizeof(int));
        if (!params || !of) st = sc_errorf("out of memory listing parameters");
        int n = 0;
        for (int i = 0; !st && i < tg->n_params; i++) {
            if (!bl[i].n) of[n] = -1, params[n++] = tg->params[i];
            for (int k = 0; k < bl[i].n; k++) of[n] = tg->params[i], params[n++] = bl[i].param[k];
        }
        if (!st) tg->params = params, tg->block_of = of, tg->n_params = n;
    }
    free(bl);
    return st;
}
