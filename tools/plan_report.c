/* Plan summaries: the figures of a plan, as text or JSON (plan_report.h has the contract). Traces and
 * SVG files are in plan_files.c, the command-line options in plan_args.c. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "graph/op_cost.h"
#include "tools/plan_internal.h"
#include "tools/plan_report.h"
#include "train/trainer.h" /* sc_device */

/* ---- sizes ---- */

const char *fmt_bytes(int64_t b, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (fabs(v) >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0) snprintf(buf, n, "%lld B", (long long)b);
    else snprintf(buf, n, "%.2f %s", v, units[u]);
    return buf;
}

/* Interval i's last step for memory figures: an interval whose block a later one took over
 * (plan->iv_from) stops counting when the taker opens, since the two share one block there. NULL
 * when out of memory. */
int *plan_effective_ends(const sc_plan *p) {
    int *e = malloc(((size_t)p->n_intervals + 1) * sizeof *e);
    if (!e) return NULL;
    for (int i = 0; i < p->n_intervals; i++) e[i] = p->intervals[i].end;
    for (int i = 0; p->iv_from && i < p->n_intervals; i++)
        if (p->iv_from[i] >= 0) e[p->iv_from[i]] = p->intervals[i].begin - 1;
    return e;
}

/* Seconds of every node under m, evaluated once: a checkpointed plan runs each forward node several
 * times (32M RUN steps over 5M nodes at depth 250000), and the same doubles summed in the same
 * order keep every figure bit-identical to evaluating the model per step. */
double *plan_node_times(const sc_graph *g, const sc_cost_model *m) {
    double *t = malloc(((size_t)g->n_nodes + 1) * sizeof *t);
    if (t)
        for (int i = 0; i < g->n_nodes; i++) t[i] = cost_node_time(m, g, i);
    return t;
}

static sc_status timeline_total(const sc_graph *g, const sc_plan *p, const sc_cost_model *m, const double *nt,
                                double *seconds) {
    sc_timeline tl;
    SC_TRY(plan_timeline(g, p, nt, m, false, &tl));
    *seconds = tl.total;
    return SC_OK;
}

sc_status plan_timeline_time(const sc_graph *g, const sc_plan *p, const sc_cost_model *m, double *seconds) {
    double *nt = plan_node_times(g, m);
    if (!nt) return sc_errorf("out of memory");
    sc_status st = timeline_total(g, p, m, nt, seconds);
    free(nt);
    return st;
}

sc_status plan_calibrate(sc_trainer *t, const sc_graph *g, sc_plan_options *o, sc_calibration *c, FILE *f) {
    SC_TRY(sc_trainer_calibrate(t, SC_CALIBRATE_WARMUP, SC_CALIBRATE_RUNS, c));
    sc_status st = sc_calibration_check(c, g);
    if (st) {
        sc_calibration_free(c);
        return st;
    }
    o->node_time = c->node_time;
    if (!(o->link_bandwidth > 0)) o->link_bandwidth = c->link_bandwidth; /* a --link-bandwidth stays */
    if (f) plan_calibration_print(c, g, f);
    return SC_OK;
}

void plan_calibration_print(const sc_calibration *c, const sc_graph *g, FILE *f) {
    double sum = 0, model = 0;
    sc_cost_model m;
    cost_model_default(&m, 0, NULL);
    for (int i = 0; i < c->n_nodes; i++) sum += c->node_time[i], model += cost_node_time(&m, g, i);
    fprintf(f, "calibrated     %d nodes on the CPU backend (median of %d runs after %d warm-up): store-all step "
               "%.4g s measured, %.4g s in its nodes, %.4g s by the uncalibrated cost model; link %.3g GB/s\n",
            c->n_nodes, c->runs, SC_CALIBRATE_WARMUP, c->step_time, sum, model, c->link_bandwidth * 1e-9);
}

