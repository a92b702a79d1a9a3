/* Training data for a session (private to train/): fills the model's data inputs and the loss labels
 * of one batch. A dataset is N samples; epoch e visits them in a permutation drawn from (seed, e),
 * and batch b of the run takes the global sample numbers [b*B, (b+1)*B), so the data of a step is a
 * pure function of (seed, step) and a resumed run sees exactly the batches it would have seen.
 *
 * Sources:
 *   synthetic (default): TD_SYNTHETIC_N = 1024 samples, each drawn from its own counter-based
 *     generator (seed, sample index). Every sample has a latent class c uniform in [0, K):
 *       classifier logits [N,C], labels [N]:      label c (K = C); float inputs noise + proto[c]
 *       per-pixel logits [N,C,H,W], labels [N,H,W]: a 4x4 grid of blocks, each block a class; pixel
 *                                                 labels are their block's class, and the input's
 *                                                 elements carry noise + proto[class]
 *       language model logits [B,T,V], ids [B,T]: a sequence of T+1 tokens from a fixed random
 *                                                 Markov chain (the next token is succ[current] with
 *                                                 probability 3/4, else uniform in [0,V)); input =
 *                                                 seq[:-1], labels = seq[1:]
 *       MSE (float labels):                       K = 8, labels = target[c], input noise + proto[c]
 *     noise, proto and target are drawn element by element from counter-based hashes (no tables):
 *     each the centred sum of four uniforms, mean 0 and variance 1 (approximately normal, within
 *     +-2 sqrt 3). Integer inputs other than language-model ids are
 *     uniform in [0, V) (V the embedding's rows, else 10). The data is learnable, so a demo run
 *     shows the loss going down.
 *   .npy: data [N, <input dims 1..>] feeds the model's one data input ("x.npy"), or the input it names
 *     ("NAME=x.npy", one per input); labels [N, <label dims 1..>] the loss; values are converted to
 *     the graph dtypes; class ids must lie in [0, C) or equal the ignore index and token ids in
 *     [0, V), else an error names the file and the flat index. Mask and position inputs without a
 *     file get their defaults; any other input without one is an error naming it.
 * Language models are recognised through Reshape, Cast, Unsqueeze, Squeeze, Flatten or Identity
 * between the ids input and the embedding Gather (graph_gather_rows), as exporters write them, and
 * --tokens feeds the ids while masks and positions get their defaults.
 *   token file: little-endian uint16 or int32 ids; sample i is the window tok[i*T .. i*T+T] (T+1
 *     tokens): input = window[:-1], labels = window[1:]; N = (n_tokens - 1) / T.
 */
#ifndef SC_TRAIN_DATA_H
#define SC_TRAIN_DATA_H

#include "train/trainer.h"

#define TD_SYNTHETIC_N 1024

typedef enum { TD_SYNTHETIC, TD_NPY, TD_TOKENS } td_kind;
/* An integer input named like "attention_mask" is a mask and one named like "position_ids" holds
 * positions: without a file of their own they get all ones (attend everywhere) and 0..T-1. */
typedef enum { TD_ROLE_DATA, TD_ROLE_MASK, TD_ROLE_POSITIONS } td_role;

typedef struct {
    td_kind kind;
    uint64_t seed;
    int64_t batch, n; /* batch size, samples per epoch */
    /* model side */
    int n_data;            /* data inputs (graph inputs other than labels, lr, step) */
    int data_inputs[8];    /* value ids */
    int64_t vocab[8];      /* rows of the embedding an integer input indexes (0: none) */
    td_role role[8];       /* what an input carries (data, an attention mask, position ids) */
    int labels;            /* value id */
    int64_t classes;       /* C for cross-entropy, 0 for MSE */
    int64_t ignore_index;
    bool lm;               /* language model: data_inputs[lm_input] are ids, labels the next ids */
    int lm_input;
    int64_t seq;           /* language model: T */
    bool per_pixel;
    int64_t k;             /* latent classes of synthetic samples */
    int64_t *succ;         /* synthetic language model: V successors */
    /* .npy arrays converted to the graph dtypes (xs[j] for data input j, data NULL when the input
     * gets its role's default), or the token file */
    sc_tensor xs[8], y;
    void *tokens;
    int64_t n_tokens;
    sc_dtype token_dtype;
    /* permutation of the current epoch */
    int64_t perm_epoch;
    int64_t *perm;
    char desc[512];
} train_data;

sc_status train_data_open(train_data *d, const sc_graph *g, const sc_training_graph *tg, const sc_trainer_config *cfg);
/* Fills feeds[i] (data allocated by the caller, desc = g->inputs[i]'s) for every data input and the
 * labels with the batch starting at global sample number `sample`. */
sc_status train_data_fill(train_data *d, const sc_graph *g, uint64_t sample, sc_tensor *feeds);
void train_data_close(train_data *d);

/* SplitMix64 (Steele, Lea, Flood 2014): the counter-based generator behind every random draw. */
uint64_t td_mix64(uint64_t x);

#endif
