/* The timeline model of a plan's step (schedule/plan.h, plan_timeline): the one model behind the
 * planner's predictions (plan_predict), `plan`'s summary and trace, and `bench`.
 *
 * Four resources, each a FIFO:
 *   - the device's compute stream runs RUN steps back to back, each for its node's time;
 *   - the link's host-to-device direction runs PREFETCHes and its device-to-host direction
 *     OFFLOADs, each starting when issued or when its direction frees up, for the link's latency
 *     plus bytes / link bandwidth (cost_transfer_time). The two directions are independent, as on
 *     a PCIe link (full duplex, one copy engine per direction on a GPU; one copy thread per
 *     direction on the CPU backend);
 *   - the host worker runs HOST_RUN updates, from when they are issued (plan_exec.c), for their
 *     node's time: they overlap the device steps after them (on the CPU backend they run inline,
 *     where the prediction is short by up to host_busy).
 *   - the collectives (data parallel, backends/plan_exec_comm.c): a collective RUN takes its node's
 *     time less its exchange (cost_node_comm_time: packing the bucket) on the compute stream, then
 *     the exchange runs on this resource; a later step that reads, offloads or frees one of its
 *     outputs waits for it (a stall when that is later).
 * A WAIT holds the compute stream until its transfer has finished (a stall when that is later).
 * The step ends when all five are idle; what the compute stream waits for then is stall too.
 * Every figure is a sum of the same doubles in the same order, so it is bit-identical wherever it
 * is computed. */
#include <stdlib.h>

#include "core/free_all.h"
#include "schedule/sched_internal.h"

static double later(double a, double b) { return a > b ? a : b; }

/* Step st reads, overwrites, offloads or frees a collective's result: the compute stream waits for it. */
static double collective_wait(const sc_graph *g, const sc_step *st, double *ready, double compute, double *stall) {
    double at = 0;
    if (st->kind == SC_STEP_RUN || st->kind == SC_STEP_HOST_RUN) {
        const sc_node *nd = &g->nodes[st->node];
        for (int k = 0; k < nd->n_in; k++)
            if (nd->in[k] >= 0) at = later(at, ready[nd->in[k]]);
    } else if ((st->kind == SC_STEP_FREE || st->kind == SC_STEP_OFFLOAD) && st->value >= 0) {
        at = ready[st->value];
    }
    if (at <= compute) return compute;
    *stall += at - compute;
    return at;
}

sc_status plan_timeline(const sc_graph *g, const sc_plan *p, const double *node_time, const sc_cost_model *m,
                        bool arrays, sc_timeline *tl) {
    int n = p->n_steps, n_tr = 0;
    *tl = (sc_timeline){0};
    for (int s = 0; s < n; s++)
        if (p->steps[s].transfer + 1 > n_tr) n_tr = p->steps[s].transfer + 1;
    if (arrays) {
        tl->t0 = malloc(((size_t)n + 1) * sizeof *tl->t0);
        tl->t1 = malloc(((size_t)n + 1) * sizeof *tl->t1);
        tl->track = malloc(((size_t)n + 1) * sizeof *tl->track);
    }
    double *done = calloc((size_t)n_tr + 1, sizeof *done);
    if ((arrays && (!tl->t0 || !tl->t1 || !tl->track)) || !done) {
        free(done);
        plan_timeline_free(tl);
        return sc_errorf("out of memory modelling a plan's step");
    }
    double compute = 0, link[2] = {0, 0}, host = 0, comm = 0;
    double *ready = NULL; /* per value: when a collective's result is in place (0: not one) */
    for (int s = 0; s < n && !ready; s++)
        if (p->steps[s].kind == SC_STEP_RUN && cost_node_comm_time(g, p->steps[s].node) > 0)
            ready = calloc((size_t)g->n_values + 1, sizeof *ready);
    for (int s = 0; s < n; s++) {
        const sc_step *st = &p->steps[s];
        int track = -1;
        if (ready) compute = collective_wait(g, st, ready, compute, &tl->stall);
        double t0 = compute, t1 = compute;
        double exchange = st->kind == SC_STEP_RUN && ready ? cost_node_comm_time(g, st->node) : 0;
        if (exchange > 0) {
            const sc_node *nd = &g->nodes[st->node];
            double pack = node_time[st->node] > exchange ? node_time[st->node] - exchange : 0;
            compute += pack;
            tl->compute_busy += pack;
            t0 = later(comm, compute);
            comm = t1 = t0 + exchange;
            tl->comm_busy += exchange;
            for (int o = 0; o < nd->n_out; o++)
                if (nd->out[o] >= 0) ready[nd->out[o]] = comm;
            if (arrays) tl->track[s] = SC_TRACK_COMM, tl->t0[s] = t0, tl->t1[s] = t1;
            continue;
        }
        switch (st->kind) {
        case SC_STEP_RUN:
            track = SC_TRACK_COMPUTE;
            compute += node_time[st->node];
            tl->compute_busy += node_time[st->node];
            t1 = compute;
            break;
        case SC_STEP_PREFETCH:
        case SC_STEP_OFFLOAD: {
            int d = st->kind == SC_STEP_OFFLOAD; /* 0 h2d, 1 d2h */
            int64_t b = plan_step_bytes(g, st);
            double dur = cost_transfer_time(m, b);
            t0 = later(link[d], compute);
            link[d] = t1 = t0 + dur;
            tl->link_busy[d] += dur;
            if (d) tl->bytes_d2h += b;
            else tl->bytes_h2d += b;
            track = d ? SC_TRACK_D2H : SC_TRACK_H2D;
            if (st->transfer >= 0) done[st->transfer] = link[d];
            break;
        }
        case SC_STEP_WAIT:
            if (st->transfer >= 0 && st->transfer < n_tr && done[st->transfer] > compute) {
                tl->stall += done[st->transfer] - compute;
                compute = done[st->transfer];
            }
            t1 = compute;
            break;
        case SC_STEP_HOST_RUN:
            track = SC_TRACK_HOST;
            t0 = later(host, compute);
            host = t1 = t0 + node_time[st->node];
            tl->host_busy += node_time[st->node];
            break;
        case SC_STEP_FREE:
            break;
        }
        if (arrays) tl->track[s] = track, tl->t0[s] = t0, tl->t1[s] = t1;
    }
    double end = later(later(later(link[0], link[1]), host), comm);
    if (end > compute) tl->stall += end - compute, compute = end;
    tl->total = compute;
    free(done);
    free(ready);
    return SC_OK;
}

void plan_timeline_free(sc_timeline *tl) {
    SC_FREE_ALL(tl->t0, tl->t1, tl->track);
    tl->t0 = tl->t1 = NULL;
    tl->track = NULL;
}

const char *plan_timeline_bound(const sc_timeline *tl) {
    double h2d = tl->link_busy[0], d2h = tl->link_busy[1], link = later(h2d, d2h);
    if (tl->comm_busy > tl->compute_busy && tl->comm_busy > link && tl->comm_busy > tl->host_busy)
        return "collectives between ranks";
    if (link > tl->compute_busy && link > tl->host_busy) return h2d >= d2h ? "link (host to device)" : "link (device to host)";
    return tl->host_busy > tl->compute_busy ? "host updates" : "device compute";
}