/* The highest total of the per-step resident bytes: memory_by_step's three kinds summed, with one
 * array instead of three (integers, so the sum of the prefix sums is the prefix sum of the sums). */
static sc_status live_peak(const sc_plan *p, int64_t *peak) {
    int n = p->n_steps;
    int64_t *d = calloc((size_t)n + 2, sizeof *d);
    int *eff = plan_effective_ends(p);
    if (!d || !eff) {
        free(d);
        free(eff);
        return sc_errorf("out of memory");
    }
    for (int i = p->n_fixed_intervals; i < p->n_intervals; i++) {
        const sc_interval *iv = &p->intervals[i];
        if (iv->begin < 0 || iv->begin >= n || eff[i] < iv->begin) continue;
        int end = eff[i] >= n ? n - 1 : eff[i];
        d[iv->begin] += iv->bytes;
        d[end + 1] -= iv->bytes;
    }
    *peak = p->fixed_bytes;
    int64_t live = 0;
    for (int s = 0; s < n; s++) {
        live += d[s];
        if (p->fixed_bytes + live > *peak) *peak = p->fixed_bytes + live;
    }
    free(d);
    free(eff);
    return SC_OK;
}

sc_status plan_summary_fill(const sc_graph *g, const sc_training_graph *tg, const sc_plan *p, const sc_cost_model *m,
                            plan_summary *s) {
    s->param_bytes = s->state_bytes = 0;
    for (int i = 0; i < tg->n_params; i++) s->param_bytes += sc_desc_bytes(&g->values[tg->params[i]].desc);
    for (int i = 0; i < tg->n_states; i++) s->state_bytes += sc_desc_bytes(&g->values[tg->states[i]].desc);
    s->params = plan_param_count(g);
    plan_wire_bytes(g, p, s->bytes_16bit);
    s->split_params = s->row_blocks = 0;
    for (int i = 0; tg->block_of && i < tg->n_params; i++) {
        s->row_blocks += tg->block_of[i] >= 0;
        s->split_params += tg->block_of[i] >= 0 && (i == 0 || tg->block_of[i - 1] != tg->block_of[i]);
    }
    double *nt = plan_node_times(g, m);
    bool *ran = calloc((size_t)tg->n_forward_nodes + 1, 1);
    if (!ran || !nt) {
        free(ran);
        free(nt);
        return sc_errorf("out of memory");
    }
    s->compute_time = s->recompute_time = s->comm_time = s->comm_bytes = 0;
    s->recompute_runs = 0;
    s->n_collectives = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const sc_step *st = &p->steps[i];
        if (st->kind != SC_STEP_RUN) continue;
        double t = nt[st->node];
        s->compute_time += t;
        if (g->nodes[st->node].op == SC_OP_ALL_REDUCE) {
            s->n_collectives++;
            s->comm_time += cost_node_comm_time(g, st->node);
            s->comm_bytes += sc_node_cost(g, &g->nodes[st->node]).comm_bytes;
        }
        if (st->node < tg->n_forward_nodes) {
            if (ran[st->node]) s->recompute_time += t, s->recompute_runs++;
            ran[st->node] = true;
        }
    }
    free(ran);
    sc_timeline tl;
    sc_status st = plan_timeline(g, p, nt, m, false, &tl);
    free(nt);
    SC_TRY(st);
    s->timeline_time = tl.total;
    s->link_time[0] = tl.link_busy[0];
    s->link_time[1] = tl.link_busy[1];
    s->bound = plan_timeline_bound(&tl);
    sc_cost_model model;
    cost_model_default(&model, 0, NULL);
    s->calibrated = m->node_time != NULL && !s->profiled;
    bool same = m->node_time == NULL && m->peak_flops == model.peak_flops && m->mem_bandwidth == model.mem_bandwidth &&
                m->link_bandwidth == model.link_bandwidth; /* the same computation again: same result */
    if (same) s->model_time = s->timeline_time;
    else SC_TRY(plan_timeline_time(g, p, &model, &s->model_time));
    SC_TRY(live_peak(p, &s->peak_live));
    s->peak_activations = p->arena_bytes - p->fixed_bytes;
    return SC_OK;
}

