/* Data parallel: the gradient all-reduce of a training graph (autodiff/autodiff.h, opt->ranks > 1).
 *
 * Every rank runs the same training graph on its shard of the global batch, so each rank's gradient
 * is the mean over its own samples; their mean over the ranks is the gradient of the global batch's
 * mean loss (equal shards). AllReduce nodes (graph/ops_train.def) compute it between backward and the
 * optimizer updates, which then read the averaged gradients: every rank applies the same update to
 * the same weights, and the weights stay identical without ever being sent.
 *
 * Buckets, as PyTorch DDP's: gradients are grouped in the order backward finishes them (their
 * producing nodes' order), a bucket closing once it holds bucket_bytes (the first one closes at 1 MiB
 * so the first collective starts early), and each bucket's collective is placed right after its last
 * gradient is produced. One collective per bucket keeps the per-message latency off the small
 * tensors (biases, norms), and the optimizer updates still follow each bucket closely, freeing its
 * gradients. Every rank builds its graph from the same buckets, so the collectives agree by
 * construction.
 *
 * Sharded optimizer (opt->shard_optimizer, ZeRO stage 1): each bucket has an owner rank (greedy by
 * bytes, the least loaded rank first), which alone keeps the bucket's optimizer state and updates its
 * parameters. The bucket's gradients go to the owner only (Reduce: the owner sums them in rank order
 * as AllReduce does, so its update has the same bits as an unsharded run's) and at the end of the
 * step the owner sends the updated parameters to every rank (Broadcast, in place). Over the buckets
 * the two make a reduce-scatter of the gradients and an all-gather of the weights, the same bytes on
 * the wire as the all-reduce; each rank holds about 1/N of the state. With sharding the buckets are
 * made small enough (a quarter of an even share) that the owners' loads balance on small models too.
 * The graph differs per rank (opt->rank): an owner's Reduce has outputs and feeds updates, the
 * others' has none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/train_internal.h"
#include "core/free_all.h"
#include "graph/shape.h"

#define FIRST_BUCKET_BYTES ((int64_t)1 << 20)
#define MIN_SHARD_BUCKET_BYTES ((int64_t)64 << 10)

typedef struct {
    int producer, param;
} grad_order;

static int by_producer(const void *a, const void *b) {
    const grad_order *x = a, *y = b;
    return x->producer != y->producer ? (x->producer < y->producer ? -1 : 1) : (x->param > y->param) - (x->param < y->param);
}

static int64_t grad_bytes(const sc_graph *g, const sc_training_graph *tg, int i) {
    int64_t b = sc_desc_bytes(&g->values[tg->grads[i]].desc);
    return b > 0 ? b : 0;
}

/* The collective of one bucket: the gradients of tg->grads[order[lo..hi)] in, and (AllReduce, or
 * Reduce on the owner) the averaged ones out, which replace them in tg->grads. */
static sc_status bucket_emit(sc_graph *g, sc_training_graph *tg, const grad_order *order, int lo, int hi,
                             const sc_all_reduce_attrs *a, sc_op op, bool outputs) {
    int n = hi - lo;
    int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
    sc_status st = in && out ? SC_OK : sc_errorf("out of memory bucketing gradients");
    for (int k = 0; !st && k < n; k++) {
        int i = order[lo + k].param;
        in[k] = tg->grads[i];
        if (!outputs) continue;
        char name[600];
        snprintf(name, sizeof name, "%s.grad_mean", g->values[tg->params[i]].name);
        out[k] = graph_add_value_unique(g, name, SC_VALUE_ACT, NULL, &st);
    }
    char name[64];
    snprintf(name, sizeof name, "%s.bucket%d", op == SC_OP_REDUCE ? "reduce" : "allreduce", a->bucket);
    int node = st ? -1 : graph_add_node(g, op, name, in, n, out, outputs ? n : 0, &st);
    if (node >= 0) {
        sc_attrs at = {0};
        at.all_reduce = *a;
        st = graph_node_set_attrs(g, &g->nodes[node], &at);
        for (int k = 0; !st && outputs && k < n; k++) g->values[out[k]].producer = node;
        if (!st) st = sc_shape_fns[op](g, &g->nodes[node]);
        for (int k = 0; !st && outputs && k < n; k++) tg->grads[order[lo + k].param] = out[k];
    }
    free(in);
    free(out);
    return st;
}

