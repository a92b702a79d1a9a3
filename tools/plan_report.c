/* Plan summaries, traces and SVG plots (plan_report.h has the contract and the timeline model). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx.h" /* sc_write_file_atomic */
#include "core/units.h"
#include "tools/plan_report.h"
#include "train/trainer.h" /* sc_device */

/* ---- a growable text buffer whose first failure is sticky ---- */

typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->n + (size_t)k) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s, b->cap = cap;
    }
}

static sc_status sb_write(strbuf *b, const char *path) {
    sc_status st = b->oom ? sc_errorf("%s: out of memory building the file", path)
                          : sc_write_file_atomic(path, b->s ? b->s : "", b->n);
    free(b->s);
    b->s = NULL;
    return st;
}

/* XML/JSON-safe copy of a name: quotes, angle brackets, ampersands and control characters become '_'. */
static const char *safe(const char *s, char *buf, size_t n) {
    size_t k = 0;
    for (; s && *s && k + 1 < n; s++) buf[k++] = (*s == '"' || *s == '\\' || *s == '<' || *s == '>' || *s == '&' ||
                                                  (unsigned char)*s < 32) ? '_' : *s;
    buf[k] = 0;
    return buf;
}

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

/* ---- command-line options ---- */

int plan_strategy_parse(const char *name) {
    static const char *const names[] = {"none", "sqrt", "dc", "optimal", "auto"};
    static const sc_strategy vals[] = {SC_STRATEGY_NONE, SC_STRATEGY_SQRT, SC_STRATEGY_DC, SC_STRATEGY_OPTIMAL,
                                       SC_STRATEGY_AUTO};
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, names[i])) return (int)vals[i];
    return -1;
}

int device_parse(const char *name) {
    static const char *const names[] = {[SC_DEVICE_CPU] = "cpu", [SC_DEVICE_CUDA] = "cuda", [SC_DEVICE_AUTO] = "auto"};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, names[i])) return i;
    return -1;
}

const char *plan_options_from_args(arg_spec *spec, sc_plan_options *o, bool *given, const char **strategy_name,
                                   const char **offload_name) {
    static const char *const offloads[] = {"none", "weights", "activations", "both", "auto"};
    static const sc_offload offload_vals[] = {SC_OFFLOAD_NONE, SC_OFFLOAD_WEIGHTS, SC_OFFLOAD_ACTIVATIONS,
                                              SC_OFFLOAD_BOTH, SC_OFFLOAD_AUTO};
    memset(o, 0, sizeof *o);
    arg_opt *mem = args_get(spec, "memory"), *strat = args_get(spec, "strategy"), *off = args_get(spec, "offload"),
            *slots = args_get(spec, "slots"), *upd = args_get(spec, "optimizer-on");
    *given = mem->set || strat->set || off->set || slots->set;
    if (mem->set && (o->budget = sc_parse_size(mem->s)) <= 0)
        return "--memory takes a positive size such as 256MiB, 1.5GiB, 500MB or a byte count";
    *strategy_name = strat->set ? strat->s : mem->set ? "auto" : "none";
    int k = plan_strategy_parse(*strategy_name);
    if (k < 0) return "--strategy must be none, sqrt, dc, optimal or auto";
    o->strategy = (sc_strategy)k;
    *offload_name = off->set ? off->s : "none";
    o->offload = SC_OFFLOAD_NONE;
    bool found = false;
    for (int i = 0; i < 5; i++)
        if (!strcmp(*offload_name, offloads[i])) o->offload = offload_vals[i], found = true;
    if (!found) return "--offload must be auto, weights, activations, both or none";
    if (slots->set) {
        if (slots->i < 1 || slots->i > 1000000) return "--slots must be between 1 and 1000000";
        if (strat->set && o->strategy != SC_STRATEGY_DC && o->strategy != SC_STRATEGY_AUTO)
            return "--slots applies to --strategy dc (or auto) only";
        o->slots = (int)slots->i;
    }
    if (upd && upd->set) {
        static const char *const names[] = {[SC_UPDATE_AUTO] = "auto", [SC_UPDATE_DEVICE] = "device", [SC_UPDATE_HOST] = "host"};
        int u = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(upd->s, names[i])) u = i;
        if (u < 0) return "--optimizer-on must be host, device or auto";
        if (o->offload == SC_OFFLOAD_NONE || o->offload == SC_OFFLOAD_ACTIVATIONS)
            return "--optimizer-on applies to streamed parameters: give --offload weights, both or auto";
        o->update_on = (sc_update_place)u;
    }
    return NULL;
}

