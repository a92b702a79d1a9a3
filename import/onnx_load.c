/* ONNX model -> graph IR (import/onnx.h).
 *
 * Order of work, each step validating what it reads before anything depends on it:
 *   1. unpack the ModelProto; check the default-domain opset is in [SC_MIN_OPSET, SC_MAX_OPSET];
 *      nodes and initializers are unpacked one at a time as steps 2, 4 and 5 reach them (below);
 *   2. initializers -> PARAM (floating point) or CONST (integer/bool) values, data in the graph arena;
 *   3. graph inputs that are not initializers -> INPUT values (dim_param -> dim -1 with its name);
 *   4. nodes in file order: Constant -> CONST value, others -> ops with typed attributes and
 *      canonicalised inputs (import/canonical.c). A duplicate output names both nodes; an input
 *      that nothing made yet is looked for among the later nodes, so a reference to a value
 *      produced later is reported as a topological-order error rather than as a missing value
 *      (on the error path only: indexing every output up front cost a map probe per output and an
 *      extra unpack per node, a quarter of the load time at depth 250000);
 *   5. graph outputs; graph_link.
 * Nothing in the graph points into unpacked messages (names, attributes and initializer data are
 * copied); the serialized bytes stay with the model for sc_model_save. A file is mapped rather than
 * read: its bytes are the page cache's pages, not 680 MB of fresh memory to fault in and copy at depth
 * 250000 (Scorch replaces files by rename, so the mapped file is never changed under it). Unpacking a whole model costs
 * about 2.5 KB per node (protobuf-c allocates every message, string and array separately): 5 GB for
 * a 680 MB file at depth 250000, all of it page-faulted in and thrown away. So the ModelProto and
 * its GraphProto are unpacked as shells without their repeated node and initializer fields, and
 * each node and initializer is unpacked alone from its bytes into a scratch bump allocator that is
 * emptied after it (protobuf's merge rules hold: several graph fields are read in file order, as
 * one graph). Every step that reads them walks the bytes again; unpacking is cheap next to faulting.
 * On any failure the partly built model is freed and the error is prefixed with the file name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/free_all.h"
#include "import/onnx.h"
#include "import/onnx_internal.h"

typedef struct {
    sc_graph *g;
    const Onnx__GraphProto *gp; /* the shell: everything but nodes and initializers */
    onnx_wire_field *graphs;    /* the ModelProto's graph fields, in file order (usually one) */
    int n_graphs;
    size_t n_node, n_initializer;
    proto_block *scratch; /* one node or initializer at a time */
    ProtobufCAllocator scratch_alloc;
    sc_tensor_src src;
    int64_t opset;
    int first_node_value; /* values from here on are node outputs */
    int *value_node;      /* per value from first_node_value on: the index of the node that outputs it, -1
                           * for a constant the importer made (import/canonical.c) */
    size_t value_node_n, value_node_cap;
    int *in_buf;
    size_t in_cap;
} load_ctx;

static sc_status parse_failed(void) {
    return sc_errorf("not a valid ONNX model: protobuf parse failed (truncated or corrupt file)");
}

typedef sc_status (*graph_entry_fn)(load_ctx *c, size_t idx, const ProtobufCMessage *msg);

/* Calls fn on every entry of the graph's repeated message field `name`, in file order, each
 * unpacked alone into the scratch pool. */
static sc_status each_graph_entry(load_ctx *c, const char *name, const ProtobufCMessageDescriptor *desc,
                                  graph_entry_fn fn) {
    uint32_t number = onnx_field_number(&onnx__graph_proto__descriptor, name);
    size_t idx = 0;
    for (int gi = 0; gi < c->n_graphs; gi++) {
        const uint8_t *p = c->graphs[gi].data, *end = p + c->graphs[gi].size;
        onnx_wire_field f;
        while (onnx_wire_next(&p, end, &f)) {
            if (f.number != number || f.wire != 2) continue;
            ProtobufCMessage *msg = protobuf_c_message_unpack(desc, &c->scratch_alloc, f.size, f.data);
            sc_status st = msg ? fn(c, idx++, msg) : parse_failed();
            proto_pool_reset(&c->scratch);
            if (st) return st;
        }
    }
    return SC_OK;
}

