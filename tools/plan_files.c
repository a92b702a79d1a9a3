/* Plan files: a Chrome/Perfetto trace of the timeline model, the planner's graph for an external
 * solver, and SVG plots of device memory over a plan's steps and of a bench sweep (plan_report.h
 * has the contract). Every file is built in a
 * text buffer and written atomically. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic_write.h"
#include "tools/plan_internal.h"

/* ---- a growable text buffer whose first failure is sticky ---- */

void sb_printf(strbuf *b, const char *fmt, ...) {
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

sc_status sb_write(strbuf *b, const char *path) {
    sc_status st = b->oom ? sc_errorf("%s: out of memory building the file", path)
                          : sc_write_file_atomic(path, b->s ? b->s : "", b->n);
    free(b->s);
    b->s = NULL;
    return st;
}

const char *sb_safe(const char *s, char *buf, size_t n) {
    size_t k = 0;
    for (; s && *s && k + 1 < n; s++) buf[k++] = (*s == '"' || *s == '\\' || *s == '<' || *s == '>' || *s == '&' ||
                                                  (unsigned char)*s < 32) ? '_' : *s;
    buf[k] = 0;
    return buf;
}

/* ---- per-step figures ---- */

typedef enum { KIND_FIXED, KIND_ACT, KIND_GRAD, N_KINDS } mem_kind;
static const char *const kind_names[N_KINDS] = {"fixed", "activations", "gradients"};

static mem_kind value_kind(const sc_graph *g, const sc_training_graph *tg, int v) {
    int p = g->values[v].producer;
    if (p < 0) return KIND_FIXED;
    return p < tg->n_forward_nodes ? KIND_ACT : KIND_GRAD;
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
    int *eff = plan_effective_ends(p);
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

/* ---- Chrome trace ---- */

static const char *step_label(const sc_graph *g, const sc_step *st, char *buf, size_t n) {
    char nm[256];
    switch (st->kind) {
    case SC_STEP_RUN:
        snprintf(buf, n, "%s", sb_safe(g->nodes[st->node].name, nm, sizeof nm));
        break;
    case SC_STEP_PREFETCH:
    case SC_STEP_OFFLOAD:
        snprintf(buf, n, "%s %s%s%s", st->kind == SC_STEP_PREFETCH ? "prefetch" : "offload",
                 sb_safe(g->values[st->value].name, nm, sizeof nm), st->wire ? " as " : "",
                 st->wire ? sc_dtype_name(st->wire) : "");
        break;
    case SC_STEP_HOST_RUN:
        snprintf(buf, n, "host update %s", sb_safe(g->nodes[st->node].name, nm, sizeof nm));
        break;
    default:
        buf[0] = 0;
    }
    return buf;
}

sc_status plan_trace_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_plan *p,
                           const sc_cost_model *m) {
    sc_timeline tl = {0};
    double *nt = plan_node_times(g, m);
    sc_status st = nt ? plan_timeline(g, p, nt, m, true, &tl) : sc_errorf("out of memory");
    free(nt);
    int64_t *mem[N_KINDS] = {0};
    if (!st) st = memory_by_step(g, tg, p, mem);
    if (st) {
        plan_timeline_free(&tl);
        return st;
    }
    static const char *const tracks[SC_N_TRACKS] = {"compute", "h2d", "d2h", "host", "collectives"};
    strbuf b = {0};
    sb_printf(&b, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    sb_printf(&b, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"scorch plan (%s)\"}}",
              plan_strategy_name(p->strategy));
    for (int t = 0; t < SC_N_TRACKS; t++)
        sb_printf(&b, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                  t + 1, tracks[t]);
    bool *ran = calloc((size_t)tg->n_forward_nodes + 1, 1);
    if (!ran) b.oom = true;
    int64_t last_mem = -1;
    for (int s = 0; s < p->n_steps && !b.oom; s++) {
        const sc_step *sp = &p->steps[s];
        char label[600];
        if (tl.track[s] >= 0) {
            const char *cat = sp->kind == SC_STEP_HOST_RUN ? "host update" : tl.track[s] == SC_TRACK_COMM ? "collective" : "transfer";
            if (sp->kind == SC_STEP_RUN && tl.track[s] != SC_TRACK_COMM) {
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

/* ---- the planner's graph (plan_report.h) ---- */

static int64_t arena_bytes_of(const sc_graph *g, int v) {
    const sc_value *x = &g->values[v];
    if (x->producer < 0) return 0;
    const sc_node *n = &g->nodes[x->producer];
    for (int o = 0; o < n->n_out; o++) {
        int a = n->out[o] == v ? sc_op_inplace_input(n->op, o) : -1;
        if (a >= 0 && a < n->n_in && n->in[a] >= 0) return 0;
    }
    int64_t b = sc_desc_bytes(&x->desc);
    return b > 0 ? (b + 63) / 64 * 64 : 0;
}

static void ids_print(strbuf *b, const int *ids, int n) {
    sb_printf(b, "[");
    for (int k = 0, first = 1; k < n; k++)
        if (ids[k] >= 0) sb_printf(b, first ? "%d" : ",%d", ids[k]), first = 0;
    sb_printf(b, "]");
}

sc_status plan_graph_write(const char *path, const sc_graph *g, const sc_training_graph *tg, const sc_cost_model *m) {
    strbuf b = {0};
    char name[256];
    int64_t fixed = 0;
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *x = &g->values[v];
        int64_t bytes = sc_desc_bytes(&x->desc);
        if (x->producer < 0 && (x->n_consumers > 0 || x->is_output) && bytes > 0) fixed += (bytes + 63) / 64 * 64;
    }
    sb_printf(&b, "{\"fixed_bytes\": %lld, \"n_forward\": %d,\n\"nodes\": [\n", (long long)fixed, tg->n_forward_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        sb_printf(&b, "%s{\"name\": \"%s\", \"op\": \"%s\", \"time\": %.9g, \"in\": ", i ? ",\n" : "",
                  sb_safe(n->name, name, sizeof name), sc_op_name(n->op), cost_node_time(m, g, i));
        ids_print(&b, n->in, n->n_in);
        sb_printf(&b, ", \"out\": ");
        ids_print(&b, n->out, n->n_out);
        sb_printf(&b, "}");
    }
    sb_printf(&b, "],\n\"values\": [\n");
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *x = &g->values[v];
        sb_printf(&b, "%s{\"name\": \"%s\", \"bytes\": %lld, \"persistent\": %s, \"output\": %s}", v ? ",\n" : "",
                  sb_safe(x->name, name, sizeof name), (long long)arena_bytes_of(g, v), x->producer < 0 ? "true" : "false",
                  x->is_output ? "true" : "false");
    }
    sb_printf(&b, "]}\n");
    return sb_write(&b, path);
}

static void svg_open(strbuf *b, const char *title) {
    char t[1024];
    sb_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n"
                 "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
                 "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
              SVG_W, SVG_H, SVG_W, SVG_H, SVG_W, SVG_H, SVG_W / 2, sb_safe(title, t, sizeof t));
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
              y, color, x + 20, y + 10, sb_safe(label, t, sizeof t));
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
