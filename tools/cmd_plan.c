/* `scorch-run plan MODEL.onnx --batch N --memory SIZE [--strategy S] [--offload O] [--slots S]`: builds
 * the training graph exactly as `train` does (same loss head, SGD with momentum 0.9 or AdamW) and the
 * plan under the budget, executes nothing, and prints what the plan costs (tools/plan_report.h):
 * strategy used, segments, planned peak against the store-everything peak, fixed bytes, recompute
 * FLOPs and time share, bytes moved, predicted step time. --json prints the same as one object;
 * --trace writes a Chrome/Perfetto trace, --svg a memory timeline.
 * An infeasible budget exits 1 with plan_build's message (it names the smallest feasible budget).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "import/onnx.h"
#include "tools/cmd.h"
#include "tools/plan_report.h"

typedef struct {
    const char *path;
    int64_t batch, seq;
    bool adamw;
} plan_model_opts;

typedef struct {
    sc_model *model;
    sc_training_graph tg;
} plan_model;

static sc_status plan_model_load(const plan_model_opts *o, plan_model *pm) {
    memset(pm, 0, sizeof *pm);
    SC_TRY(sc_model_load(o->path, &pm->model));
    sc_graph *g = &pm->model->graph;
    sc_bind_options bo = {.batch = o->batch, .seq = o->seq};
    sc_train_options to;
    sc_train_options_default(&to); /* as sc_trainer_config_default + cmd_train's optimizer defaults */
    to.optim = o->adamw ? SC_OPTIM_ADAMW : SC_OPTIM_SGD;
    to.momentum = o->adamw ? 0.0f : 0.9f;
    to.weight_decay = o->adamw ? 0.01f : 0.0f;
    sc_status st = sc_status_prefix(graph_prepare(g, &bo), "%s: ", o->path);
    if (!st) st = sc_status_prefix(autodiff_build_training(g, &to, &pm->tg), "%s: ", o->path);
    if (st) {
        sc_model_free(pm->model);
        pm->model = NULL;
    }
    return st;
}

static void plan_model_free(plan_model *pm) {
    sc_model_free(pm->model); /* the training graph's arrays live in the graph's arena */
    pm->model = NULL;
}

static sc_status plan_none_peak(const plan_model *pm, const sc_plan_options *like, int64_t *peak, int64_t *fixed) {
    sc_plan_options o = *like;
    o.strategy = SC_STRATEGY_NONE;
    o.offload = SC_OFFLOAD_NONE;
    o.budget = 0;
    o.slots = 0;
    sc_plan p = {0};
    SC_TRY(plan_build(&pm->model->graph, &pm->tg, &o, &p));
    *peak = p.arena_bytes;
    *fixed = p.fixed_bytes;
    plan_free(&p);
    return SC_OK;
}

typedef struct {
    bool json;
    const char *trace, *svg;
} plan_outputs;

static sc_status plan_run(const plan_model_opts *mo, const sc_plan_options *po, plan_summary *s, const plan_outputs *out) {
    plan_model pm;
    SC_TRY(plan_model_load(mo, &pm));
    const sc_graph *g = &pm.model->graph;
    sc_plan p = {0};
    sc_status st = plan_none_peak(&pm, po, &s->none_peak, &s->none_fixed);
    if (!st) st = plan_build(g, &pm.tg, po, &p);
    sc_cost_model m;
    cost_model_default(&m, po->link_bandwidth, po->node_time);
    if (!st) st = plan_summary_fill(g, &pm.tg, &p, &m, s);
    if (!st) {
        if (out->json) plan_summary_json(stdout, s, &p);
        else plan_summary_print(stdout, s, &p);
    }
    if (!st && out->trace) {
        st = plan_trace_write(out->trace, g, &pm.tg, &p, &m);
        if (!st && !out->json) printf("wrote %s\n", out->trace);
    }
    if (!st && out->svg) {
        st = plan_svg_write(out->svg, g, &pm.tg, &p, s);
        if (!st && !out->json) printf("wrote %s\n", out->svg);
    }
    plan_free(&p);
    plan_model_free(&pm);
    return st;
}

int cmd_plan(int argc, char **argv) {
    arg_opt opts[] = {
        {.name = "batch", .kind = ARG_INT, .metavar = "N", .help = "batch size, binds the inputs' dim 0 (default 1)"},
        {.name = "seq", .kind = ARG_INT, .metavar = "N", .help = "sequence length of token inputs (default: the model's)"},
        {.name = "optimizer", .kind = ARG_STR, .metavar = "sgd|adamw", .help = "as train (default sgd, momentum 0.9)"},
        PLAN_CLI_OPTS,
        {.name = "json", .kind = ARG_FLAG, .help = "print the summary as one JSON object"},
        {.name = "trace", .kind = ARG_STR, .metavar = "FILE.json", .help = "write a Chrome/Perfetto trace of the plan"},
        {.name = "svg", .kind = ARG_STR, .metavar = "FILE.svg", .help = "write the device memory over the steps"},
    };
    arg_spec spec = {
        .usage = "scorch-run plan MODEL.onnx --batch N [--seq N] --memory SIZE [--strategy none|sqrt|dc|optimal|auto] "
                 "[--offload auto|weights|activations|none] [--slots S] [--json] [--trace plan.json] [--svg memory.svg]",
        .summary = "Plans one training step (as `train` would build it) under a device memory budget and prints its\n"
                   "predicted costs. Nothing is executed.",
        .opts = opts, .n_opts = sizeof opts / sizeof opts[0], .min_pos = 1, .max_pos = 1};
    args_result ar = args_parse(&spec, argc, argv);
    if (ar != ARGS_OK) {
        args_free(&spec);
        return ar == ARGS_HELP ? 0 : 2;
    }
    plan_model_opts mo = {.path = spec.pos[0], .batch = 1};
    sc_plan_options po;
    plan_summary s = {.model = spec.pos[0]};
    bool given;
    const char *usage = plan_options_from_args(&spec, &po, &given, &s.requested, &s.offload);
    arg_opt *a;
    if (!usage && (a = args_get(&spec, "batch"))->set && (mo.batch = a->i) < 1) usage = "--batch must be at least 1";
    if (!usage && (a = args_get(&spec, "seq"))->set && (mo.seq = a->i) < 1) usage = "--seq must be at least 1";
    if (!usage && (a = args_get(&spec, "optimizer"))->set) {
        if (!strcmp(a->s, "adamw")) mo.adamw = true;
        else if (strcmp(a->s, "sgd")) usage = "--optimizer must be sgd or adamw";
    }
    if (usage) {
        args_error("%s", usage);
        args_free(&spec);
        return 2;
    }
    s.batch = mo.batch, s.seq = mo.seq, s.budget = po.budget, s.slots = po.slots;
    plan_outputs out = {.json = args_get(&spec, "json")->set, .trace = args_get(&spec, "trace")->s,
                        .svg = args_get(&spec, "svg")->s};
    sc_status st = plan_run(&mo, &po, &s, &out);
    args_free(&spec);
    return cmd_report(st);
}