/* ---- per-step figures ---- */

typedef enum { KIND_FIXED, KIND_ACT, KIND_GRAD, N_KINDS } mem_kind;
static const char *const kind_names[N_KINDS] = {"fixed", "activations", "gradients"};

static mem_kind value_kind(const sc_graph *g, const sc_training_graph *tg, int v) {
    int p = g->values[v].producer;
    if (p < 0) return KIND_FIXED;
    return p < tg->n_forward_nodes ? KIND_ACT : KIND_GRAD;
}

/* Interval i's last step for memory figures: an interval whose block a later one took over
 * (plan->iv_from) stops counting when the taker opens, since the two share one block there. NULL
 * when out of memory. */
static int *effective_ends(const sc_plan *p) {
    int *e = malloc(((size_t)p->n_intervals + 1) * sizeof *e);
    if (!e) return NULL;
    for (int i = 0; i < p->n_intervals; i++) e[i] = p->intervals[i].end;
    for (int i = 0; p->iv_from && i < p->n_intervals; i++)
        if (p->iv_from[i] >= 0) e[p->iv_from[i]] = p->intervals[i].begin - 1;
    return e;
}

/* mem[k][s]: bytes of kind k resident during step s (fixed region included in KIND_FIXED). */
static sc_status memory_by_step(const sc_graph *g, const sc_training_graph *tg, const sc_plan *p, int64_t *mem[N_KINDS]) {
    int n = p->n_steps;
    for (int k = 0; k < N_KINDS; k++) {
        mem[k] = calloc((size_t)n + 2, sizeof *mem[k]);
        if (!mem[k]) {
            for (int j = 0; j < k; j++) free(mem[j]), mem[j] = NULL;
            return sc_errorf("out of memory");
        }
    }
    int *eff = effective_ends(p);
    if (!eff) {
        for (int k = 0; k < N_KINDS; k++) free(mem[k]), mem[k] = NULL;
        return sc_errorf("out of memory");
    }
    for (int i = 0; i < p->n_intervals; i++) {
        const sc_interval *iv = &p->intervals[i];
        if (iv->begin < 0 || iv->begin >= n) continue;
        if (i < p->n_fixed_intervals) continue; /* the fixed region, counted whole below */
        if (eff[i] < iv->begin) continue; /* its block was taken over as it opened (not possible today) */
        int end = eff[i] >= n ? n - 1 : eff[i];
        mem_kind k = value_kind(g, tg, iv->value);
        mem[k][iv->begin] += iv->bytes;
        mem[k][end + 1] -= iv->bytes;
    }
    free(eff);
    for (int k = 0; k < N_KINDS; k++)
        for (int s = 1; s < n; s++) mem[k][s] += mem[k][s - 1];
    for (int s = 0; s < n; s++) mem[KIND_FIXED][s] += p->fixed_bytes;
    return SC_OK;
}

/* Seconds of every node under m, evaluated once: a checkpointed plan runs each forward node several
 * times (32M RUN steps over 5M nodes at depth 250000), and the same doubles summed in the same
 * order keep every figure bit-identical to evaluating the model per step. */
static double *node_times(const sc_graph *g, const sc_cost_model *m) {
    double *t = malloc(((size_t)g->n_nodes + 1) * sizeof *t);
    if (t)
        for (int i = 0; i < g->n_nodes; i++) t[i] = cost_node_time(m, g, i);
    return t;
}

