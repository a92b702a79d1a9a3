/* The graph IR (docs/DESIGN.md, graph/).
 *
 * Values (tensors) and nodes live in arrays addressed by integer ids. A value knows its producer and
 * its consumers (graph_link recomputes both). Names, id arrays and constant data live in the graph's
 * arena and are freed with the graph. Node order in `nodes` is a topological order once
 * graph_topo_sort has run; every pass keeps it so.
 *
 * Contract for constant data: value->data is set for PARAM and CONST values (dense, row-major,
 * desc.dtype; bool as one byte) and NULL for everything computed at run time.
 */
#ifndef SC_GRAPH_H
#define SC_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/status.h"
#include "core/strmap.h"
#include "core/tensor.h"
#include "graph/attrs.h"
#include "graph/ops.h"

typedef enum {
    SC_VALUE_INPUT,     /* fed by the caller at run time */
    SC_VALUE_PARAM,     /* trainable initializer */
    SC_VALUE_CONST,     /* constant: Constant nodes, folded subgraphs, canonicalised attributes */
    SC_VALUE_ACT,       /* activation computed by a node */
    SC_VALUE_GRAD,      /* gradient (autodiff/) */
    SC_VALUE_OPT_STATE  /* optimizer state (autodiff/) */
} sc_value_kind;

typedef struct {
    const char *name;
    sc_value_kind kind;
    sc_desc desc;                        /* dims < 0 until bound / inferred */
    const char **dim_names;              /* NULL, or SC_MAX_RANK symbolic dim names from the file
                                          * (NULL where fixed); see value_dim_name. Out of line:
                                          * only graph inputs have them, and 64 bytes in every value
                                          * were 0.8 GB at 13M values. */
    int producer;                        /* node id, -1 for inputs, params and constants */
    int n_consumers;
    int *consumers;                      /* node ids, one entry per use (graph_link) */
    void *data;                          /* host data for PARAM and CONST, else NULL */
    bool is_output;                      /* a graph output */
    bool is_sequence;                    /* an ONNX sequence of tensors, not a tensor: only control
                                          * ops (ops.def) read or make one, and none is left once
                                          * graph_infer_shapes has lowered them */
    bool name_pending;                   /* named between graph_names_defer and _resolve: not yet
                                          * checked for uniqueness nor in by_name */
} sc_value;

typedef struct {
    sc_op op;
    const char *name;
    int n_in, n_out;
    int *in;  /* value ids; -1 marks an omitted optional input */
    int *out; /* value ids; -1 marks an omitted optional output */
    const sc_attrs *attrs; /* never NULL in a graph: &sc_attrs_none, or interned (graph_attrs_intern) */
} sc_node;

typedef struct sc_graph {
    sc_arena arena;
    sc_value *values;
    int n_values, cap_values;
    sc_node *nodes;
    int n_nodes, cap_nodes;
    int *inputs; /* graph inputs fed at run time, in ONNX order */
    int n_inputs;
    int *outputs; /* graph outputs, in ONNX order */
    int n_outputs;
    int cap_outputs; /* allocated length of outputs when grown by doubling (0: exactly n_outputs) */
    int64_t opset;      /* default-domain opset the model was imported with */
    /* A Loop body or If branch (sc_control_attrs): its values that are captured from enclosing
     * scopes (INPUT values not in `inputs`), in the order of the node's capture inputs. */
    int *captures;
    int n_captures;
    /* The subgraphs this graph owns (graph_own_subgraph), freed with it: only the top-level graph
     * owns any, nested ones included, so that they outlive the nodes copied out of them. */
    struct sc_graph **subgraphs;
    int n_subgraphs, cap_subgraphs;
    sc_strmap by_name;  /* value name -> id */
    int names_deferred; /* graph_names_defer depth: > 0 while uniqueness checks are deferred */
    int first_pending;  /* the first value id that may have name_pending set */
    /* graph_link's consumer lists (all values' lists in one block) and its working arrays, kept and
     * reused by the next link: each link of a 13M-value graph would otherwise fault in 0.25 GB. */
    /* Interned node attributes (graph_attrs_intern): open addressing over the distinct ones. */
    const sc_attrs **attrs_set;
    size_t attrs_cap, attrs_count;
    int *link_pool;
    size_t link_pool_cap;
    void *link_scratch;
    size_t link_scratch_bytes;
} sc_graph;

void graph_init(sc_graph *g);
void graph_free(sc_graph *g);
/* Gives g ownership of sub (malloc'd, graph_init'ed): graph_free(g) frees it. On failure (out of
 * memory) sub is freed and an error returned. */
sc_status graph_own_subgraph(sc_graph *g, sc_graph *sub);

/* Adds a value; the name is copied into the arena and must be unique. Returns the id, or -1 with
 * *st set (duplicate name, out of memory). */
int graph_add_value(sc_graph *g, const char *name, sc_value_kind kind, const sc_desc *desc, sc_status *st);
/* Node attributes are shared and immutable: a node points at one copy per distinct value (the
 * union is 168 bytes, most nodes of a deep model repeat a few values, and a 5M-node training graph
 * spent 0.8 GB holding them inline). To change a node's attributes, copy, modify and set again. */
/* The graph's copy of a (NULL when out of memory). */
const sc_attrs *graph_attrs_intern(sc_graph *g, const sc_attrs *a);
/* n->attrs = graph_attrs_intern(g, a); fails only when out of memory. */
sc_status graph_node_set_attrs(sc_graph *g, sc_node *n, const sc_attrs *a);
/* Gives n a private copy of its attributes, to fill field by field (test graph builders), and
 * returns it; NULL when out of memory. */
