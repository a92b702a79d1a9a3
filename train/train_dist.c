/* Data-parallel sessions (trainer.h; the process group of backends/comm.h): what a rank must agree
 * on with the others so that N ranks run one training job.
 *
 *   - The plans. Each rank plans its own device, and a plan decides the order of the AllReduce
 *     steps, which every rank must run in the same order (a collective is matched by order). The
 *     node times the planners use come from rank 0 (its cost profile or calibration), so equal
 *     budgets give equal plans; then the ranks compare the order of their collectives and refuse to
 *     start when it differs, naming the ranks, instead of deadlocking at the first step.
 *   - The outcome of every step. A rank whose step failed (a non-finite loss on its shard, an out of
 *     memory) would leave the others waiting in the next collective; every step ends with the ranks
 *     exchanging their outcome, so all fail together, each naming the rank and its message.
 *   - The loss reported: the mean of the ranks' losses, the loss of the global batch (equal shards).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "core/clock.h"
#include "core/stats.h"
#include "train/trainer_internal.h"

uint64_t train_shard_sample_at(const sc_trainer *t, uint64_t global) {
    return global + (uint64_t)(sc_comm_rank() * t->data.batch);
}
uint64_t train_shard_sample(const sc_trainer *t) { return train_shard_sample_at(t, t->sample); }

/* Median seconds of `reps` mean all-reduces of n floats (after one unmeasured). */
static sc_status allreduce_time(float *buf, int64_t n, int reps, double *median) {
    double t[9];
    SC_TRY(sc_comm_allreduce_mean(buf, n, SC_F32, "measuring the collectives"));
    for (int r = 0; r < reps; r++) {
        double t0 = sc_clock_seconds();
        SC_TRY(sc_comm_allreduce_mean(buf, n, SC_F32, "measuring the collectives"));
        t[r] = sc_clock_seconds() - t0;
    }
    *median = sc_median(t, (size_t)reps);
    return SC_OK;
}

sc_status train_dist_measure_link(char *desc, size_t desc_size) {
    int n = sc_comm_size();
    if (n == 1) return SC_OK;
    int64_t big = (int64_t)4 << 20; /* 16 MiB of f32: a bucket's size */
    float *buf = calloc((size_t)big, sizeof(float));
    if (!buf) return sc_errorf("out of memory measuring the collectives");
    double t[2] = {0, 0}; /* latency (8 bytes), big */
    sc_status st = allreduce_time(buf, 2, 7, &t[0]);
    if (!st) st = allreduce_time(buf, big, 3, &t[1]);
    free(buf);
    if (!st) st = sc_comm_allreduce_f64(t, 2, SC_COMM_MAX, "measuring the collectives"); /* one figure for all */
    SC_TRY(st);
    double wire = 2.0 * (n - 1) / n * (double)big * sizeof(float);
    double bw = t[1] > t[0] ? wire / (t[1] - t[0]) : 0;
    cost_set_comm_link(bw, t[0]);
    snprintf(desc, desc_size, "collectives measured at %.2f GB/s and %.0f us per all-reduce", bw / 1e9, t[0] * 1e6);
    return SC_OK;
}

sc_status train_dist_share_profile(sc_status st, sc_cost_profile *p, char *from, size_t from_size) {
    if (sc_comm_size() == 1) return st;
    SC_TRY(sc_comm_agree(st, "measuring the cost profile"));
    SC_TRY(sc_comm_bcast(p, sizeof *p, 0, "sharing the cost profile"));
    return sc_comm_bcast(from, (int64_t)from_size, 0, "sharing the cost profile");
}