static sc_status timeline_total(const sc_graph *g, const sc_plan *p, const sc_cost_model *m, const double *nt,
                                double *seconds) {
    sc_timeline tl;
    SC_TRY(plan_timeline(g, p, nt, m->link_bandwidth, false, &tl));
    *seconds = tl.total;
    return SC_OK;
}

sc_status plan_timeline_time(const sc_graph *g, const sc_plan *p, const sc_cost_model *m, double *seconds) {
    double *nt = node_times(g, m);
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
    o->link_bandwidth = c->link_bandwidth;
    if (f) {
        double sum = 0, model = 0;
        sc_cost_model m;
        cost_model_default(&m, 0, NULL);
        for (int i = 0; i < c->n_nodes; i++) sum += c->node_time[i], model += cost_node_time(&m, g, i);
        fprintf(f, "calibrated     %d nodes on the CPU backend (median of %d runs after %d warm-up): store-all step "
                   "%.4g s measured, %.4g s in its nodes, %.4g s by the uncalibrated cost model; link %.3g GB/s\n",
                c->n_nodes, c->runs, SC_CALIBRATE_WARMUP, c->step_time, sum, model, c->link_bandwidth * 1e-9);
    }
    return SC_OK;
}

/* The highest total of the per-step resident bytes: memory_by_step's three kinds summed, with one
 * array instead of three (integers, so the sum of the prefix sums is the prefix sum of the sums). */
static sc_status live_peak(const sc_plan *p, int64_t *peak) {
    int n = p->n_steps;
    int64_t *d = calloc((size_t)n + 2, sizeof *d);
    int *eff = effective_ends(p);
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
    double *nt = node_times(g, m);
    bool *ran = calloc((size_t)tg->n_forward_nodes + 1, 1);
    if (!ran || !nt) {
        free(ran);
        free(nt);
        return sc_errorf("out of memory");
    }
    s->compute_time = s->recompute_time = 0;
    s->recompute_runs = 0;
    for (int i = 0; i < p->n_steps; i++) {
        const sc_step *st = &p->steps[i];
        if (st->kind != SC_STEP_RUN) continue;
        double t = nt[st->node];
        s->compute_time += t;
        if (st->node < tg->n_forward_nodes) {
            if (ran[st->node]) s->recompute_time += t, s->recompute_runs++;
            ran[st->node] = true;
        }
    }
    free(ran);
    sc_timeline tl;
    sc_status st = plan_timeline(g, p, nt, m->link_bandwidth, false, &tl);
    free(nt);
    SC_TRY(st);
    s->timeline_time = tl.total;
    s->link_time[0] = tl.link_busy[0];
    s->link_time[1] = tl.link_busy[1];
    s->bound = plan_timeline_bound(&tl);
    sc_cost_model model;
    cost_model_default(&model, 0, NULL);
    s->calibrated = m->node_time != NULL;
    bool same = m->node_time == NULL && m->peak_flops == model.peak_flops && m->mem_bandwidth == model.mem_bandwidth &&
                m->link_bandwidth == model.link_bandwidth; /* the same computation again: same result */
    if (same) s->model_time = s->timeline_time;
    else SC_TRY(plan_timeline_time(g, p, &model, &s->model_time));
    SC_TRY(live_peak(p, &s->peak_live));
    s->peak_activations = p->arena_bytes - p->fixed_bytes;
    return SC_OK;
}

/* ---- summary ---- */