/* The bucket bytes: DDP's cap, and with sharding at most a quarter of each rank's even share. */
static int64_t bucket_cap(const sc_graph *g, const sc_training_graph *tg, const sc_train_options *opt) {
    int64_t cap = opt->bucket_bytes > 0 ? opt->bucket_bytes : SC_BUCKET_BYTES_DEFAULT;
    if (!opt->shard_optimizer) return cap;
    int64_t total = 0;
    for (int i = 0; i < tg->n_params; i++) total += grad_bytes(g, tg, i);
    int64_t share = total / (4 * (int64_t)opt->ranks);
    if (share < MIN_SHARD_BUCKET_BYTES) share = MIN_SHARD_BUCKET_BYTES;
    return share < cap ? share : cap;
}

/* Bucket k is order[start[k] .. start[k + 1]); its collective goes after node pos[k]. */
static int buckets_cut(const sc_graph *g, const sc_training_graph *tg, const grad_order *order, int64_t cap, int *start,
                       int *pos, int64_t *bytes) {
    int n = 0;
    int64_t have = 0;
    start[0] = 0;
    for (int k = 0; k < tg->n_params; k++) {
        have += grad_bytes(g, tg, order[k].param);
        int64_t limit = n == 0 && cap > FIRST_BUCKET_BYTES ? FIRST_BUCKET_BYTES : cap;
        if (k + 1 < tg->n_params && have < limit) continue;
        pos[n] = order[k].producer;
        bytes[n] = have;
        start[++n] = k + 1;
        have = 0;
    }
    return n;
}

/* owner[k]: the least loaded rank so far (the lowest on a tie), buckets in order. */
static void owners_pick(const int64_t *bytes, int n, int ranks, int *owner) {
    int64_t load[1024] = {0};
    int64_t *l = ranks <= 1024 ? load : calloc((size_t)ranks, sizeof(int64_t));
    for (int k = 0; k < n; k++) {
        int best = 0;
        for (int r = 1; l && r < ranks; r++)
            if (l[r] < l[best]) best = r;
        owner[k] = l ? best : k % ranks;
        if (l) l[best] += bytes[k];
    }
    if (l != load) free(l);
}

/* tg->update_after: a bucket's updates wait for the next bucket's collective to be issued, so the
 * executor (backends/plan_exec_comm.c) runs this bucket's collective while backward computes the
 * next bucket's gradients, instead of waiting for it at once. The last bucket's updates need not
 * wait. One bucket of gradients more is alive meanwhile. */
static sc_status updates_lag(sc_graph *g, sc_training_graph *tg, const grad_order *order, const int *start, int n) {
    int *node_of = malloc(sizeof(int) * ((size_t)n + 1));
    tg->update_after = sc_arena_alloc_array(&g->arena, (size_t)tg->n_params + 1, sizeof(int));
    if (!node_of || !tg->update_after) {
        free(node_of);
        return sc_errorf("out of memory bucketing gradients");
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SC_OP_ALL_REDUCE || g->nodes[i].op == SC_OP_REDUCE) node_of[g->nodes[i].attrs->all_reduce.bucket] = i;
    for (int b = 0; b < n; b++)
        for (int k = start[b]; k < start[b + 1]; k++) tg->update_after[order[k].param] = b + 1 < n ? node_of[b + 1] : -1;
    free(node_of);
    return SC_OK;
}

/* Sharding: tg->params and grads keep this rank's own; all_params every one in bucket order (bucket
 * b's Reduce reads the gradients of the next n_in of them). */
static sc_status params_keep_owned(sc_graph *g, sc_training_graph *tg, const grad_order *order, const int *start,
                                   const int *owner, int n_buckets, int rank) {
    tg->all_params = sc_arena_alloc_array(&g->arena, (size_t)tg->n_params + 1, sizeof(int));
    if (!tg->all_params) return sc_errorf("out of memory sharding the optimizer");
    for (int k = 0; k < tg->n_params; k++) tg->all_params[k] = tg->params[order[k].param];
    tg->n_all_params = tg->n_params;
    bool *mine = calloc((size_t)tg->n_params + 1, 1);
    if (!mine) return sc_errorf("out of memory sharding the optimizer");
    for (int b = 0; b < n_buckets; b++)
        for (int k = start[b]; k < start[b + 1]; k++) mine[order[k].param] = owner[b] == rank;
    int w = 0;
    for (int i = 0; i < tg->n_params; i++)
        if (mine[i]) tg->params[w] = tg->params[i], tg->grads[w] = tg->grads[i], tg->update_after[w] = tg->update_after[i], w++;
    tg->n_params = w;
    tg->block_of = NULL; /* this rank's share of the blocks: --dump-grads writes them one by one */
    free(mine);
    return SC_OK;
}

