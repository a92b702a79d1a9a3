/* The graphs of an ONNX model -> graph IR: initializers, inputs, nodes and outputs of the model's
 * graph (driven by onnx_load.c, which walks its serialized fields) and of the subgraphs of Loop and
 * If (sc_control_attrs, graph/attrs.h), built here recursively from their unpacked messages.
 *
 * Each subgraph (Loop's body, If's then_branch and else_branch) becomes a graph of its own, owned
 * by the model's graph. A name the subgraph uses but does not define is looked up in the enclosing
 * scopes, innermost first, and becomes a capture: an INPUT value of the subgraph that stands for
 * the enclosing one, which the node then reads as an extra input after its ONNX inputs. So every
 * pass that runs before lowering (topological order, dead code, liveness) sees all that a node
 * reads; graph/pass_control.c unrolls or inlines the subgraph once dims are bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/free_all.h"
#include "import/onnx_load_ctx.h"

static bool is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }
static const char *str_or_empty(const char *s) { return s ? s : ""; }
/* Below: a Loop or If node with its subgraphs; the value that stands for `name` of an enclosing
 * scope in subgraph c (a capture). */
static sc_status add_control_node(load_ctx *c, size_t idx, sc_node_ctx *nc);
static sc_status subgraph_capture(load_ctx *c, size_t idx, const char *label, const char *name, int *id);

sc_status onnx_load_initializer(load_ctx *c, size_t i, const ProtobufCMessage *msg) {
    const Onnx__TensorProto *t = (const Onnx__TensorProto *)msg;
    if (!t->name || !*t->name) return sc_errorf("initializer #%zu has no name", i);
    char what[300];
    snprintf(what, sizeof what, "initializer '%.256s'", t->name);
    sc_tensor tensor;
    SC_TRY(onnx_tensor_decode(t, what, &c->src, &tensor));
    sc_status st = SC_OK;
    sc_value_kind kind = sc_dtype_is_float(tensor.desc.dtype) ? SC_VALUE_PARAM : SC_VALUE_CONST;
    int id = graph_add_value(c->g, t->name, kind, &tensor.desc, &st);
    if (id < 0 && graph_find_value(c->g, t->name) >= 0) {
        sc_status_free(st);
        return sc_errorf("%s: defined twice", what);
    }
    if (id < 0) return sc_status_prefix(st, "%s: ", what);
    c->g->values[id].data = tensor.data;
    return SC_OK;
}


static sc_status input_desc(load_ctx *c, const Onnx__ValueInfoProto *vi, sc_desc *d, const char **names) {
    const char *name = vi->name;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return sc_errorf("graph input '%s': only tensor inputs are supported", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int dt = tt->has_elem_type ? tt->elem_type : 0;
    if (dt <= 0 || dt >= SC_DTYPE_MAX || sc_dtype_size((sc_dtype)dt) == 0)
        return sc_errorf("graph input '%s': unsupported or undefined element type %d", name, dt);
    if (!tt->shape) return sc_errorf("graph input '%s': has no shape (rank unknown)", name);
    if (tt->shape->n_dim > SC_MAX_RANK)
        return sc_errorf("graph input '%s': rank %zu exceeds the maximum %d", name, tt->shape->n_dim, SC_MAX_RANK);
    memset(d, 0, sizeof *d);
    d->dtype = (sc_dtype)dt;
    d->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < d->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        names[i] = NULL;
        d->dims[i] = -1;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0 || dim->dim_value > SC_IMPORT_MAX_NUMEL)
                return sc_errorf("graph input '%s': dim %d is %lld", name, i, (long long)dim->dim_value);
            d->dims[i] = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                   *dim->dim_param) {
            names[i] = dim->dim_param;
        } else {
            names[i] = "?";
        }
    }
    return SC_OK;
}

/* A subgraph's inputs (Loop: iteration number, condition, loop-carried values) are tensors or
 * sequences whose shapes go unused: the copies pass_control.c makes are inferred where they land. */
