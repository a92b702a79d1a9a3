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
 * so the first collective starts early), and each bucket's AllReduce is placed right after its last
 * gradient is produced. One collective per bucket keeps the per-message latency off the small
 * tensors (biases, norms), and the optimizer updates still follow each bucket closely, freeing its
 * gradients. Every rank builds the same graph, so the buckets and their order agree by construction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/train_internal.h"
#include "graph/shape.h"

#define FIRST_BUCKET_BYTES ((int64_t)1 << 20)

typedef struct {
    int producer, param;
} grad_order;

static int by_producer(const void *a, const void *b) {
    const grad_order *x = a, *y = b;
    return x->producer != y->producer ? (x->producer < y->producer ? -1 : 1) : (x->param > y->param) - (x->param < y->param);
}

/* One AllReduce over tg->grads[order[lo..hi)]; the parameters' gradients become its outputs. */
static sc_status bucket_emit(sc_graph *g, sc_training_graph *tg, const grad_order *order, int lo, int hi, int ranks,
                             int bucket) {
    int n = hi - lo;
    int *in = malloc(sizeof(int) * (size_t)n), *out = malloc(sizeof(int) * (size_t)n);
    sc_status st = in && out ? SC_OK : sc_errorf("out of memory bucketing gradients");
    for (int k = 0; !st && k < n; k++) {
        int i = order[lo + k].param;
        in[k] = tg->grads[i];
        char name[600];
        snprintf(name, sizeof name, "%s.grad_mean", g->values[tg->params[i]].name);
        out[k] = graph_add_value_unique(g, name, SC_VALUE_ACT, NULL, &st);
    }
    char name[64];
    snprintf(name, sizeof name, "allreduce.bucket%d", bucket);
    int node = st ? -1 : graph_add_node(g, SC_OP_ALL_REDUCE, name, in, n, out, n, &st);
    if (node >= 0) {
        sc_attrs a = {0};
        a.all_reduce = (sc_all_reduce_attrs){ranks, bucket};
        st = graph_node_set_attrs(g, &g->nodes[node], &a);
        for (int k = 0; !st && k < n; k++) g->values[out[k]].producer = node;
        if (!st) st = sc_shape_fns[SC_OP_ALL_REDUCE](g, &g->nodes[node]);
        for (int k = 0; !st && k < n; k++) tg->grads[order[lo + k].param] = out[k];
    }
    free(in);
    free(out);
    return st;
}

sc_status data_parallel_build(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg) {
    if (opt->ranks <= 1 || tg->n_params == 0) return SC_OK;
    int64_t cap = opt->bucket_bytes > 0 ? opt->bucket_bytes : SC_BUCKET_BYTES_DEFAULT;
    grad_order *order = malloc(sizeof *order * (size_t)tg->n_params);
    int *pos = malloc(sizeof(int) * ((size_t)tg->n_params + 1));
    if (!order || !pos) {
        free(order);
        free(pos);
        return sc_errorf("out of memory bucketing gradients");
    }
    for (int i = 0; i < tg->n_params; i++) order[i] = (grad_order){g->values[tg->grads[i]].producer, i};
    qsort(order, (size_t)tg->n_params, sizeof *order, by_producer);
    int first = g->n_nodes, buckets = 0, lo = 0;
    int64_t bytes = 0;
    sc_status st = SC_OK;
    for (int k = 0; k < tg->n_params && !st; k++) {
        int64_t b = sc_desc_bytes(&g->values[tg->grads[order[k].param]].desc);
        bytes += b > 0 ? b : 0;
        bool last = k + 1 == tg->n_params;
        if (!last && bytes < (buckets == 0 ? (cap < FIRST_BUCKET_BYTES ? cap : FIRST_BUCKET_BYTES) : cap)) continue;
        pos[buckets] = order[k].producer;
        st = bucket_emit(g, tg, order, lo, k + 1, opt->ranks, buckets);
        buckets++;
        lo = k + 1;
        bytes = 0;
    }
    free(order);
    if (!st) st = tb_place_new_nodes(g, first, pos);
    free(pos);
    return st;
}