sc_status data_parallel_build(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    if (opt->ranks <= 1 || tg->n_params == 0) return SC_OK;
    size_t np = (size_t)tg->n_params + 1;
    grad_order *order = malloc(sizeof *order * np);
    int *start = malloc(sizeof(int) * (np + 1)), *pos = malloc(sizeof(int) * np), *owner = malloc(sizeof(int) * np);
    int64_t *bytes = calloc(np, sizeof(int64_t));
    sc_status st = order && start && pos && owner && bytes ? SC_OK : sc_errorf("out of memory bucketing gradients");
    int n = 0;
    if (!st) {
        for (int i = 0; i < tg->n_params; i++) order[i] = (grad_order){g->values[tg->grads[i]].producer, i};
        qsort(order, (size_t)tg->n_params, sizeof *order, by_producer);
        n = buckets_cut(g, tg, order, bucket_cap(g, tg, opt), start, pos, bytes);
        owners_pick(bytes, n, opt->ranks, owner);
    }
    int first = g->n_nodes;
    for (int b = 0; !st && b < n; b++) {
        sc_all_reduce_attrs a = {opt->ranks, b, opt->shard_optimizer ? owner[b] : 0};
        st = opt->shard_optimizer ? bucket_emit(g, tg, order, start[b], start[b + 1], &a, SC_OP_REDUCE, owner[b] == opt->rank)
                                  : bucket_emit(g, tg, order, start[b], start[b + 1], &a, SC_OP_ALL_REDUCE, true);
    }
    if (!st) st = tb_place_new_nodes(g, first, pos);
    if (!st) st = updates_lag(g, tg, order, start, n);
    if (!st && opt->shard_optimizer) st = params_keep_owned(g, tg, order, start, owner, n, opt->rank);
    SC_FREE_ALL(order, start, pos, owner, bytes);
    return st;
}

/* The update node that writes parameter w (its consumer of op SGDUpdate or AdamWUpdate), or -1. */
static int update_of(const sc_graph *g, int w) {
    const sc_value *v = &g->values[w];
    for (int c = 0; c < v->n_consumers; c++) {
        const sc_node *n = &g->nodes[v->consumers[c]];
        if ((n->op == SC_OP_SGD_UPDATE || n->op == SC_OP_ADAMW_UPDATE) && n->in[0] == w) return v->consumers[c];
    }
    return -1;
}

/* Sharding, after the updates: per bucket, in the order of the Reduce nodes, a Broadcast from its
 * owner of its parameters (the owner's updated ones) into every rank's, at the end of the step. */
sc_status data_parallel_finish(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    if (opt->ranks <= 1 || !opt->shard_optimizer || tg->n_all_params == 0) return SC_OK;
    int n_nodes = g->n_nodes, at = 0;
    sc_status st = SC_OK;
    for (int i = 0; !st && i < n_nodes; i++) { /* the Reduce nodes are in bucket order (placed by position) */
        if (g->nodes[i].op != SC_OP_REDUCE) continue;
        sc_all_reduce_attrs a = g->nodes[i].attrs->all_reduce;
        int n = g->nodes[i].n_in;
        SC_ASSERT(at + n <= tg->n_all_params);
        int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
        if (!in || !out) st = sc_errorf("out of memory sharding the optimizer");
        for (int k = 0; !st && k < n; k++) {
            int w = tg->all_params[at + k];
            int u = a.owner == opt->rank ? update_of(g, w) : -1;
            in[k] = u >= 0 ? g->nodes[u].out[0] : w;
            char name[600];
            snprintf(name, sizeof name, "%s.broadcast", g->values[w].name);
            out[k] = graph_add_value_unique(g, name, SC_VALUE_ACT, NULL, &st);
        }
        at += n;
        char name[64];
        snprintf(name, sizeof name, "broadcast.bucket%d", a.bucket);
        int node = st ? -1 : graph_add_node(g, SC_OP_BROADCAST, name, in, n, out, n, &st);
        if (node >= 0) {
            sc_attrs attrs = {0};
            attrs.all_reduce = a;
            st = graph_node_set_attrs(g, &g->nodes[node], &attrs);
            for (int k = 0; !st && k < n; k++) g->values[out[k]].producer = node;
            if (!st) st = sc_shape_fns[SC_OP_BROADCAST](g, &g->nodes[node]);
        }
        free(in);
        free(out);
    }
    return st ? st : graph_link(g);
}
