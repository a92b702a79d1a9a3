/* Private to autodiff/training.c, loss.c and optimizer.c: the pieces of autodiff_build_training and
 * the small node builder they share. Public callers use autodiff/autodiff.h.
 *
 * The builder mirrors grad.h's sticky-error style: after the first failure every call returns -1 and
 * does nothing, so a sequence of emits is checked once at the end (b->st).
 */
#ifndef SC_TRAIN_INTERNAL_H
#define SC_TRAIN_INTERNAL_H

#include "autodiff/autodiff.h"

typedef struct {
    sc_graph *g;
    sc_status st; /* first error; sticky */
} tb_builder;

/* Records st as the builder's error (the first one wins) and returns -1. */
int tb_fail(tb_builder *b, sc_status st);

/* Appends op(in) (-1 = omitted input) with attrs (NULL = zeroed) and n_out new values of `kind`
 * named "<name>" (made unique), infers their descs with the op's shape function, stores the ids in
 * out (may be NULL for one output) and returns the first output id, or -1. An out[k] that is
 * TB_OMIT on entry becomes an omitted output (-1) and no value is created for it. */
#define TB_OMIT (-2)
int tb_emit(tb_builder *b, sc_op op, const char *name, const int *in, int n_in, int n_out, int *out,
            const sc_attrs *attrs, sc_value_kind kind);
/* A CONST value with a copy of data (desc's dtype, dense). */
int tb_const(tb_builder *b, const char *name, const sc_desc *desc, const void *data);
int tb_const_scalar(tb_builder *b, const char *name, sc_dtype dtype, double v);
/* A new graph input, appended to g->inputs. */
int tb_input(tb_builder *b, const char *name, const sc_desc *desc);
/* Appends value v to g->outputs (once) and marks it is_output. */
void tb_output(tb_builder *b, int v);
/* Replaces node's in (or out) list by a copy of ids with n entries (the arena owns both). */
void tb_node_set_inputs(tb_builder *b, int node, const int *ids, int n);
void tb_node_set_outputs(tb_builder *b, int node, const int *ids, int n);

/* Moves the nodes [first, n_nodes), appended last, to just after position pos[k - first] each
 * (stable; -1 = before every node), then relinks the graph. */
sc_status tb_place_new_nodes(sc_graph *g, int first, const int *pos);

/* param_blocks.c: each parameter of tg->params over opt->param_block bytes whose readers all read
 * whole rows becomes row blocks, parameters of their own viewing its data, in its place in tg->params
 * (the parameter itself turns into a constant that nothing reads). */
sc_status param_blocks_split(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg);

/* loss.c: appends the loss head to model output *output (opt->loss, or chosen from its shape);
 * creates the "labels" graph input. *loss is the scalar loss value, made a graph output. A
 * cross-entropy on an f32 Cast of 16-bit logits reads those instead: *output becomes them. */
sc_status loss_head_build(sc_graph *g, const sc_train_options *opt, int *output, int *loss, int *labels);

/* optimizer.c: one update node per (params[i], grads[i]) placed after the gradient is final and W's
 * last reader (after every gradient when clipping), the lr and step inputs and the state values. */
sc_status optimizer_build(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg);

/* data_parallel.c: with opt->ranks > 1, the gradients in buckets through AllReduce nodes placed as
 * backward completes each bucket; tg->grads become the averaged ones. */
sc_status data_parallel_build(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg);
/* With a sharded optimizer, after the updates: the owners' Broadcasts of the updated parameters. */
sc_status data_parallel_finish(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg);

#endif