/* ---- summary ---- */

/* Whether the plan was made for a GPU (plan --device), not the CPU. */
static bool on_gpu(const plan_summary *s) { return s->device && strcmp(s->device, "cpu"); }

/* The measured step against the predictions: wall time, and the kernels' CPU time when there is
 * one (none on a GPU). */
static void measured_print(FILE *f, const plan_summary *s, const sc_plan *p) {
    bool kernels = s->measured_kernel_time > 0;
    if (kernels)
        fprintf(f, "measured       %.4g s per step, kernels %.4g s of thread CPU time (medians of %d steps after a "
                   "warm-up, the kernels' from %d more with the profile hook; %d threads)\n", s->measured_time,
                s->measured_kernel_time, s->measured_steps, s->measured_steps, s->measured_threads);
    else
        fprintf(f, "measured       %.4g s per step (median of %d steps after a warm-up)\n", s->measured_time,
                s->measured_steps);
    fprintf(f, "error          prediction %+.1f%% of the wall time", 100.0 * (p->predicted_time / s->measured_time - 1.0));
    if (kernels) fprintf(f, ", %+.1f%% of the kernel time", 100.0 * (p->predicted_time / s->measured_kernel_time - 1.0));
    if (s->calibrated || s->profiled) {
        fprintf(f, "; built-in constants %+.1f%%", 100.0 * (s->model_time / s->measured_time - 1.0));
        if (kernels) fprintf(f, ", %+.1f%%", 100.0 * (s->model_time / s->measured_kernel_time - 1.0));
    }
    fputc('\n', f);
}