static void subgraph_input_desc(const Onnx__ValueInfoProto *vi, sc_desc *d) {
    const Onnx__TypeProto *tp = vi->type;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
        tp->tensor_type->has_elem_type && tp->tensor_type->elem_type > 0 && tp->tensor_type->elem_type < SC_DTYPE_MAX)
        d->dtype = (sc_dtype)tp->tensor_type->elem_type;
}

sc_status onnx_load_inputs(load_ctx *c) {
    const Onnx__GraphProto *gp = c->gp;
    c->g->inputs = sc_arena_alloc_array(&c->g->arena, gp->n_input + 1, sizeof(int));
    if (!c->g->inputs) return sc_errorf("out of memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name) return sc_errorf("graph input #%zu has no name", i);
        int existing = graph_find_value(c->g, vi->name);
        if (existing >= 0) {
            if (c->g->values[existing].kind == SC_VALUE_INPUT)
                return sc_errorf("graph input '%s': listed twice", vi->name);
            continue; /* an initializer listed as input (IR < 4 style): its default value is used */
        }
        sc_desc d = {0};
        const char *names[SC_MAX_RANK];
        if (c->parent) subgraph_input_desc(vi, &d);
        else SC_TRY(input_desc(c, vi, &d, names));
        sc_status st = SC_OK;
        int id = graph_add_value(c->g, vi->name, SC_VALUE_INPUT, &d, &st);
        if (id < 0) return sc_status_prefix(st, "graph input '%s': ", vi->name);
        c->g->values[id].is_sequence = c->parent && vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        for (int k = 0; k < d.rank && !c->parent; k++) {
            if (!names[k]) continue;
            SC_TRY(graph_set_dim_name(c->g, id, k, names[k]));
        }
        c->g->inputs[c->g->n_inputs++] = id;
    }
    return SC_OK;
}

/* Trailing empty names are omitted optionals, not part of the arity. */
static int trimmed_count(char **names, size_t n) {
    while (n > 0 && (!names[n - 1] || !*names[n - 1])) n--;
    return (int)n;
}

/* A node's label in messages and its name in the graph: its name, or "OpType#index". */
static void node_label(const Onnx__NodeProto *np, size_t i, char *buf, size_t size) {
    if (np->name && *np->name) snprintf(buf, size, "%s", np->name);
    else snprintf(buf, size, "%.200s#%zu", str_or_empty(np->op_type), i);
}

/* Error path: the first node at index >= from that outputs name (or any name, when name is NULL
 * and from is the index sought); its label into buf. Unpacked with protobuf-c's own allocator: the
 * scratch pool still holds the node being added. Returns false when there is none. */
static bool node_find(const load_ctx *c, size_t from, const char *name, char *buf, size_t size) {
    uint32_t number = onnx_field_number(&onnx__graph_proto__descriptor, "node");
    size_t idx = 0;
    for (int gi = 0; gi < c->n_graphs; gi++) {
        const uint8_t *p = c->graphs[gi].data, *end = p + c->graphs[gi].size;
        onnx_wire_field f;
        while (onnx_wire_next(&p, end, &f)) {
            if (f.number != number || f.wire != 2 || idx++ < from) continue;
            Onnx__NodeProto *np = onnx__node_proto__unpack(NULL, f.size, f.data);
            bool hit = np && !name;
            for (size_t k = 0; np && name && k < np->n_output && !hit; k++)
                hit = np->output[k] && !strcmp(np->output[k], name);
            if (hit) node_label(np, idx - 1, buf, size);
            if (np) onnx__node_proto__free_unpacked(np, NULL);
            if (hit || !name) return hit;
        }
    }
    return false;
}