static bool is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }
static const char *str_or_empty(const char *s) { return s ? s : ""; }

static sc_status check_opset(const Onnx__ModelProto *mp, int64_t *opset) {
    if (!mp->n_opset_import) return sc_errorf("not a valid ONNX model: no opset_import (truncated file?)");
    bool found = false;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!is_default_domain(o->domain) || found) continue;
        found = true;
        *opset = o->has_version ? o->version : 0;
    }
    if (!found) return sc_errorf("opset_import: no entry for the default ONNX domain");
    if (*opset < SC_MIN_OPSET || *opset > SC_MAX_OPSET)
        return sc_errorf("opset_import: unsupported opset %lld (supported %d..%d)", (long long)*opset, SC_MIN_OPSET,
                         SC_MAX_OPSET);
    return SC_OK;
}

static sc_status add_initializer(load_ctx *c, size_t i, const ProtobufCMessage *msg) {
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

static sc_status add_initializers(load_ctx *c) {
    if (c->gp->n_sparse_initializer) return sc_errorf("sparse initializers are not supported");
    return each_graph_entry(c, "initializer", &onnx__tensor_proto__descriptor, add_initializer);
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

static sc_status add_inputs(load_ctx *c) {
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
        sc_desc d;
        const char *names[SC_MAX_RANK];
        SC_TRY(input_desc(c, vi, &d, names));
        sc_status st = SC_OK;
        int id = graph_add_value(c->g, vi->name, SC_VALUE_INPUT, &d, &st);
        if (id < 0) return sc_status_prefix(st, "graph input '%s': ", vi->name);
        for (int k = 0; k < d.rank; k++) {
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
    return graph_node_set_attrs(c->g, &c->g->nodes[nid], &attrs);
}

/* Subgraph attributes belong to control-flow ops (If, Loop, Scan), which Scorch does not support;
 * one on any other node is refused too rather than silently ignored. */
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

static sc_status add_node(load_ctx *c, size_t i, const ProtobufCMessage *msg) {
    const Onnx__NodeProto *np = (const Onnx__NodeProto *)msg;
    const char *op_type = str_or_empty(np->op_type);
    char label[300];
    node_label(np, i, label, sizeof label);
    sc_node_ctx nc = {.node = np, .label = label, .opset = c->opset, .g = c->g, .src = &c->src};
    if (!is_default_domain(np->domain))
        return sc_errorf("node '%s': unknown op '%s' (domain '%s')", nc.label, op_type, np->domain);
    SC_TRY(check_no_subgraphs(&nc, op_type));
    nc.op = sc_op_from_onnx_name(op_type);
    if (nc.op == SC_OP_COUNT) return sc_errorf("node '%s': unknown op '%s'", nc.label, op_type);
    if (c->opset < sc_op_infos[nc.op].since)
        return sc_errorf("node '%s': op '%s' needs opset %d or later, the model imports opset %lld", nc.label,
                         op_type, sc_op_infos[nc.op].since, (long long)c->opset);
    if (nc.op == SC_OP_CONSTANT) return add_constant_node(c, i, &nc);
    return add_op_node(c, i, &nc);
}

static sc_status add_nodes(load_ctx *c) { return each_graph_entry(c, "node", &onnx__node_proto__descriptor, add_node); }

static sc_status add_outputs(load_ctx *c) {
    const Onnx__GraphProto *gp = c->gp;
    c->g->outputs = sc_arena_alloc_array(&c->g->arena, gp->n_output + 1, sizeof(int));
    if (!c->g->outputs) return sc_errorf("out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = str_or_empty(gp->output[i]->name);
        int id = graph_find_value(c->g, name);
        if (id < 0)
            return sc_errorf("graph output '%s' is not produced by any node, graph input, initializer or constant", name);
        c->g->values[id].is_output = true;
        c->g->outputs[c->g->n_outputs++] = id;
    }
    if (!gp->n_output) return sc_errorf("graph has no outputs");
    return SC_OK;
}

/* Copies the fields of [p, end) into shell except the length-delimited fields skip_a and skip_b,
 * which are counted (*n_a, *n_b) and, for skip_a when list is given, listed. */
static sc_status split_fields(const uint8_t *p, const uint8_t *end, onnx_buf *shell, uint32_t skip_a, size_t *n_a,
                              uint32_t skip_b, size_t *n_b, onnx_wire_field **list) {
    onnx_wire_field f;
    while (onnx_wire_next(&p, end, &f)) {
        if (f.wire == 2 && f.number == skip_a) {
            if (list) {
                onnx_wire_field *l = realloc(*list, (*n_a + 1) * sizeof *l);
                if (!l) return sc_errorf("out of memory");
                *list = l;
                l[*n_a] = f;
            }
            ++*n_a;
        } else if (f.wire == 2 && f.number == skip_b) {
            ++*n_b;
        } else if (!onnx_buf_put(shell, f.start, (size_t)(f.end - f.start))) {
            return sc_errorf("out of memory");
        }
    }
    return p == end ? SC_OK : parse_failed();
}

/* Unpacks the ModelProto and GraphProto shells into pool (c->gp, *mp) and lists the graph fields. */
static sc_status unpack_shells(load_ctx *c, const uint8_t *data, size_t size, ProtobufCAllocator *pool,
                               Onnx__ModelProto **mp) {
    onnx_buf model = {0}, graph = {0};
    size_t n_graphs = 0, none = 0;
    sc_status st = split_fields(data, data + size, &model, onnx_field_number(&onnx__model_proto__descriptor, "graph"),
                                &n_graphs, 0, &none, &c->graphs);
    c->n_graphs = (int)n_graphs;
    for (int i = 0; i < c->n_graphs && !st; i++)
        st = split_fields(c->graphs[i].data, c->graphs[i].data + c->graphs[i].size, &graph,
                          onnx_field_number(&onnx__graph_proto__descriptor, "node"), &c->n_node,
                          onnx_field_number(&onnx__graph_proto__descriptor, "initializer"), &c->n_initializer, NULL);
    if (!st) *mp = onnx__model_proto__unpack(pool, model.n, model.p ? model.p : (const uint8_t *)"");
    if (!st && !*mp) st = parse_failed();
    if (!st && c->n_graphs) c->gp = onnx__graph_proto__unpack(pool, graph.n, graph.p ? graph.p : (const uint8_t *)"");
    if (!st && c->n_graphs && !c->gp) st = parse_failed();
    free(model.p);
    free(graph.p);
    return st;
}

static sc_status model_build(sc_model *m, load_ctx *c, const Onnx__ModelProto *mp, size_t file_size) {
    c->g = &m->graph;
    c->src = (sc_tensor_src){.dir = m->dir, .max_inline = file_size, .arena = &m->graph.arena};
    if (!c->gp) return sc_errorf("not a valid ONNX model: no graph");
    SC_TRY(check_opset(mp, &c->opset));
    m->graph.opset = c->opset;
    if (c->n_node > SC_IMPORT_MAX_NODES)
        return sc_errorf("graph has %zu nodes, more than the supported %d", c->n_node, SC_IMPORT_MAX_NODES);
    /* Room for every name up front (most nodes have one output): no rehash of a growing map. */
    if (!sc_strmap_reserve(&m->graph.by_name, c->n_initializer + c->gp->n_input + c->n_node))
        return sc_errorf("out of memory indexing %zu names", c->n_initializer + c->gp->n_input + c->n_node);
    sc_status st = add_initializers(c);
    if (!st) st = add_inputs(c);
    c->first_node_value = m->graph.n_values;
    if (!st) st = add_nodes(c);
    if (!st) st = add_outputs(c);
    if (!st) st = graph_link(&m->graph);
    return st;
}

void onnx_bytes_drop(const sc_model *m, const void *p, size_t n) {
    if (!m->proto_mapped || !n) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)p + page - 1) & ~(page - 1),
              hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void bytes_release(void *data, size_t size, bool mapped) {
    if (mapped) munmap(data, size);
    else free(data);
}

/* Builds the model from data (size bytes; mapped: from file_map), taking ownership of data: it is
 * kept as the model's serialized bytes on success and released on failure. */
static sc_status model_load_owned(uint8_t *data, size_t size, bool mapped, const char *name, const char *dir,
                                  sc_model **out) {
    *out = NULL;
    if (size == 0) {
        bytes_release(data, size, mapped);
        return sc_errorf("%s: empty file", name);
    }
    sc_status st = sc_status_prefix(onnx_wire_check(data, size), "%s: ", name);
    proto_block *blocks = NULL;
    ProtobufCAllocator pool = {.alloc = proto_pool_alloc, .free = proto_pool_free, .allocator_data = &blocks};
    load_ctx c = {.scratch_alloc = {.alloc = proto_pool_alloc, .free = proto_pool_free}};
    c.scratch_alloc.allocator_data = &c.scratch;
    Onnx__ModelProto *mp = NULL;
    if (!st) st = sc_status_prefix(unpack_shells(&c, data, size, &pool, &mp), "%s: ", name);
    sc_model *m = st ? NULL : calloc(1, sizeof *m);
    if (!st && !m) st = sc_errorf("%s: out of memory", name);
    if (st) {
        proto_pool_release(blocks);
        free(c.graphs);
        bytes_release(data, size, mapped);
        return st;
    }
    graph_init(&m->graph);
    m->proto_bytes = data;
    m->proto_size = size;
    m->proto_mapped = mapped;
    m->path = strdup(name);
    m->dir = dir ? strdup(dir) : NULL;
    st = (!m->path || (dir && !m->dir)) ? sc_errorf("out of memory") : model_build(m, &c, mp, size);
    SC_FREE_ALL(c.value_node, c.in_buf, c.graphs);
    proto_pool_release(c.scratch);
    proto_pool_release(blocks);
    if (st) {
        sc_model_free(m);
        return sc_status_prefix(st, "%s: ", name);
    }
    onnx_bytes_drop(m, data, size); /* every initializer is decoded: the file's pages are no longer needed */
    *out = m;
    return SC_OK;
}

sc_status sc_model_load_buffer(const void *data, size_t size, const char *name, const char *dir, sc_model **out) {
    *out = NULL;
    if (!name) name = "<buffer>";
    if (size == 0) return sc_errorf("%s: empty file", name);
    uint8_t *copy = malloc(size);
    if (!copy) return sc_errorf("%s: out of memory copying %zu bytes", name, size);
    memcpy(copy, data, size);
    return model_load_owned(copy, size, false, name, dir, out);
}

/* Maps a regular file read-only (*mapped true), or reads it where mapping fails. */
static sc_status file_map(const char *path, uint8_t **buf, size_t *size, bool *mapped) {
    *mapped = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return onnx_read_file(path, buf, size); /* its message names the cause */
    struct stat sb;
    void *p = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0)
        p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return onnx_read_file(path, buf, size);
    *buf = p;
    *size = (size_t)sb.st_size;
    *mapped = true;
    return SC_OK;
}

sc_status sc_model_load(const char *path, sc_model **out) {
    *out = NULL;
    uint8_t *buf;
    size_t size;
    bool mapped;
    SC_TRY(file_map(path, &buf, &size, &mapped));
    char *dir = onnx_dir_of(path);
    sc_status st = SC_OK;
    if (dir) st = model_load_owned(buf, size, mapped, path, dir, out);
    else {
        bytes_release(buf, size, mapped);
        st = sc_errorf("%s: out of memory", path);
    }
    free(dir);
    return st;
}

void sc_model_free(sc_model *m) {
    if (!m) return;
    graph_free(&m->graph);
    if (m->proto_bytes) bytes_release(m->proto_bytes, m->proto_size, m->proto_mapped);
    SC_FREE_ALL(m->path, m->dir, m);
}