void plan_summary_print(FILE *f, const plan_summary *s, const sc_plan *p) {
    char a[32], b[32], c[32], d[32];
    fprintf(f, "model          %s (batch %lld", s->model, (long long)s->batch);
    if (s->seq) fprintf(f, ", seq %lld", (long long)s->seq);
    if (s->precision && strcmp(s->precision, "fp32")) fprintf(f, ", %s mixed precision", s->precision);
    fprintf(f, ")\n");
    if (on_gpu(s)) fprintf(f, "device         %s\n", s->device);
    fprintf(f, "budget         %s\n", s->budget ? fmt_bytes(s->budget, a, sizeof a) : "unlimited");
    fprintf(f, "strategy       %s (asked: %s", plan_strategy_name(p->strategy), s->requested);
    if (s->slots) fprintf(f, ", %d slots", s->slots);
    fprintf(f, "), offload %s (asked: %s", plan_offload_name(p->offload), s->offload);
    if (p->offload_window >= 0 && p->offload != SC_OFFLOAD_NONE) fprintf(f, ", look-ahead %d runs", p->offload_window);
    fprintf(f, ")\n");
    fprintf(f, "segments       %d", p->n_segments);
    if (p->refined_keeps > 0)
        fprintf(f, " (refined: %d values kept resident instead of recomputed, %d recomputations dropped)",
                p->refined_keeps, p->refined_drops);
    fputc('\n', f);
    fprintf(f, "steps          %d (%d intervals)\n", p->n_steps, p->n_intervals);
    fprintf(f, "planned peak   %s (arena; live peak %s) = fixed region %s + the rest %s\n",
            fmt_bytes(p->arena_bytes, a, sizeof a), fmt_bytes(s->peak_live, b, sizeof b),
            fmt_bytes(p->fixed_bytes, c, sizeof c), fmt_bytes(s->peak_activations, d, sizeof d));
    if (s->none_peak > 0) {
        int64_t act0 = s->none_peak - s->none_fixed;
        fprintf(f, "store-all peak %s = fixed %s + activations %s; this plan needs %.1f%% of it", fmt_bytes(s->none_peak, a, sizeof a),
                fmt_bytes(s->none_fixed, b, sizeof b), fmt_bytes(act0, c, sizeof c),
                100.0 * (double)p->arena_bytes / (double)s->none_peak);
        if (act0 > 0 && p->offload == SC_OFFLOAD_NONE)
            fprintf(f, ", activations cut by %.1f%%", 100.0 * (1.0 - (double)s->peak_activations / (double)act0));
        fputc('\n', f);
    }
    fprintf(f, "fixed          %s resident (parameters %s and optimizer state %s in all%s)\n",
            fmt_bytes(p->fixed_bytes, a, sizeof a), fmt_bytes(s->param_bytes, b, sizeof b),
            fmt_bytes(s->state_bytes, c, sizeof c),
            p->offload == SC_OFFLOAD_WEIGHTS || p->offload == SC_OFFLOAD_BOTH ? ", streamed from host memory" : "");
    fprintf(f, "flops          %.4g (recompute %.4g, %.1f%% of the flops, %.1f%% of compute time, %lld runs)\n",
            p->flops, p->recompute_flops, p->flops > 0 ? 100.0 * p->recompute_flops / p->flops : 0.0,
            s->compute_time > 0 ? 100.0 * s->recompute_time / s->compute_time : 0.0, (long long)s->recompute_runs);
    double per = s->params > 0 ? (double)s->params : 1;
    fprintf(f, "moved          h2d %s (%.2f B/param), d2h %s (%.2f B/param) per step", fmt_bytes(p->bytes_h2d, a, sizeof a),
            (double)p->bytes_h2d / per, fmt_bytes(p->bytes_d2h, b, sizeof b), (double)p->bytes_d2h / per);
    if (s->bytes_16bit[0] + s->bytes_16bit[1] > 0)
        fprintf(f, "; in 16 bits (mixed precision, lossless): %s and %s", fmt_bytes(s->bytes_16bit[0], a, sizeof a),
                fmt_bytes(s->bytes_16bit[1], b, sizeof b));
    fputc('\n', f);
    if (p->host_bytes > 0)
        fprintf(f, "host copies    %s of host memory for moved values (offloaded activations, gradients for host "
                   "updates), beside the parameters and state\n", fmt_bytes(p->host_bytes, a, sizeof a));
    fprintf(f, "resources      device compute %.4g s, link %.4g s host to device and %.4g s back, host updates %.4g s: "
               "bound by %s\n", s->compute_time, s->link_time[0], s->link_time[1], p->host_time, s->bound);
    if (s->ranks > 1)
        fprintf(f, "ranks          one of %d data-parallel ranks (global batch %lld): %d gradient all-reduces, %s sent "
                   "and received per rank, %.4g s of the step predicted\n",
                s->ranks, (long long)(s->batch * s->ranks), s->n_collectives, fmt_bytes((int64_t)s->comm_bytes, a, sizeof a),
                s->comm_time);
    if (s->split_params)
        fprintf(f, "row blocks     %d parameter%s read by whole rows train%s as %d row blocks (--param-block)\n",
                s->split_params, s->split_params > 1 ? "s" : "", s->split_params > 1 ? "" : "s", s->row_blocks);
    fprintf(f, "updates        %s", p->update_on == SC_UPDATE_HOST ? "streamed parameters update on the host" : "on the device");
    if (p->n_host_updates) fprintf(f, " (%d host updates, %.4g s predicted)", p->n_host_updates, p->host_time);
    if (p->n_resident)
        fprintf(f, "; %d small parameter%s (%s with state, each group at most %s) stay%s resident and update%s on the "
                   "device", p->n_resident, p->n_resident > 1 ? "s" : "", fmt_bytes(p->resident_bytes, a, sizeof a),
                fmt_bytes(p->resident_max, b, sizeof b), p->n_resident > 1 ? "" : "s", p->n_resident > 1 ? "" : "s");
    fputc('\n', f);
    fprintf(f, "step time      %.4g s predicted%s (compute %.4g s, recompute %.4g s, waiting on transfers %.4g s)\n",
            p->predicted_time, s->calibrated ? " with calibrated node times"
            : s->profiled && on_gpu(s) ? " by the GPU's cost profile"
            : s->profiled ? " by this machine's cost profile"
                          : " by the cost model",
            s->compute_time, s->recompute_time, p->stall_time);
    if (s->cost_source && !s->calibrated) fprintf(f, "cost model     %s\n", s->cost_source);
    if (s->budget_cheap >= 0 && s->none_time > 0) {
        fprintf(f, "warning        this plan is predicted %.2fx the store-everything step (%.4g s): ",
                p->predicted_time / s->none_time, s->none_time);
        if (s->budget_cheap > 0)
            fprintf(f, "at --memory %lld (%s) it is %.2fx\n", (long long)s->budget_cheap,
                    fmt_bytes(s->budget_cheap, a, sizeof a), s->time_cheap / s->none_time);
        else
            fprintf(f, "no budget below the store-everything peak brings it within %.2fx; consider --offload\n",
                    PLAN_CHEAP_RATIO);
    }
    if (s->calibrated || s->profiled) fprintf(f, "               %.4g s by the built-in constants\n", s->model_time);
    if (s->measured_time > 0) measured_print(f, s, p);
}