static sc_status resolve_input(load_ctx *c, size_t idx, const char *label, const char *name, int *id) {
    *id = -1;
    if (!name || !*name) return SC_OK;
    *id = graph_find_value(c->g, name);
    if (*id >= 0) return SC_OK;
    if (c->parent) return subgraph_capture(c, idx, label, name, id);
    char later[300];
    if (node_find(c, idx + 1, name, later, sizeof later))
        return sc_errorf("graph is not topologically sorted (or has a cycle): node '%s' uses '%s' produced later by "
                         "node '%s'", label, name, later);
    return sc_errorf("node '%s': input '%s' is not produced by any node, graph input, initializer or constant", label,
                     name);
}

/* A value the importer made (a constant from an attribute, import/canonical.c), not a file's. */
static bool importer_made(const load_ctx *c, int id) {
    size_t k = (size_t)(id - c->first_node_value);
    return id >= c->first_node_value && (k >= c->value_node_n || c->value_node[k] < 0);
}

/* Adds output `name` of node idx. A name taken already is reported naming both producers, or the
 * initializer or graph input it clashes with; a constant the importer named (before this node's
 * outputs were known) is renamed instead, since the file's name wins. */
static sc_status add_output(load_ctx *c, size_t idx, const char *label, const char *name, sc_value_kind kind,
                         const sc_desc *desc, int *id) {
    sc_status st = SC_OK;
    *id = graph_add_value(c->g, name, kind, desc, &st);
    int prev = *id < 0 ? graph_find_value(c->g, name) : -1;
    if (prev >= 0 && importer_made(c, prev)) {
        sc_status_free(st);
        st = graph_value_rename_unique(c->g, prev);
        if (!st) *id = graph_add_value(c->g, name, kind, desc, &st);
        prev = -1;
    }
    if (*id < 0) {
        if (prev < 0) return sc_status_prefix(st, "node '%s': ", label);
        sc_status_free(st);
        if (prev < c->first_node_value)
            return sc_errorf("node '%s': output '%s' is already an initializer or graph input", label, name);
        char first[300] = "?";
        node_find(c, (size_t)c->value_node[prev - c->first_node_value], NULL, first, sizeof first);
        return sc_errorf("value '%s' is produced twice: by node '%s' and by node '%s'", name, first, label);
    }
    size_t k = (size_t)(*id - c->first_node_value);
    if (k >= c->value_node_cap) {
        size_t cap = c->value_node_cap ? 2 * c->value_node_cap : 1024;
        while (cap <= k) cap *= 2;
        int *p = realloc(c->value_node, cap * sizeof *p);
        if (!p) return sc_errorf("out of memory");
        c->value_node = p;
        c->value_node_cap = cap;
    }
    while (c->value_node_n < k) c->value_node[c->value_node_n++] = -1;
    c->value_node[c->value_node_n++] = (int)idx;
    return SC_OK;
}

static sc_status add_constant_node(load_ctx *c, size_t idx, const sc_node_ctx *nc) {
    const Onnx__NodeProto *np = nc->node;
    if (trimmed_count(np->input, np->n_input) != 0 || np->n_output != 1 || !np->output[0] || !*np->output[0])
        return sc_errorf("node '%s' (Constant): expects no inputs and one output", nc->label);
    sc_tensor t;
    SC_TRY(onnx_constant_value(nc, &t));
    int id;
    SC_TRY(add_output(c, idx, nc->label, np->output[0], SC_VALUE_CONST, &t.desc, &id));
    c->g->values[id].data = t.data;
    return SC_OK;
}

static sc_status check_arity(const char *label, sc_op op, int n_in, int n_out) {
    const sc_op_info *info = &sc_op_infos[op];
    if (n_in < info->min_inputs || n_in > info->max_inputs)
        return sc_errorf("node '%s' (%s): has %d inputs, expected %d..%d", label, info->onnx_name, n_in,
                         info->min_inputs, info->max_inputs);
    if (n_out < info->min_outputs || n_out > info->max_outputs)
        return sc_errorf("node '%s' (%s): has %d outputs, expected %d..%d", label, info->onnx_name, n_out,
                         info->min_outputs, info->max_outputs);
    return SC_OK;
}