sc_attrs *graph_node_attrs_mut(sc_graph *g, sc_node *n);

/* Adds a node (attributes: &sc_attrs_none); in/out arrays are copied. Returns the id, or -1 with *st set. */
int graph_add_node(sc_graph *g, sc_op op, const char *name, const int *in, int n_in, const int *out,
                   int n_out, sc_status *st);
int graph_find_value(const sc_graph *g, const char *name);
/* What a graph input carries, from its name: an integer input of rank >= 2 named like
 * "attention_mask" is a mask and one named like "position_ids" holds positions (exporters' names,
 * matched case-insensitively); anything else is data. Without a file of their own, `train` and
 * `run` give masks all ones (attend everywhere) and positions 0..T-1 along the last dim. */
typedef enum { SC_INPUT_DATA, SC_INPUT_MASK, SC_INPUT_POSITIONS } sc_input_role;
sc_input_role graph_input_role(const sc_value *v);
/* W when value x is Transpose(W) of a 2-D W (perm [1, 0] or none), else -1. Needs graph_link. */
int graph_transposed_matrix(const sc_graph *g, int x);
/* Whether node i may run later than where it is, up to its first reader, to save memory: its outputs
 * take at least twice the bytes of its non-constant inputs (holding the inputs longer costs at most
 * half of holding the outputs), and it reads no parameter, optimizer state or graph input (nothing
 * an in-place update or a feed may overwrite in between). Autodiff (graph order) and the planner's
 * backward phases sink such nodes; a tied LM head's weight gradient is the case, and in mixed
 * precision so is the Cast that widens that gradient from bf16 to f32 (exactly twice its input),
 * which must sink for the product before it to sink too. Needs graph_link. */
bool graph_node_sinks(const sc_graph *g, int i);
/* Symbolic name of dim d of v, or NULL. */
static inline const char *value_dim_name(const sc_value *v, int d) { return v->dim_names ? v->dim_names[d] : NULL; }
/* Sets it (NULL clears); the name is copied into the arena. */
sc_status graph_set_dim_name(sc_graph *g, int value_id, int d, const char *name);
/* A name not used by any value yet, "<base>" or "<base>_<k>"; in the arena. */
const char *graph_unique_name(sc_graph *g, const char *base);
/* Adds a value named graph_unique_name(g, base); while names are deferred, named base as it is and
 * made unique by graph_names_resolve. Returns the id, or -1 with *st set (out of memory). */
int graph_add_value_unique(sc_graph *g, const char *base, sc_value_kind kind, const sc_desc *desc, sc_status *st);
/* Renames value id to graph_unique_name(g, <its name>) ("<name>_<k>"), freeing its name for another
 * value (the importer renames a constant it made when a later node output claims the name), and its
 * producer with it when the node carries the value's name. */
sc_status graph_value_rename_unique(sc_graph *g, int id);
/* Deferred naming, for builders that add millions of values (autodiff at depth 250000: 9M values,
 * one cache and TLB miss each in a 512 MB name map when checked one by one). Between defer and
 * resolve (nestable), graph_add_value_unique does not look the name up, and graph_find_value does
 * not see those values. resolve enters them all in one pass in the map's slot order; a value whose
 * base is taken (by an earlier value, pending or not) gets "<base>_<k>", k the smallest free, and
 * the node that produces it, if named like it, the same name. Which value keeps the base may differ
 * from checking one by one only when a pending value's base is itself "<b>_<k>" of another's. */
void graph_names_defer(sc_graph *g);
sc_status graph_names_resolve(sc_graph *g);
/* Allocates value->data in the arena for the value's (static) desc. */
sc_status graph_alloc_data(sc_graph *g, int value_id);

/* Recomputes producer and consumers of every value from the node list. */
sc_status graph_link(sc_graph *g);
/* Orders nodes topologically (stable: keeps the given order where it is valid). Fails naming a node
 * on a cycle. */
sc_status graph_topo_sort(sc_graph *g);
/* Moves the nodes from n0 on (just appended) to just before the first of nodes [0, n0) that reads
 * one of their outputs, keeping their own order among those with the same reader; one that none of
 * them reads goes last. So an inserted node (a Cast) lives from its use, not from the start of the
 * step. Their inputs must come from before that reader. Relinks the graph. */
sc_status graph_place_appended(sc_graph *g, int n0);
/* Removes node i, whose outputs no node reads and no graph output lists; relinks the graph. */
sc_status graph_remove_node(sc_graph *g, int i);
/* Keeps the nodes with keep[i] set, in order, then relinks the graph (the removed nodes' outputs
 * must be unread). */
sc_status graph_compact_nodes(sc_graph *g, const bool *keep);
/* True when every node's inputs are produced by earlier nodes (or are inputs/params/consts). */
bool graph_is_topo_sorted(const sc_graph *g, int *first_bad_node);

/* Rows of the embedding table that integer value v indexes (the first Gather reading it as indices,
 * directly or through Reshape/Cast/Unsqueeze/Squeeze/Flatten/Identity, as exporters write it), or 0
 * when no Gather does: the range token ids must stay in. */
int64_t graph_gather_rows(const sc_graph *g, int v);

static inline sc_value *graph_value(sc_graph *g, int id) { return &g->values[id]; }
static inline const sc_desc *graph_in_desc(const sc_graph *g, const sc_node *n, int i) {
    return &g->values[n->in[i]].desc;
}
static inline bool node_has_input(const sc_node *n, int i) { return i < n->n_in && n->in[i] >= 0; }

#endif