/* "param_updates": {name: "host" | "device" | "device, streamed"} for each trainable parameter of
 * a streaming plan (schedule/resident.c); null without streaming or past PARAM_UPDATES_MAX. */
enum { PARAM_UPDATES_MAX = 100000 };
static void param_updates_json(FILE *f, const sc_graph *g, const sc_plan *p) {
    static const char *const names[] = {[SC_WHERE_HOST] = "host", [SC_WHERE_DEVICE_RESIDENT] = "device",
                                        [SC_WHERE_DEVICE_STREAMED] = "device, streamed"};
    sc_update_where *where = malloc(sizeof *where * ((size_t)g->n_values + 1));
    int n = 0;
    if (where) plan_update_places(g, p, where);
    for (int v = 0; where && v < g->n_values; v++) n += where[v] != SC_WHERE_NONE;
    if (!where || p->offload == SC_OFFLOAD_NONE || n > PARAM_UPDATES_MAX) {
        fprintf(f, "\"param_updates\": null, ");
        free(where);
        return;
    }
    char m[512];
    fprintf(f, "\"param_updates\": {");
    for (int v = 0, k = 0; v < g->n_values; v++)
        if (where[v] != SC_WHERE_NONE)
            fprintf(f, "%s\"%s\": \"%s\"", k++ ? ", " : "", sb_safe(g->values[v].name, m, sizeof m), names[where[v]]);
    fprintf(f, "}, ");
    free(where);
}