/* Whether op's output 0 is a sequence (graph.h), given its input 0 (Identity passes either on). */
static bool makes_sequence(const sc_graph *g, sc_op op, int in0) {
    switch (op) {
    case SC_OP_SEQUENCE_EMPTY:
    case SC_OP_SEQUENCE_CONSTRUCT:
    case SC_OP_SEQUENCE_INSERT:
    case SC_OP_SEQUENCE_ERASE:
    case SC_OP_SPLIT_TO_SEQUENCE: return true;
    case SC_OP_IDENTITY: return in0 >= 0 && g->values[in0].is_sequence;
    default: return false;
    }
}

static sc_status add_op_node(load_ctx *c, size_t idx, sc_node_ctx *nc) {
    const Onnx__NodeProto *np = nc->node;
    int n_in = trimmed_count(np->input, np->n_input), n_out = trimmed_count(np->output, np->n_output);
    SC_TRY(check_arity(nc->label, nc->op, n_in, n_out));
    size_t need = (size_t)n_in + (size_t)n_out + 4;
    if (need > c->in_cap) {
        int *p = realloc(c->in_buf, need * sizeof(int));
        if (!p) return sc_errorf("out of memory");
        c->in_buf = p;
        c->in_cap = need;
    }
    int *in = c->in_buf, *out = c->in_buf + n_in + 4;
    for (int k = 0; k < n_in; k++) SC_TRY(resolve_input(c, idx, nc->label, np->input[k], &in[k]));
    sc_attrs attrs;
    memset(&attrs, 0, sizeof attrs);
    SC_ASSERT(sc_attr_parsers[nc->op]);
    SC_TRY(sc_attr_parsers[nc->op](nc, &attrs));
    int cap = n_in + 4 < sc_op_infos[nc->op].max_inputs ? n_in + 4 : sc_op_infos[nc->op].max_inputs;
    SC_TRY(onnx_canonicalise(nc, in, &n_in, cap));
    for (int k = 0; k < n_out; k++) {
        out[k] = -1;
        if (!np->output[k] || !*np->output[k]) continue;
        SC_TRY(add_output(c, idx, nc->label, np->output[k], SC_VALUE_ACT, NULL, &out[k]));
    }
    sc_status st = SC_OK;
    int nid = graph_add_node(c->g, nc->op, nc->label, in, n_in, out, n_out, &st);
    if (nid < 0) return st;
    if (out[0] >= 0) c->g->values[out[0]].is_sequence = makes_sequence(c->g, nc->op, n_in ? in[0] : -1);
    return graph_node_set_attrs(c->g, &c->g->nodes[nid], &attrs);
}

/* Subgraph attributes belong to control-flow ops: Loop and If are read below, Scan is
 * not supported, and one on any other node is refused rather than silently ignored. */
static sc_status check_no_subgraphs(const sc_node_ctx *nc, const char *op_type) {
    const Onnx__NodeProto *np = nc->node;
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        bool graph_typed = a->has_type && (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ||
                                           a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS);
        if (graph_typed || a->g || a->n_graphs)
            return sc_errorf("node '%s' (%s): attribute '%s' holds a subgraph (GRAPH/GRAPHS); subgraphs and "
                             "control flow are not supported", nc->label, op_type, str_or_empty(a->name));
    }
    return SC_OK;
}