void plan_summary_print(FILE *f, const plan_summary *s, const sc_plan *p) {
    char a[32], b[32], c[32], d[32];
    fprintf(f, "model          %s (batch %lld", s->model, (long long)s->batch);
    if (s->seq) fprintf(f, ", seq %lld", (long long)s->seq);
    fprintf(f, ")\n");
    fprintf(f, "budget         %s\n", s->budget ? fmt_bytes(s->budget, a, sizeof a) : "unlimited");
    fprintf(f, "strategy       %s (asked: %s", plan_strategy_name(p->strategy), s->requested);
    if (s->slots) fprintf(f, ", %d slots", s->slots);
    fprintf(f, "), offload %s (asked: %s", plan_offload_name(p->offload), s->offload);
    if (p->offload_window >= 0 && p->offload != SC_OFFLOAD_NONE) fprintf(f, ", look-ahead %d runs", p->offload_window);
    fprintf(f, ")\n");
    fprintf(f, "segments       %d\n", p->n_segments);
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
    fprintf(f, "moved          h2d %s (%.2f B/param), d2h %s (%.2f B/param) per step\n", fmt_bytes(p->bytes_h2d, a, sizeof a),
            (double)p->bytes_h2d / per, fmt_bytes(p->bytes_d2h, b, sizeof b), (double)p->bytes_d2h / per);
    if (p->host_bytes > 0)
        fprintf(f, "host copies    %s of host memory for moved values (offloaded activations, gradients for host "
                   "updates), beside the parameters and state\n", fmt_bytes(p->host_bytes, a, sizeof a));
    fprintf(f, "resources      device compute %.4g s, link %.4g s host to device and %.4g s back, host updates %.4g s: "
               "bound by %s\n", s->compute_time, s->link_time[0], s->link_time[1], p->host_time, s->bound);
    fprintf(f, "updates        %s", p->update_on == SC_UPDATE_HOST ? "streamed parameters update on the host" : "on the device");
    if (p->n_host_updates) fprintf(f, " (%d host updates, %.4g s predicted)", p->n_host_updates, p->host_time);
    fputc('\n', f);
    fprintf(f, "step time      %.4g s predicted%s (compute %.4g s, recompute %.4g s, waiting on transfers %.4g s)\n",
            p->predicted_time, s->calibrated ? " with calibrated node times" : " by the cost model", s->compute_time,
            s->recompute_time, p->stall_time);
    if (s->calibrated) fprintf(f, "               %.4g s by the uncalibrated cost model\n", s->model_time);
    if (s->measured_time > 0) {
        fprintf(f, "measured       %.4g s per step, kernels %.4g s of thread CPU time (medians of %d steps after a "
                   "warm-up)\n", s->measured_time, s->measured_kernel_time, s->measured_steps);
        fprintf(f, "error          prediction %+.1f%% of the wall time, %+.1f%% of the kernel time",
                100.0 * (p->predicted_time / s->measured_time - 1.0),
                s->measured_kernel_time > 0 ? 100.0 * (p->predicted_time / s->measured_kernel_time - 1.0) : 0.0);
        if (s->calibrated)
            fprintf(f, "; uncalibrated cost model %+.1f%%, %+.1f%%", 100.0 * (s->model_time / s->measured_time - 1.0),
                    s->measured_kernel_time > 0 ? 100.0 * (s->model_time / s->measured_kernel_time - 1.0) : 0.0);
        fputc('\n', f);
    }
}