void plan_summary_json(FILE *f, const sc_graph *g, const plan_summary *s, const sc_plan *p) {
    char m[1024];
    fprintf(f, "{\"model\": \"%s\", \"batch\": %lld, \"seq\": %lld, \"precision\": \"%s\", \"budget\": %lld, "
               "\"requested\": \"%s\", ",
            sb_safe(s->model, m, sizeof m), (long long)s->batch, (long long)s->seq, s->precision ? s->precision : "fp32",
            (long long)s->budget, s->requested);
    fprintf(f, "\"strategy\": \"%s\", \"requested_offload\": \"%s\", \"offload\": \"%s\", \"offload_window\": %d, ",
            plan_strategy_name(p->strategy), s->offload, plan_offload_name(p->offload), p->offload_window);
    fprintf(f, "\"slots\": %d, \"segments\": %d, \"refined_keeps\": %d, \"refined_drops\": %d, \"steps\": %d, ",
            s->slots, p->n_segments, p->refined_keeps, p->refined_drops, p->n_steps);
    fprintf(f, "\"intervals\": %d, \"planned_peak\": %lld, \"live_peak\": %lld, \"none_peak\": %lld, \"none_fixed\": %lld, ",
            p->n_intervals, (long long)p->arena_bytes, (long long)s->peak_live, (long long)s->none_peak,
            (long long)s->none_fixed);
    fprintf(f, "\"fixed_bytes\": %lld, \"param_bytes\": %lld, \"state_bytes\": %lld, \"activation_peak\": %lld, ",
            (long long)p->fixed_bytes, (long long)s->param_bytes, (long long)s->state_bytes,
            (long long)s->peak_activations);
    fprintf(f, "\"split_params\": %d, \"row_blocks\": %d, ", s->split_params, s->row_blocks);
    fprintf(f, "\"ranks\": %d, \"collectives\": %d, \"comm_bytes\": %.17g, \"comm_time\": %.17g, ", s->ranks > 1 ? s->ranks : 1,
            s->n_collectives, s->comm_bytes, s->comm_time);
    fprintf(f, "\"flops\": %.17g, \"recompute_flops\": %.17g, \"recompute_runs\": %lld, ", p->flops, p->recompute_flops,
            (long long)s->recompute_runs);
    fprintf(f, "\"compute_time\": %.17g, \"recompute_time\": %.17g, \"recompute_time_share\": %.17g, ", s->compute_time,
            s->recompute_time, s->compute_time > 0 ? s->recompute_time / s->compute_time : 0.0);
    fprintf(f, "\"bytes_h2d\": %lld, \"bytes_d2h\": %lld, \"bytes_h2d_16bit\": %lld, \"bytes_d2h_16bit\": %lld, "
               "\"stall_time\": %.17g, \"predicted_time\": %.17g, \"timeline_time\": %.17g, ",
            (long long)p->bytes_h2d, (long long)p->bytes_d2h, (long long)s->bytes_16bit[0], (long long)s->bytes_16bit[1],
            p->stall_time, p->predicted_time, s->timeline_time);
    fprintf(f, "\"params\": %lld, \"update_on\": \"%s\", \"host_updates\": %d, \"host_time\": %.17g, ", (long long)s->params,
            plan_update_name(p->update_on), p->n_host_updates, p->host_time);
    fprintf(f, "\"resident_params\": %d, \"resident_bytes\": %lld, \"resident_max\": %lld, ", p->n_resident,
            (long long)p->resident_bytes, (long long)p->resident_max);
    param_updates_json(f, g, p);
    fprintf(f, "\"none_time\": %.17g, \"budget_cheap\": %lld, \"time_cheap\": %.17g, ", s->none_time,
            (long long)s->budget_cheap, s->time_cheap);
    fprintf(f, "\"link_time_h2d\": %.17g, \"link_time_d2h\": %.17g, \"bound\": \"%s\", \"host_bytes\": %lld, ",
            s->link_time[0], s->link_time[1], s->bound, (long long)p->host_bytes);
    char src[2400];
    fprintf(f, "\"device\": \"%s\", ", sb_safe(s->device ? s->device : "cpu", src, sizeof src));
    fprintf(f, "\"cost_source\": \"%s\", ", sb_safe(s->cost_source && !s->calibrated ? s->cost_source : "", src, sizeof src));
    fprintf(f, "\"calibrated\": %s, \"cost_model\": \"%s\", \"model_time\": %.17g, \"measured_time\": %.17g, "
               "\"measured_kernel_time\": %.17g, \"measured_steps\": %d, \"measured_threads\": %d}\n",
            s->calibrated ? "true" : "false", s->calibrated ? "calibrated" : s->profiled ? "profile" : "constants",
            s->model_time, s->measured_time, s->measured_kernel_time, s->measured_steps, s->measured_threads);
}