sc_status onnx_load_node(load_ctx *c, size_t i, const ProtobufCMessage *msg) {
    const Onnx__NodeProto *np = (const Onnx__NodeProto *)msg;
    const char *op_type = str_or_empty(np->op_type);
    char label[300];
    node_label(np, i, label, sizeof label);
    sc_node_ctx nc = {.node = np, .label = label, .opset = c->opset, .g = c->g, .src = &c->src};
    if (!is_default_domain(np->domain))
        return sc_errorf("node '%s': unknown op '%s' (domain '%s')", nc.label, op_type, np->domain);
    nc.op = sc_op_from_onnx_name(op_type);
    if (nc.op != SC_OP_LOOP && nc.op != SC_OP_IF) SC_TRY(check_no_subgraphs(&nc, op_type));
    if (nc.op == SC_OP_COUNT) return sc_errorf("node '%s': unknown op '%s'", nc.label, op_type);
    if (c->opset < sc_op_infos[nc.op].since)
        return sc_errorf("node '%s': op '%s' needs opset %d or later, the model imports opset %lld", nc.label,
                         op_type, sc_op_infos[nc.op].since, (long long)c->opset);
    if (nc.op == SC_OP_CONSTANT) return add_constant_node(c, i, &nc);
    if (nc.op == SC_OP_LOOP || nc.op == SC_OP_IF) return add_control_node(c, i, &nc);
    return add_op_node(c, i, &nc);
}


sc_status onnx_load_outputs(load_ctx *c) {
    const Onnx__GraphProto *gp = c->gp;
    c->g->outputs = sc_arena_alloc_array(&c->g->arena, gp->n_output + 1, sizeof(int));
    if (!c->g->outputs) return sc_errorf("out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = str_or_empty(gp->output[i]->name);
        int id = graph_find_value(c->g, name);
        if (id < 0 && c->parent && *name) SC_TRY(subgraph_capture(c, c->n_node, "(subgraph output)", name, &id));
        if (id < 0)
            return sc_errorf("graph output '%s' is not produced by any node, graph input, initializer or constant", name);
        c->g->values[id].is_output = true;
        c->g->outputs[c->g->n_outputs++] = id;
    }
    if (!gp->n_output) return sc_errorf("graph has no outputs");
    return SC_OK;
}



static sc_status capture_push(load_ctx *c, int inner, int outer) {
    if (c->n_captured == c->cap_captured) {
        int nc = c->cap_captured ? 2 * c->cap_captured : 8;
        int *p = realloc(c->captured, sizeof *p * 2 * (size_t)nc);
        if (!p) return sc_errorf("out of memory");
        c->captured = p;
        c->cap_captured = nc;
    }
    c->captured[2 * c->n_captured] = inner;
    c->captured[2 * c->n_captured + 1] = outer;
    c->n_captured++;
    return SC_OK;
}

static sc_status subgraph_capture(load_ctx *c, size_t idx, const char *label, const char *name, int *id) {
    (void)idx;
    int outer;
    SC_TRY(resolve_input(c->parent, c->parent->at, label, name, &outer));
    const sc_value *ov = &c->parent->g->values[outer];
    sc_status st = SC_OK;
    *id = graph_add_value(c->g, name, SC_VALUE_INPUT, &ov->desc, &st);
    if (*id < 0) return st;
    c->g->values[*id].is_sequence = ov->is_sequence;
    return capture_push(c, *id, outer);
}

static sc_status subgraph_fill(load_ctx *c) {
    const Onnx__GraphProto *gp = c->gp;
    if (gp->n_sparse_initializer) return sc_errorf("sparse initializers are not supported");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        SC_TRY(onnx_load_initializer(c, i, (const ProtobufCMessage *)gp->initializer[i]));
        c->g->values[c->g->n_values - 1].kind = SC_VALUE_CONST; /* a subgraph's weights are not trained */
    }
    SC_TRY(onnx_load_inputs(c));
    c->first_node_value = c->g->n_values;
    for (size_t i = 0; i < gp->n_node; i++) SC_TRY(onnx_load_node(c, i, (const ProtobufCMessage *)gp->node[i]));
    SC_TRY(onnx_load_outputs(c));
    SC_TRY(graph_link(c->g));
    if (!c->n_captured) return SC_OK;
    c->g->captures = sc_arena_alloc_array(&c->g->arena, (size_t)c->n_captured, sizeof(int));
    if (!c->g->captures) return sc_errorf("out of memory");
    for (int k = 0; k < c->n_captured; k++) c->g->captures[k] = c->captured[2 * k];
    c->g->n_captures = c->n_captured;
    return SC_OK;
}

