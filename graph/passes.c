/* graph_bind_dims and graph_prepare (graph/passes.h). The other passes live in pass_infer.c
 * (shape inference and constant folding) and pass_cleanup.c (identity removal, dead code).
 *
 * Binding rules for a symbolic dim of a graph input, first match wins:
 *   1. --dim NAME=N for the dim's symbolic name;
 *   2. a name already bound by rule 3 or 4 on another input (one name, one size);
 *   3. dim 0: --batch (default 1);
 *   4. dim 1 of an integer (token id) input: --seq when given.
 * Anything else fails naming the input, the dim and the flag that would bind it. Other values that
 * carry a bound dim name get the same size (value_info is not imported, so that is mostly outputs).
 */
#include <stdlib.h>
#include <string.h>

#include "graph/pass_internal.h"

typedef struct {
    const char *name;
    int64_t value;
} bind_entry;

typedef struct {
    bind_entry *e;
    int n, cap;
} bind_table;

static const bind_entry *bind_find(const bind_table *t, const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->e[i].name, name) == 0) return &t->e[i];
    return NULL;
}

static bool bind_add(bind_table *t, const char *name, int64_t value) {
    if (t->n == t->cap) {
        int nc = t->cap ? 2 * t->cap : 16;
        bind_entry *p = realloc(t->e, sizeof *p * (size_t)nc);
        if (!p) return false;
        t->e = p;
        t->cap = nc;
    }
    t->e[t->n++] = (bind_entry){name, value};
    return true;
}

static bool dtype_is_int(sc_dtype t) {
    return t == SC_I64 || t == SC_I32 || t == SC_I16 || t == SC_I8 || t == SC_U8 || t == SC_U16 || t == SC_U32 ||
           t == SC_U64;
}

/* Size from rules 3 and 4, or -1. */
static int64_t bind_rule(const sc_value *v, int d, const sc_bind_options *opt) {
    if (d == 0) return opt->batch ? opt->batch : 1;
    if (d == 1 && dtype_is_int(v->desc.dtype) && opt->seq > 0) return opt->seq;
    return -1;
}

static sc_status bind_unbound_error(const sc_value *v, int d) {
    const char *name = value_dim_name(v, d);
    bool seq_dim = d == 1 && dtype_is_int(v->desc.dtype);
    if (!name)
        return sc_errorf("input '%s' dim %d is symbolic and unnamed%s", v->name, d,
                         seq_dim ? ": pass --seq N" : ", so no --dim NAME=N can bind it");
    if (seq_dim)
        return sc_errorf("input '%s' dim %d ('%s') is symbolic: pass --seq N or --dim %s=N", v->name, d, name, name);
    return sc_errorf("input '%s' dim %d ('%s') is symbolic: pass --dim %s=N", v->name, d, name, name);
}

static sc_status bind_check_options(const sc_bind_options *opt) {
    if (opt->batch < 0) return sc_errorf("--batch must be positive, got %lld", (long long)opt->batch);
    if (opt->seq < 0) return sc_errorf("--seq must be positive, got %lld", (long long)opt->seq);
    for (int i = 0; i < opt->n_dims; i++) {
        if (!opt->dims[i].name || !opt->dims[i].name[0]) return sc_errorf("--dim binding %d has no name", i);
        if (opt->dims[i].value <= 0)
            return sc_errorf("--dim %s=%lld: the size must be positive", opt->dims[i].name, (long long)opt->dims[i].value);
    }
    return SC_OK;
}

static sc_status bind_collect(const sc_graph *g, const sc_bind_options *opt, bind_table *t) {
    for (int i = 0; i < opt->n_dims; i++)
        if (!bind_add(t, opt->dims[i].name, opt->dims[i].value)) return sc_errorf("out of memory binding dims");
    for (int v = 0; v < g->n_values; v++) {
        const sc_value *val = &g->values[v];
        if (val->kind != SC_VALUE_INPUT) continue;
        for (int d = 0; d < val->desc.rank; d++) {
            int64_t n = bind_rule(val, d, opt);
            if (val->desc.dims[d] >= 0 || !value_dim_name(val, d) || n < 0 || bind_find(t, value_dim_name(val, d))) continue;
            if (!bind_add(t, value_dim_name(val, d), n)) return sc_errorf("out of memory binding dims");
        }
    }
    return SC_OK;
}