void plan_summary_json(FILE *f, const plan_summary *s, const sc_plan *p) {
    char m[1024];
    fprintf(f, "{\"model\": \"%s\", \"batch\": %lld, \"seq\": %lld, \"budget\": %lld, \"requested\": \"%s\", ",
            safe(s->model, m, sizeof m), (long long)s->batch, (long long)s->seq, (long long)s->budget, s->requested);
    fprintf(f, "\"strategy\": \"%s\", \"requested_offload\": \"%s\", \"offload\": \"%s\", \"offload_window\": %d, ",
            plan_strategy_name(p->strategy), s->offload, plan_offload_name(p->offload), p->offload_window);
    fprintf(f, "\"slots\": %d, \"segments\": %d, \"steps\": %d, ", s->slots, p->n_segments, p->n_steps);
    fprintf(f, "\"intervals\": %d, \"planned_peak\": %lld, \"live_peak\": %lld, \"none_peak\": %lld, \"none_fixed\": %lld, ",
            p->n_intervals, (long long)p->arena_bytes, (long long)s->peak_live, (long long)s->none_peak,
            (long long)s->none_fixed);
    fprintf(f, "\"fixed_bytes\": %lld, \"param_bytes\": %lld, \"state_bytes\": %lld, \"activation_peak\": %lld, ",
            (long long)p->fixed_bytes, (long long)s->param_bytes, (long long)s->state_bytes,
            (long long)s->peak_activations);
    fprintf(f, "\"flops\": %.17g, \"recompute_flops\": %.17g, \"recompute_runs\": %lld, ", p->flops, p->recompute_flops,
            (long long)s->recompute_runs);
    fprintf(f, "\"compute_time\": %.17g, \"recompute_time\": %.17g, \"recompute_time_share\": %.17g, ", s->compute_time,
            s->recompute_time, s->compute_time > 0 ? s->recompute_time / s->compute_time : 0.0);
    fprintf(f, "\"bytes_h2d\": %lld, \"bytes_d2h\": %lld, \"stall_time\": %.17g, \"predicted_time\": %.17g, "
               "\"timeline_time\": %.17g, ",
            (long long)p->bytes_h2d, (long long)p->bytes_d2h, p->stall_time, p->predicted_time, s->timeline_time);
    fprintf(f, "\"params\": %lld, \"update_on\": \"%s\", \"host_updates\": %d, \"host_time\": %.17g, ", (long long)s->params,
            plan_update_name(p->update_on), p->n_host_updates, p->host_time);
    fprintf(f, "\"link_time_h2d\": %.17g, \"link_time_d2h\": %.17g, \"bound\": \"%s\", \"host_bytes\": %lld, ",
            s->link_time[0], s->link_time[1], s->bound, (long long)p->host_bytes);
    fprintf(f, "\"calibrated\": %s, \"model_time\": %.17g, \"measured_time\": %.17g, \"measured_kernel_time\": %.17g, "
               "\"measured_steps\": %d}\n",
            s->calibrated ? "true" : "false", s->model_time, s->measured_time, s->measured_kernel_time,
            s->measured_steps);
}

/* ---- Chrome trace ---- */

static const char *step_label(const sc_graph *g, const sc_step *st, char *buf, size_t n) {
    char nm[256];
    switch (st->kind) {
    case SC_STEP_RUN:
        snprintf(buf, n, "%s", safe(g->nodes[st->node].name, nm, sizeof nm));
        break;
    case SC_STEP_PREFETCH:
    case SC_STEP_OFFLOAD:
        snprintf(buf, n, "%s %s", st->kind == SC_STEP_PREFETCH ? "prefetch" : "offload",
                 safe(g->values[st->value].name, nm, sizeof nm));
        break;
    case SC_STEP_HOST_RUN:
        snprintf(buf, n, "host update %s", safe(g->nodes[st->node].name, nm, sizeof nm));
        break;
    default:
        buf[0] = 0;
    }
    return buf;
}

