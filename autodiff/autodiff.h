/* Training graphs (docs/DESIGN.md, autodiff/): forward + loss head + backward + optimizer updates, all
 * as nodes of the one graph, so the planner sees everything.
 *
 * autodiff_build_training turns a prepared forward graph (graph_prepare done, static shapes) into a
 * training graph in place:
 *   - BatchNormalization nodes switch to training mode (batch statistics); their running mean and
 *     variance become extra outputs, written back to the parameters after each step (writebacks).
 *   - Dropout nodes switch to training mode with a seeded, counter-based mask (reproducible, and
 *     identical when a plan recomputes the node).
 *   - A loss head is appended to the model output (chosen from its shape or by opt->loss), with a
 *     new graph input for the labels.
 *   - The backward graph is built by reverse traversal (autodiff_build_backward).
 *   - With several data-parallel ranks, AllReduce nodes average the gradients over the ranks in
 *     buckets, as backward completes them (autodiff/data_parallel.c).
 *   - One optimizer update node per trainable parameter, emitted right after its gradient is final,
 *     updating the parameter and its state in place. lr and step are scalar graph inputs fed by the
 *     trainer each step (schedules live on the host).
 * Frozen parameters (opt->freeze_regex) and inputs get no gradient and nothing is computed for them.
 */
#ifndef SC_AUTODIFF_H
#define SC_AUTODIFF_H

#include "graph/graph.h"

typedef enum { SC_LOSS_AUTO, SC_LOSS_CROSS_ENTROPY, SC_LOSS_MSE } sc_loss_kind;
typedef enum { SC_OPTIM_SGD, SC_OPTIM_ADAMW } sc_optim_kind;

typedef struct {
    sc_loss_kind loss;
    int64_t ignore_index;   /* segmentation labels to ignore; default -100 like PyTorch */
    sc_optim_kind optim;
    float momentum;         /* SGD; default 0.9 set by the CLI */
    bool nesterov;
    float weight_decay;
    float beta1, beta2, eps;/* AdamW; PyTorch defaults 0.9, 0.999, 1e-8 */
    float clip_norm;        /* > 0: clip gradients by global norm */
    const char *freeze_regex; /* POSIX extended regex over parameter names; NULL = none */
    bool keep_grads;        /* make every parameter gradient a graph output (tests, --dump-grads) */
    uint64_t dropout_seed;
    bool loss_scaling;      /* fp16: dLoss is the input loss_scale and updates read gradients times the
                               input inv_loss_scale (dynamic loss scaling, train/trainer.c) */
    int ranks;              /* data parallel: > 1 averages the gradients over this many ranks (AllReduce
                               nodes, autodiff/data_parallel.c) before the updates; 0 or 1: none */
    int64_t bucket_bytes;   /* gradient bytes per AllReduce; 0 = SC_BUCKET_BYTES_DEFAULT */
    bool shard_optimizer;   /* ZeRO-1 (with ranks > 1): each bucket's optimizer state lives on one rank, its
                               owner, which alone updates the bucket's parameters (Reduce, then Broadcast
                               of the updated parameters; autodiff/data_parallel.c) */
    int rank;               /* this rank (shard_optimizer: the graph differs per rank) */
    int64_t param_block;    /* a parameter over this many bytes that is read by whole rows (an embedding
                               table, a tied LM head) trains as row blocks of about this size, each a
                               parameter of its own (autodiff/param_blocks.c); 0 = SC_PARAM_BLOCK_DEFAULT,
                               < 0 = never */
} sc_train_options;

/* Row blocks of 16 MiB: GPT-2's 154 MB tied table becomes 10 blocks. */
#define SC_PARAM_BLOCK_DEFAULT ((int64_t)16 << 20)
/* --param-block's value: a size (256KiB, 16MiB, bytes) or "off" (-1); 0 when neither. */
int64_t sc_param_block_parse(const char *s);

/* The AllReduce of the sharded clip norm's partial sums (autodiff/optimizer.c): after every bucket. */
#define SC_CLIP_BUCKET (1 << 24)

/* PyTorch DDP's bucket_cap_mb default. */
#define SC_BUCKET_BYTES_DEFAULT ((int64_t)25 << 20)

/* Sets the PyTorch defaults: cross-entropy auto, SGD momentum 0, AdamW 0.9/0.999/1e-8, wd 0. */
void sc_train_options_default(sc_train_options *o);

typedef struct {
    int loss;           /* scalar f32 loss value */
    int n_forward_nodes;/* nodes [0, n) are the forward pass and loss head: pure functions of params
                           and inputs (Dropout's mask is counter-based), so a plan may recompute them;
                           everything after is backward and optimizer updates */
    int output;         /* the model output the loss reads */
    int labels;         /* graph input for the loss targets */
    int lr, step;       /* scalar graph inputs: f32 learning rate, i64 1-based step */
    int loss_scale, inv_loss_scale; /* with loss_scaling, f32 scalar graph inputs: the seed dLoss and the
                           factor the updates multiply gradients by (a power of two and its inverse,
                           so unscaling is exact); -1 without */
    int n_params;
    int *params;        /* trainable parameter value ids */
    int *grads;         /* final gradient of each parameter (a graph output when keep_grads) */
    int *block_of;      /* per parameter: the value it is a row block of (autodiff/param_blocks.c; a
                           parent's blocks are consecutive, in row order), or -1; NULL when no
                           parameter is split or the list was sharded */
    int n_states;
    int *states;        /* optimizer state values (SC_VALUE_OPT_STATE, data zeroed in the arena) */
    int n_writebacks;
    int *wb_src, *wb_dst; /* after each step copy value wb_src[i] (a graph output) into param wb_dst[i] */
    /* Data parallel with a sharded optimizer: params/grads above are this rank's own (the buckets it
     * owns); every trainable parameter of the model, updated here or broadcast by its owner: */
    int n_all_params;
    int *all_params;
    /* Data parallel: per parameter (as params), a node its update must follow (the next bucket's
     * collective, so that this bucket's runs meanwhile), or -1; NULL without data parallel. */
    int *update_after;
} sc_training_graph;

sc_status autodiff_build_training(sc_graph *g, const sc_train_options *opt, sc_training_graph *tg);

/* The forward pass alone as a training graph: every node is forward, nothing is trained (no loss,
 * parameters, gradients or state), so a plan of it is an inference plan (backends/infer.h). */
void autodiff_inference_graph(const sc_graph *g, sc_training_graph *tg);

/* Appends the backward graph of scalar value `loss` with respect to values wrt[0..n) and writes each
 * final gradient id into grads (-1 when loss does not depend on it). The seed dLoss is a constant 1.
 * Rules come from sc_grad_rules; an op on the path without one fails naming the node. */
sc_status autodiff_build_backward(sc_graph *g, int loss, const int *wrt, int n_wrt, int *grads);

/* The same with the seed dLoss taken from value `seed` (same dtype and shape as the loss), or the
 * constant 1 when seed < 0. */
sc_status autodiff_build_backward_seeded(sc_graph *g, int loss, int seed, const int *wrt, int n_wrt, int *grads);

#endif