sc_status graph_bind_dims(sc_graph *g, const sc_bind_options *opt) {
    sc_bind_options none = {0};
    if (!opt) opt = &none;
    SC_TRY(bind_check_options(opt));
    bind_table t = {0};
    sc_status st = bind_collect(g, opt, &t);
    for (int v = 0; v < g->n_values && !st; v++) {
        sc_value *val = &g->values[v];
        for (int d = 0; d < val->desc.rank && !st; d++) {
            if (val->desc.dims[d] >= 0) continue;
            const bind_entry *e = bind_find(&t, value_dim_name(val, d));
            if (e)
                val->desc.dims[d] = e->value;
            else if (val->kind == SC_VALUE_INPUT && bind_rule(val, d, opt) > 0)
                val->desc.dims[d] = bind_rule(val, d, opt);
            else if (val->kind == SC_VALUE_INPUT)
                st = bind_unbound_error(val, d);
        }
    }
    for (int i = 0; i < opt->n_dims && !st; i++) {
        bool used = false;
        for (int v = 0; v < g->n_values && !used; v++)
            for (int d = 0; d < g->values[v].desc.rank && !used; d++)
                used = value_dim_name(&g->values[v], d) && strcmp(value_dim_name(&g->values[v], d), opt->dims[i].name) == 0;
        if (!used) sc_log(SC_LOG_WARN, "--dim %s matches no symbolic dim of the model", opt->dims[i].name);
    }
    free(t.e);
    return st;
}

/* After the passes, every value a node or the caller touches has a static, typed desc. */
static sc_status prepare_verify(const sc_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const sc_node *n = &g->nodes[i];
        for (int side = 0; side < 2; side++) {
            const int *ids = side ? n->out : n->in;
            int cnt = side ? n->n_out : n->n_in;
            for (int k = 0; k < cnt; k++) {
                if (ids[k] < 0) continue;
                const sc_value *v = &g->values[ids[k]];
                if (!sc_desc_is_static(&v->desc) || v->desc.dtype == SC_DTYPE_UNDEFINED) {
                    char buf[160];
                    return sc_errorf("node '%s' (%s): %s %d ('%s') has no static desc after shape inference (%s)", n->name,
                                     sc_op_name(n->op), side ? "output" : "input", k, v->name,
                                     sc_desc_str(&v->desc, buf, sizeof buf));
                }
            }
        }
    }
    for (int side = 0; side < 2; side++) {
        const int *ids = side ? g->outputs : g->inputs;
        int cnt = side ? g->n_outputs : g->n_inputs;
        for (int k = 0; k < cnt; k++) {
            const sc_value *v = &g->values[ids[k]];
            if (!sc_desc_is_static(&v->desc) || v->desc.dtype == SC_DTYPE_UNDEFINED) {
                char buf[160];
                return sc_errorf("graph %s '%s' has no static desc (%s)", side ? "output" : "input", v->name,
                                 sc_desc_str(&v->desc, buf, sizeof buf));
            }
        }
    }
    return SC_OK;
}

/* Identity removal and dead-code elimination change no desc, so one inference suffices. */
sc_status graph_prepare(sc_graph *g, const sc_bind_options *opt) {
    SC_TRY(graph_bind_dims(g, opt));
    SC_TRY(graph_topo_sort(g));
    SC_TRY(graph_infer_shapes(g, opt ? opt->eval : NULL));
    SC_TRY(graph_lower_einsum(g, NULL));
    SC_TRY(graph_lower_resize(g, NULL));
    SC_TRY(graph_remove_identity(g));
    SC_TRY(graph_eliminate_dead_code(g));
    SC_TRY(graph_fold_transpose_into_gemm(g, NULL));
    SC_TRY(graph_eliminate_dead_code(g));
    SC_TRY(graph_fuse_gelu(g, NULL));
    SC_TRY(graph_eliminate_dead_code(g));
    if (opt && opt->inference) {
        SC_TRY(graph_fuse_inference(g, opt->eval));
        SC_TRY(graph_eliminate_dead_code(g));
    }
    if (opt && opt->precision && opt->precision != SC_F32) {
        SC_TRY(graph_apply_precision(g, opt->precision, opt->eval));
        SC_TRY(graph_eliminate_dead_code(g));
    }
    SC_TRY(graph_link(g));
    return prepare_verify(g);
}
