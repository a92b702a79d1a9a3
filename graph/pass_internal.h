/* Private to graph/pass*.c. */
#ifndef SC_PASS_INTERNAL_H
#define SC_PASS_INTERNAL_H

#include "graph/passes.h"

/* Moves the nodes appended after index n0 (n0 .. n_nodes - 1) to position at <= n0, in their order;
 * the caller relinks. */
sc_status graph_move_nodes(sc_graph *g, int n0, int at);

/* Replaces node i by the nodes appended from n0 on (at least one), which compute its first and
 * only output: the last of them writes it. They move to i, node i goes, and *i becomes the index
 * of the last of them. */
sc_status graph_splice_lowered(sc_graph *g, int *i, int n0);

/* A lowering of one node in progress: what it appends is named <base>/<what> (made unique), and st
 * is sticky (nothing happens once it is set). */
typedef struct {
    sc_graph *g;
    const char *base;
    sc_status st;
} sc_lowering;

/* lowering_emit appends node op(in) with attrs a (NULL: none) and one fresh activation output,
 * whose desc it infers; lowering_const a constant of desc d holding data. Both return the new
 * value, or -1 with x->st set. */
int lowering_emit(sc_lowering *x, sc_op op, const char *what, const int *in, int n_in, const sc_attrs *a);
int lowering_const(sc_lowering *x, const char *what, const sc_desc *d, const void *data);

/* graph_fuse_inference's last rewrite (graph/pass_layout.c): picks the f32 activations stored
 * channels-last and sets the layout flags of the ops around them; *count gains the nodes that read
 * or write one. Needs graph_link. */
sc_status graph_fuse_channels_last(sc_graph *g, int *count);

/* Control flow and sequences (graph/pass_control.c), lowered by graph_infer_shapes as its walk
 * reaches them. A sequence value's tensors, while known; a Loop iteration's condition, which must
 * fold to true for every iteration but the last. */
typedef struct {
    int *ids;
    int n;
    bool known;
} sc_control_seq;
typedef struct {
    int value;
    const char *loop;
    int64_t iteration;
} sc_control_cond;
typedef struct {
    sc_control_seq *seqs; /* by value id, cap entries */
    int cap;
    sc_control_cond *conds;
    int n_conds, cap_conds;
    int64_t unrolled; /* nodes the Loops lowered so far amount to */
} sc_control_state;
/* A Loop, If or sequence op, or an Identity of a sequence. */
bool graph_is_control_node(const sc_graph *g, const sc_node *n);
/* Appends the nodes that node i amounts to (its inputs inferred and folded); the caller puts them
 * at i and drops node i. */
sc_status graph_lower_control_node(sc_graph *g, int i, sc_control_state *s);
/* After the walk: every unrolled iteration's condition is a constant, true but for the last. */
sc_status graph_control_check(const sc_graph *g, const sc_control_state *s);
void graph_control_state_free(sc_control_state *s);

/* A constant or parameter with its data. */
static inline bool value_is_fixed(const sc_graph *g, int v) {
    return v >= 0 && (g->values[v].kind == SC_VALUE_CONST || g->values[v].kind == SC_VALUE_PARAM) &&
           g->values[v].data;
}

/* A value that a rewrite may drop: read once, not a graph output. Needs graph_link. */
static inline bool value_is_private(const sc_graph *g, int v) {
    return v >= 0 && g->values[v].n_consumers == 1 && !g->values[v].is_output;
}

#endif