/* Builds subgraph gp of the node parent is importing into a graph that parent->top owns; *outer
 * (malloc'd, n_captures entries) lists the enclosing scope's values it captures. */
static sc_status subgraph_build(load_ctx *parent, const Onnx__GraphProto *gp, sc_graph **out, int **outer) {
    *out = NULL;
    *outer = NULL;
    sc_graph *g = calloc(1, sizeof *g);
    if (!g) return sc_errorf("out of memory");
    graph_init(g);
    SC_TRY(graph_own_subgraph(parent->top, g));
    g->opset = parent->opset;
    load_ctx c = {.g = g, .gp = gp, .n_node = gp->n_node, .n_initializer = gp->n_initializer, .opset = parent->opset,
                  .parent = parent, .top = parent->top, .src = parent->src};
    c.src.arena = &g->arena;
    sc_status st = subgraph_fill(&c);
    if (!st && c.n_captured) {
        *outer = malloc(sizeof **outer * (size_t)c.n_captured);
        if (!*outer) st = sc_errorf("out of memory");
        for (int k = 0; !st && k < c.n_captured; k++) (*outer)[k] = c.captured[2 * k + 1];
    }
    SC_FREE_ALL(c.value_node, c.in_buf, c.captured);
    if (!st) *out = g;
    return st;
}

/* The GRAPH attribute `name` of the node, or NULL; any other subgraph attribute is an error. */
static sc_status control_attr(const sc_node_ctx *nc, const char *const *names, int n_names,
                              const Onnx__GraphProto **found) {
    const Onnx__NodeProto *np = nc->node;
    for (size_t k = 0; k < np->n_attribute; k++) {
        const Onnx__AttributeProto *a = np->attribute[k];
        int which = -1;
        for (int b = 0; b < n_names; b++)
            if (a->name && !strcmp(a->name, names[b])) which = b;
        if (which < 0) return sc_errorf("node '%s' (%s): unknown attribute '%s'", nc->label, sc_op_name(nc->op),
                                        str_or_empty(a->name));
        if (!a->g) return sc_errorf("node '%s' (%s): attribute '%s' is not a graph", nc->label, sc_op_name(nc->op),
                                    a->name);
        found[which] = a->g;
    }
    for (int b = 0; b < n_names; b++)
        if (!found[b]) return sc_errorf("node '%s' (%s): required attribute '%s' is missing", nc->label,
                                        sc_op_name(nc->op), names[b]);
    return SC_OK;
}

/* The ONNX arity rules between the node and its subgraphs. */
static sc_status control_check(const sc_node_ctx *nc, sc_graph *const *body, int n_in, int n_out) {
    if (nc->op == SC_OP_LOOP) {
        if (body[0]->n_inputs != n_in)
            return sc_errorf("node '%s' (Loop): the body has %d inputs; it must have the iteration number, the "
                             "condition and the %d loop-carried values", nc->label, body[0]->n_inputs, n_in - 2);
        if (body[0]->n_outputs != n_out + 1 || n_out < n_in - 2)
            return sc_errorf("node '%s' (Loop): the body has %d outputs and the node %d; the body must output the "
                             "condition, the %d loop-carried values and one value per scan output",
                             nc->label, body[0]->n_outputs, n_out, n_in - 2);
        return SC_OK;
    }
    for (int b = 0; b < 2; b++) {
        const char *which = b ? "else_branch" : "then_branch";
        if (body[b]->n_inputs)
            return sc_errorf("node '%s' (If): %s has %d inputs; a branch takes none", nc->label, which, body[b]->n_inputs);
        if (body[b]->n_outputs != n_out)
            return sc_errorf("node '%s' (If): %s has %d outputs, the node %d", nc->label, which, body[b]->n_outputs, n_out);
    }
    return SC_OK;
}

/* Whether output k of the node is a sequence: the loop-carried value's body input or initial value
 * is one (Loop), or then_branch's output is (If). */