sc_status plan_trace_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_plan *p,
                           const sc_cost_model *m) {
    sc_timeline tl = {0};
    double *nt = node_times(g, m);
    sc_status st = nt ? plan_timeline(g, p, nt, m->link_bandwidth, true, &tl) : sc_errorf("out of memory");
    free(nt);
    int64_t *mem[N_KINDS] = {0};
    if (!st) st = memory_by_step(g, tg, p, mem);
    if (st) {
        plan_timeline_free(&tl);
        return st;
    }
    static const char *const tracks[4] = {"compute", "h2d", "d2h", "host"};
    strbuf b = {0};
    sb_printf(&b, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    sb_printf(&b, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"scorch plan (%s)\"}}",
              plan_strategy_name(p->strategy));
    for (int t = 0; t < 4; t++)
        sb_printf(&b, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                  t + 1, tracks[t]);
    bool *ran = calloc((size_t)tg->n_forward_nodes + 1, 1);
    if (!ran) b.oom = true;
    int64_t last_mem = -1;
    for (int s = 0; s < p->n_steps && !b.oom; s++) {
        const sc_step *sp = &p->steps[s];
        char label[600];
        if (tl.track[s] >= 0) {
            const char *cat = sp->kind == SC_STEP_HOST_RUN ? "host update" : "transfer";
            if (sp->kind == SC_STEP_RUN) {
                bool fwd = sp->node < tg->n_forward_nodes;
                cat = fwd ? (ran[sp->node] ? "recompute" : "forward") : "backward";
                if (fwd) ran[sp->node] = true;
            }
            sb_printf(&b, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, "
                          "\"dur\": %.3f, \"args\": {\"step\": %d",
                      step_label(g, sp, label, sizeof label), cat, tl.track[s] + 1, tl.t0[s] * 1e6,
                      (tl.t1[s] - tl.t0[s]) * 1e6, s);
            if (sp->kind == SC_STEP_RUN) sb_printf(&b, ", \"op\": \"%s\"", sc_op_name(g->nodes[sp->node].op));
            sb_printf(&b, "}}");
        }
        int64_t total = mem[KIND_FIXED][s] + mem[KIND_ACT][s] + mem[KIND_GRAD][s];
        if (total != last_mem) {
            sb_printf(&b, ",\n{\"name\": \"device memory\", \"ph\": \"C\", \"pid\": 1, \"ts\": %.3f, \"args\": "
                          "{\"fixed\": %lld, \"activations\": %lld, \"gradients\": %lld}}",
                      tl.t0[s] * 1e6, (long long)mem[KIND_FIXED][s], (long long)mem[KIND_ACT][s],
                      (long long)mem[KIND_GRAD][s]);
            last_mem = total;
        }
    }
    sb_printf(&b, "\n]}\n");
    free(ran);
    for (int k = 0; k < N_KINDS; k++) free(mem[k]);
    plan_timeline_free(&tl);
    return sb_write(&b, path);
}

/* ---- SVG ---- */

#define SVG_W 960
#define SVG_H 480
#define SVG_L 90 /* plot left, right, top, bottom margins */
#define SVG_R 170
#define SVG_T 50
#define SVG_B 60

static void svg_open(strbuf *b, const char *title) {
    char t[1024];
    sb_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n"
                 "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
                 "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
              SVG_W, SVG_H, SVG_W, SVG_H, SVG_W, SVG_H, SVG_W / 2, safe(title, t, sizeof t));
}

