/* `scorch-run info MODEL.onnx`: what a model is made of at a given batch (and sequence) size.
 *
 * FLOPs: each op's cost function (graph/op_cost.c), the planner's estimate. Activation bytes: the sum over every
 * value a node computes (what store-everything training would keep), not a peak. */
#include <stdio.h>
#include <stdlib.h>

#include "graph/op_cost.h"
#include "tools/cmd.h"
#include "tools/model_load.h"

static void human(double v, const char *unit, int binary, char *buf, size_t size) {
    static const char *pre[] = {"", "K", "M", "G", "T", "P"};
    double base = binary ? 1024.0 : 1000.0;
    int i = 0;
    while (v >= base && i < 5) v /= base, i++;
    snprintf(buf, size, "%.2f %s%s%s", v, pre[i], binary && i ? "i" : "", unit);
}

typedef struct {
    sc_op op;
    int64_t count, flops;
} op_row;

static int row_cmp(const void *x, const void *y) {
    const op_row *a = x, *b = y;
    if (a->count != b->count) return a->count < b->count ? 1 : -1;
    return a->op - b->op;
}

static void print_io(const sc_graph *g, const char *what, const int *ids, int n) {
    char buf[160];
    for (int i = 0; i < n; i++)
        printf("%-10s %s %s\n", i ? "" : what, g->values[ids[i]].name,
               sc_desc_str(&g->values[ids[i]].desc, buf, sizeof buf));
}

static void info_print(const char *path, const sc_graph *g) {
    op_row rows[SC_OP_COUNT] = {{0}};
    int64_t flops = 0, params = 0, param_bytes = 0, n_params = 0, consts = 0, act_bytes = 0;
    for (int i = 0; i < SC_OP_COUNT; i++) rows[i].op = (sc_op)i;
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        int64_t f = (int64_t)sc_node_cost(g, n).flops;
        rows[n->op].count++;
        rows[n->op].flops += f;
        flops += f;
    }
    for (int i = 0; i < g->n_values; i++) {
        const sc_value *v = &g->values[i];
        int64_t bytes = sc_desc_bytes(&v->desc);
        if (v->kind == SC_VALUE_PARAM) {
            n_params++;
            params += sc_desc_numel(&v->desc);
            param_bytes += bytes;
        } else if (v->kind == SC_VALUE_CONST) {
            consts += bytes;
        } else if (v->kind == SC_VALUE_ACT && bytes > 0) {
            act_bytes += bytes;
        }
    }
    qsort(rows, SC_OP_COUNT, sizeof rows[0], row_cmp);
    char a[64], b[64];
    printf("model      %s (opset %lld, %d nodes, %d values)\n", path, (long long)g->opset, g->n_nodes, g->n_values);
    print_io(g, "inputs", g->inputs, g->n_inputs);
    print_io(g, "outputs", g->outputs, g->n_outputs);
    printf("ops        %-20s %8s %16s\n", "", "count", "FLOPs");
    for (int i = 0; i < SC_OP_COUNT && rows[i].count; i++) {
        human((double)rows[i].flops, "FLOP", 0, a, sizeof a);
        printf("           %-20s %8lld %16s\n", sc_op_name(rows[i].op), (long long)rows[i].count, a);
    }
    human((double)param_bytes, "B", 1, a, sizeof a);
    printf("parameters %lld in %lld tensors (%s)\n", (long long)params, (long long)n_params, a);
    human((double)consts, "B", 1, a, sizeof a);
    printf("constants  %s\n", a);
    human((double)flops, "FLOP", 0, a, sizeof a);
    human((double)act_bytes, "B", 1, b, sizeof b);
    printf("flops      %s (%lld)\n", a, (long long)flops);
    printf("activations %s (%lld bytes, sum over computed values)\n", b, (long long)act_bytes);
}

int cmd_info(int argc, char **argv) {
    arg_opt opts[] = {MODEL_LOAD_OPTS};
    arg_spec spec = ARGS_MODEL_SPEC(
        "scorch-run info MODEL.onnx [--batch N] [--seq N] [--dim NAME=N ...]",
        "Prints the op histogram, parameter count and bytes, FLOPs (conv/gemm/matmul 2*MACs,\n"
        "others one per output element) and the bytes of all activations at the given sizes.",
        opts);
    int exit_code;
    if (args_done(&spec, argc, argv, &exit_code)) return exit_code;
    sc_model *m;
    int usage = 0;
    sc_status st = model_load_prepared(&spec, &m, &usage);
    if (!st) {
        info_print(spec.pos[0], &m->graph);
        sc_model_free(m);
    }
    args_free(&spec);
    int rc = cmd_report(st);
    return usage && rc ? 2 : rc;
}