sc_status train_dist_share_shapes(sc_status st, sc_shape_table *t, char *where, size_t where_size) {
    if (sc_comm_size() == 1) return st;
    SC_TRY(sc_comm_agree(st, "measuring the kernel shapes"));
    char *text = NULL;
    size_t len = 0;
    if (sc_comm_rank() == 0) SC_TRY(sc_shape_table_text(t, NULL, &text, &len));
    int64_t n = (int64_t)len;
    sc_status bst = sc_comm_bcast(&n, sizeof n, 0, "sharing the kernel shapes");
    if (!bst && sc_comm_rank() != 0 && !(text = malloc((size_t)n + 1))) bst = sc_errorf("out of memory");
    if (!bst) bst = sc_comm_bcast(text, n, 0, "sharing the kernel shapes");
    if (!bst && sc_comm_rank() != 0) {
        text[n] = 0;
        bst = sc_shape_table_parse(text, t);
    }
    free(text);
    if (!bst) bst = sc_comm_bcast(where, (int64_t)where_size, 0, "sharing the kernel shapes");
    return bst;
}

sc_status train_dist_share_times(sc_trainer *t, sc_plan_options *o) {
    if (sc_comm_size() == 1) return SC_OK;
    const sc_graph *g = &t->model->graph;
    double have[3] = {o->node_time ? 1 : 0, g->n_nodes, -g->n_nodes};
    SC_TRY(sc_comm_allreduce_f64(have, 3, SC_COMM_MIN, "sharing the node times"));
    if (have[0] == 0) return SC_OK; /* a rank uses the built-in constants: every rank's are the same */
    if (have[1] != -have[2])
        return sc_errorf("measured node times cannot be shared between ranks whose training graphs differ (a sharded "
                         "optimizer gives each rank its own updates): drop --calibrate, the cost profile is shared");
    double *mine = (double *)o->node_time; /* t->profile_time or t->cal.node_time: the session's own */
    SC_TRY(sc_comm_bcast(mine, (int64_t)sizeof(double) * g->n_nodes, 0, "sharing the node times"));
    double link = o->link_bandwidth;
    SC_TRY(sc_comm_bcast(&link, sizeof link, 0, "sharing the link bandwidth"));
    o->link_bandwidth = link;
    return SC_OK;
}

/* FNV-1a over the (op, bucket) of the plan's collective RUN steps, in order (with a sharded optimizer
 * the graphs, and so the node ids, differ per rank; the collectives must not). */
static uint64_t collectives_hash(const sc_graph *g, const sc_plan *p, int *count) {
    uint64_t h = 1469598103934665603ULL;
    *count = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const sc_step *s = &p->steps[i];
        if (s->kind != SC_STEP_RUN || !sc_op_is_collective(g->nodes[s->node].op)) continue;
        const sc_node *n = &g->nodes[s->node];
        h = (h ^ (uint64_t)n->op) * 1099511628211ULL;
        h = (h ^ (uint64_t)n->attrs->all_reduce.bucket) * 1099511628211ULL;
        (*count)++;
    }
    return h;
}

sc_status train_dist_check_plan(const sc_trainer *t) {
    int size = sc_comm_size();
    if (size == 1) return SC_OK;
    int count;
    uint64_t mine[2] = {collectives_hash(&t->model->graph, &t->plan, &count), 0};
    mine[1] = (uint64_t)count;
    uint64_t *all = malloc(sizeof mine * (size_t)size);
    if (!all) return sc_errorf("out of memory");
    sc_status st = sc_comm_allgather(mine, all, sizeof mine, "comparing the plans");
    for (int r = 1; !st && r < size; r++)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
            st = sc_errorf("rank %d's plan runs its %llu collectives in another order than rank 0's %llu: give every rank "
                           "the same --memory, strategy and offload (ranks whose devices differ in free memory need "
                           "an explicit --memory)",
                           r, (unsigned long long)all[2 * r + 1], (unsigned long long)all[1]);
    free(all);
    return st;
}

sc_status train_dist_step_end(sc_trainer *t, sc_status st, int64_t step, double *loss) {
    if (sc_comm_size() == 1) return st;
    (void)t;
    char what[64];
    snprintf(what, sizeof what, "step %lld", (long long)step);
    SC_TRY(sc_comm_agree(st, what));
    double sum = *loss;
    SC_TRY(sc_comm_allreduce_f64(&sum, 1, SC_COMM_SUM, "the step's loss"));
    *loss = sum / sc_comm_size();
    return SC_OK;
}