/* Axes with ticks at "nice" steps; x and y labels. */
static double nice_step(double range) {
    double raw = range / 5, mag = pow(10, floor(log10(raw > 0 ? raw : 1)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

static void svg_axes(strbuf *b, double x_max, double y_min, double y_max, const char *xlabel, const char *ylabel) {
    int pw = SVG_W - SVG_L - SVG_R, ph = SVG_H - SVG_T - SVG_B;
    sb_printf(b, "<g stroke=\"black\" fill=\"none\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
                 "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/></g>\n",
              SVG_L, SVG_T + ph, SVG_L + pw, SVG_T + ph, SVG_L, SVG_T, SVG_L, SVG_T + ph);
    double xs = nice_step(x_max);
    for (double x = 0; x <= x_max * 1.0001; x += xs) {
        double px = SVG_L + pw * x / x_max;
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>"
                     "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                  px, SVG_T + ph, px, SVG_T + ph + 5, px, SVG_T + ph + 18, x);
    }
    double ys = nice_step(y_max - y_min);
    for (double y = ceil(y_min / ys) * ys; y <= y_max * 1.0001 + 1e-12; y += ys) {
        double py = SVG_T + ph - ph * (y - y_min) / (y_max - y_min);
        sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                     "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                  SVG_L, py, SVG_L + pw, py, SVG_L - 6, py + 4, fabs(y) < ys * 1e-9 ? 0.0 : y);
    }
    sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", SVG_L + pw / 2, SVG_H - 15, xlabel);
    sb_printf(b, "<text x=\"20\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 20 %d)\">%s</text>\n",
              SVG_T + ph / 2, SVG_T + ph / 2, ylabel);
}

static void svg_legend(strbuf *b, int i, const char *color, const char *label) {
    int x = SVG_W - SVG_R + 15, y = SVG_T + 10 + 20 * i;
    char t[256];
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", x,
              y, color, x + 20, y + 10, safe(label, t, sizeof t));
}

sc_status plan_svg_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_plan *p,
                         const plan_summary *s) {
    int64_t *mem[N_KINDS] = {0};
    SC_TRY(memory_by_step(g, tg, p, mem));
    /* at most 1200 columns: each shows the step of its bucket with the largest total */
    int n = p->n_steps > 0 ? p->n_steps : 1, cols = n < 1200 ? n : 1200;
    int *pick = malloc(sizeof *pick * (size_t)cols);
    if (!pick) {
        for (int k = 0; k < N_KINDS; k++) free(mem[k]);
        return sc_errorf("out of memory");
    }
    int64_t y_max = p->arena_bytes > 0 ? p->arena_bytes : 1;
    for (int c = 0; c < cols; c++) {
        int lo = (int)((int64_t)c * n / cols), hi = (int)((int64_t)(c + 1) * n / cols);
        int best = lo;
        int64_t best_t = -1;
        for (int s2 = lo; s2 < hi && s2 < p->n_steps; s2++) {
            int64_t t = mem[0][s2] + mem[1][s2] + mem[2][s2];
            if (t > best_t) best_t = t, best = s2;
        }
        pick[c] = best;
        if (best_t > y_max) y_max = best_t;
    }
    double mib = 1048576.0, ymax_mib = (double)y_max / mib * 1.05;
    char title[1024], bb[32], pb[32];
    snprintf(title, sizeof title, "%s: %s, budget %s, planned peak %s", s->model, plan_strategy_name(p->strategy),
             s->budget ? fmt_bytes(s->budget, bb, sizeof bb) : "unlimited", fmt_bytes(p->arena_bytes, pb, sizeof pb));
    strbuf b = {0};
    svg_open(&b, title);
    svg_axes(&b, (double)n, 0, ymax_mib, "plan step", "device memory (MiB)");
    int pw = SVG_W - SVG_L - SVG_R, ph = SVG_H - SVG_T - SVG_B;
    static const char *const colors[N_KINDS] = {"#9e9e9e", "#1f77b4", "#ff7f0e"};
    /* stacked: band k spans [sum of kinds < k, sum of kinds <= k] */
    for (int k = 0; k < N_KINDS && p->n_steps > 0; k++) {
        sb_printf(&b, "<path fill=\"%s\" fill-opacity=\"0.85\" stroke=\"none\" d=\"", colors[k]);
        for (int c = 0; c < cols; c++) {
            double top = 0;
            for (int j = 0; j <= k; j++) top += (double)mem[j][pick[c]];
            double x0 = SVG_L + pw * (double)c / cols, x1 = SVG_L + pw * (double)(c + 1) / cols;
            double py = SVG_T + ph - ph * top / mib / ymax_mib;
            sb_printf(&b, "%s%.2f %.2f L%.2f %.2f ", c ? "L" : "M", x0, py, x1, py);
        }
        for (int c = cols - 1; c >= 0; c--) {
            double bot = 0;
            for (int j = 0; j < k; j++) bot += (double)mem[j][pick[c]];
            double x0 = SVG_L + pw * (double)c / cols, x1 = SVG_L + pw * (double)(c + 1) / cols;
            double py = SVG_T + ph - ph * bot / mib / ymax_mib;
            sb_printf(&b, "L%.2f %.2f L%.2f %.2f ", x1, py, x0, py);
        }
        sb_printf(&b, "Z\"/>\n");
        svg_legend(&b, k, colors[k], kind_names[k]);
    }
    double arena_y = SVG_T + ph - ph * (double)p->arena_bytes / mib / ymax_mib;
    sb_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"red\" stroke-dasharray=\"6 4\"/>\n", SVG_L,
              arena_y, SVG_L + pw, arena_y);
    svg_legend(&b, N_KINDS, "red", "arena (planned peak)");
    if (s->budget) {
        double by = SVG_T + ph - ph * (double)s->budget / mib / ymax_mib;
        if (by >= SVG_T) {
            sb_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"2 3\"/>\n",
                      SVG_L, by, SVG_L + pw, by);
            svg_legend(&b, N_KINDS + 1, "black", "budget");
        }
    }
    sb_printf(&b, "</svg>\n");
    free(pick);
    for (int k = 0; k < N_KINDS; k++) free(mem[k]);
    return sb_write(&b, path);
}