static bool control_output_is_sequence(const sc_graph *g, sc_op op, sc_graph *const *body, const int *in, int n_in,
                                       int k) {
    if (op == SC_OP_IF) return body[0]->values[body[0]->outputs[k]].is_sequence;
    if (k >= n_in - 2) return false; /* a scan output is a tensor */
    return body[0]->values[body[0]->inputs[2 + k]].is_sequence || (in[2 + k] >= 0 && g->values[in[2 + k]].is_sequence);
}

static sc_status control_node_add(load_ctx *c, size_t idx, const sc_node_ctx *nc, sc_graph *const *body,
                                  int *const *outer, int n_bodies) {
    const Onnx__NodeProto *np = nc->node;
    int n_in = trimmed_count(np->input, np->n_input), n_out = trimmed_count(np->output, np->n_output);
    int n_caps = 0;
    for (int b = 0; b < n_bodies; b++) n_caps += body[b]->n_captures;
    int *in = malloc(sizeof *in * ((size_t)n_in + (size_t)n_caps + (size_t)n_out + 1)), *out = in + n_in + n_caps;
    if (!in) return sc_errorf("out of memory");
    sc_status st = SC_OK;
    for (int k = 0; k < n_in && !st; k++) st = resolve_input(c, idx, nc->label, np->input[k], &in[k]);
    for (int b = 0, at = n_in; b < n_bodies; b++)
        for (int k = 0; k < body[b]->n_captures; k++) in[at++] = outer[b][k];
    for (int k = 0; k < n_out && !st; k++) {
        out[k] = -1;
        if (np->output[k] && *np->output[k])
            st = add_output(c, idx, nc->label, np->output[k], SC_VALUE_ACT, NULL, &out[k]);
        if (!st && out[k] >= 0)
            c->g->values[out[k]].is_sequence = control_output_is_sequence(c->g, nc->op, body, in, n_in, k);
    }
    sc_attrs attrs;
    memset(&attrs, 0, sizeof attrs);
    for (int b = 0; b < n_bodies; b++) {
        attrs.control.body[b] = body[b];
        attrs.control.n_captures[b] = body[b]->n_captures;
    }
    int nid = st ? -1 : graph_add_node(c->g, nc->op, nc->label, in, n_in + n_caps, out, n_out, &st);
    if (nid >= 0) st = graph_node_set_attrs(c->g, &c->g->nodes[nid], &attrs);
    free(in);
    return st;
}

static sc_status add_control_node(load_ctx *c, size_t idx, sc_node_ctx *nc) {
    static const char *const loop_attrs[] = {"body"}, *const if_attrs[] = {"then_branch", "else_branch"};
    bool loop = nc->op == SC_OP_LOOP;
    const char *const *names = loop ? loop_attrs : if_attrs;
    int n_bodies = loop ? 1 : 2;
    const Onnx__NodeProto *np = nc->node;
    int n_in = trimmed_count(np->input, np->n_input), n_out = trimmed_count(np->output, np->n_output);
    SC_TRY(check_arity(nc->label, nc->op, n_in, n_out));
    const Onnx__GraphProto *gp[2] = {NULL, NULL};
    SC_TRY(control_attr(nc, names, n_bodies, gp));
    sc_graph *body[2] = {NULL, NULL};
    int *outer[2] = {NULL, NULL};
    sc_status st = SC_OK;
    c->at = idx;
    for (int b = 0; b < n_bodies && !st; b++) {
        st = subgraph_build(c, gp[b], &body[b], &outer[b]);
        if (st) st = sc_status_prefix(st, "node '%s' (%s), %s: ", nc->label, sc_op_name(nc->op), names[b]);
    }
    if (!st) st = control_check(nc, body, n_in, n_out);
    if (!st) st = control_node_add(c, idx, nc, body, outer, n_bodies);
    SC_FREE_ALL(outer[0], outer[1]);
    return st;
}