/* One gradient as a record: u32 name length, name, u32 dtype, u32 rank, i64 dims[rank], u64 bytes,
 * data (the layout of the state file's records, train_state.c). */
static bool record_put(FILE *f, const char *name, const sc_desc *d, const void *data) {
    uint32_t len = (uint32_t)strlen(name), dtype = (uint32_t)d->dtype, rank = (uint32_t)d->rank;
    uint64_t bytes = (uint64_t)sc_desc_bytes(d);
    return fwrite(&len, 4, 1, f) == 1 && fwrite(name, 1, len, f) == len && fwrite(&dtype, 4, 1, f) == 1 &&
           fwrite(&rank, 4, 1, f) == 1 && fwrite(d->dims, 8, rank, f) == rank && fwrite(&bytes, 8, 1, f) == 1 &&
           fwrite(data, 1, bytes, f) == bytes;
}

sc_status train_dist_gather_grads(sc_trainer *t, int (*output_of)(const sc_graph *, int), char **all, int64_t *total) {
    const sc_graph *g = &t->model->graph;
    *all = NULL;
    *total = 0;
    char *mine = NULL;
    size_t len = 0;
    sc_status st = SC_OK;
    if (sc_comm_rank() != 0) {
        FILE *f = open_memstream(&mine, &len);
        bool ok = f != NULL;
        for (int i = 0; ok && i < t->tg.n_params; i++) {
            int o = output_of(g, t->tg.grads[i]);
            ok = o >= 0 && record_put(f, g->values[t->tg.params[i]].name, &g->values[t->tg.params[i]].desc, t->outs[o].data);
        }
        if (f && fclose(f) != 0) ok = false;
        if (!ok) st = sc_errorf("out of memory serialising this rank's gradients");
    }
    st = sc_comm_agree(st, "gathering the gradients");
    int64_t *sizes = calloc((size_t)sc_comm_size(), sizeof(int64_t));
    if (!st && !sizes) st = sc_errorf("out of memory");
    if (!st) st = sc_comm_gather(mine, (int64_t)len, 0, all, sizes, "gathering the gradients");
    for (int r = 0; !st && sizes && r < sc_comm_size(); r++) *total += sizes[r];
    free(mine);
    free(sizes);
    return st;
}

sc_status train_dist_record_next(const char **p, const char *end, char *name, size_t name_size, sc_tensor *x) {
    uint32_t len, dtype, rank;
    uint64_t bytes;
    if (end - *p < 4) return sc_errorf("internal: a gathered gradient record is cut short");
    memcpy(&len, *p, 4);
    if (len >= name_size || end - *p < 4 + (int64_t)len + 8) return sc_errorf("internal: a gathered gradient record is corrupt");
    memcpy(name, *p + 4, len);
    name[len] = 0;
    *p += 4 + len;
    memcpy(&dtype, *p, 4);
    memcpy(&rank, *p + 4, 4);
    *p += 8;
    if (rank > SC_MAX_RANK || end - *p < 8 * (int64_t)rank + 8) return sc_errorf("internal: a gathered gradient record is corrupt");
    memset(&x->desc, 0, sizeof x->desc);
    x->desc.dtype = (sc_dtype)dtype;
    x->desc.rank = (int)rank;
    memcpy(x->desc.dims, *p, 8 * (size_t)rank);
    *p += 8 * rank;
    memcpy(&bytes, *p, 8);
    *p += 8;
    if ((uint64_t)(end - *p) < bytes || bytes != (uint64_t)sc_desc_bytes(&x->desc))
        return sc_errorf("internal: a gathered gradient record is corrupt");
    x->data = (void *)*p;
    *p += bytes;
    return SC_OK;
}