sc_status bench_svg_write(const char *path, const char *title, const bench_point *pts, int n) {
    static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};
    double x_max = 1e-9, y_min = 0, y_max = 1;
    for (int i = 0; i < n; i++) {
        double x = (double)pts[i].activation_bytes / 1048576.0, y = pts[i].overhead * 100;
        if (x > x_max) x_max = x;
        if (y > y_max) y_max = y;
        if (y < y_min) y_min = y;
    }
    x_max *= 1.05;
    y_max += (y_max - y_min) * 0.05;
    y_min -= (y_max - y_min) * 0.05;
    strbuf b = {0};
    svg_open(&b, title);
    svg_axes(&b, x_max, y_min, y_max, "activation memory (MiB, measured peak minus fixed)", "time overhead vs none (%)");
    int pw = SVG_W - SVG_L - SVG_R, ph = SVG_H - SVG_T - SVG_B;
    /* series in order of first appearance; each polyline sorted by memory */
    const char *names[16];
    int n_names = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < n_names && strcmp(names[j], pts[i].strategy)) j++;
        if (j == n_names && n_names < 16) names[n_names++] = pts[i].strategy;
    }
    int *idx = malloc(sizeof *idx * (size_t)(n + 1));
    if (!idx) return sc_errorf("out of memory");
    for (int sidx = 0; sidx < n_names; sidx++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(pts[i].strategy, names[sidx])) idx[m++] = i;
        for (int i = 1; i < m; i++) /* insertion sort by memory */
            for (int j = i; j > 0 && pts[idx[j]].activation_bytes < pts[idx[j - 1]].activation_bytes; j--) {
                int t = idx[j];
                idx[j] = idx[j - 1], idx[j - 1] = t;
            }
        const char *col = colors[sidx % 7];
        sb_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
        for (int i = 0; i < m; i++) {
            double x = SVG_L + pw * ((double)pts[idx[i]].activation_bytes / 1048576.0) / x_max;
            double y = SVG_T + ph - ph * (pts[idx[i]].overhead * 100 - y_min) / (y_max - y_min);
            sb_printf(&b, "%.1f,%.1f ", x, y);
        }
        sb_printf(&b, "\"/>\n");
        for (int i = 0; i < m; i++) {
            double x = SVG_L + pw * ((double)pts[idx[i]].activation_bytes / 1048576.0) / x_max;
            double y = SVG_T + ph - ph * (pts[idx[i]].overhead * 100 - y_min) / (y_max - y_min);
            char bb[32];
            sb_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>%s, budget %s</title></circle>\n", x,
                      y, col, names[sidx], pts[idx[i]].budget ? fmt_bytes(pts[idx[i]].budget, bb, sizeof bb) : "unlimited");
        }
        svg_legend(&b, sidx, col, names[sidx]);
    }
    free(idx);
    sb_printf(&b, "</svg>\n");
    return sb_write(&b, path);
}
