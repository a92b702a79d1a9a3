/* The chain view of a training graph that checkpointing strategies reason about (docs/DESIGN.md,
 * schedule/ 2-3).
 *
 * segment.c cuts the forward pass (nodes [0, n_forward_nodes) of a training graph, in topological
 * order) at k+1 positions p_0 = 0 < p_1 < ... < p_k = n_forward_nodes. Cut i is the set of values
 * produced before p_i (or graph inputs) and read by forward nodes at or after p_i: exactly what must
 * be resident to (re)run the forward pass from p_i. Segment i is the nodes [p_i, p_{i+1}).
 * (Refined by planfix: values read across more than a third of a forward pass of at least 12 nodes,
 * and forward graph outputs no forward node reads, are counted once in fixed_bytes instead of in
 * cuts and segments, since any schedule keeps them resident most of the step; segment.h.)
 * Strategies see only the numbers below, so they work on ResNet, DRANet, GPT or DenseNet alike.
 *
 * Strategies output a list of chain actions; lower.c turns it into plan steps (RUN/FREE/...) with
 * exact value liveness, so the numbers here are the strategies' estimates and the lowered plan's
 * peak is the truth.
 */
#ifndef SC_CHAIN_H
#define SC_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

typedef struct {
    int k;                   /* segments */
    int *pos;                /* [k+1] node index where cut i sits; pos[k] = n_forward_nodes */
    int64_t *cut_bytes;      /* [k+1] bytes of cut i's activations (cut 0: the model's inputs) */
    int64_t *fwd_all_bytes;  /* [k] bytes segment i keeps for its backward when run with FWD_ALL */
    int64_t *fwd_peak_bytes; /* [k] transient peak while running segment i (inputs excluded) */
    int64_t *bwd_peak_bytes; /* [k] transient extra peak of segment i's backward (gradients) */
    double *fwd_time;        /* [k] predicted seconds to run segment i forward */
    double *bwd_time;        /* [k] predicted seconds of segment i's backward nodes */
    int64_t fixed_bytes;     /* resident the whole step: params, optimizer state, inputs, constants */
} sc_chain;

typedef enum {
    SC_CHAIN_FWD_DISCARD, /* run segment i; keep only what later forward segments need (cut i+1) */
    SC_CHAIN_FWD_ALL,     /* run segment i and keep everything its backward reads */
    SC_CHAIN_BWD,         /* run segment i's backward (needs FWD_ALL(i) done and BWD(i+1) done, or
                             i = k-1); frees segment i's kept activations afterwards */
    SC_CHAIN_KEEP,        /* pin cut i (resident now) so later FWD_DISCARDs do not free it */
    SC_CHAIN_DROP         /* unpin cut i */
} sc_chain_action_kind;

typedef struct {
    sc_chain_action_kind kind;
    int seg; /* segment index, or cut index for KEEP/DROP */
} sc_chain_action;

/* Gives c k segments with every array zeroed (fixed_bytes 0); false when out of memory, with c left
 * empty. chain_free releases the arrays and empties c. */
bool chain_alloc(sc_chain *c, int k);
void chain_free(sc_chain *c);

/* A growable action list. */
typedef struct {
    sc_chain_action *a;
    int n, cap;
} sc_chain_schedule;

sc_status chain_schedule_push(sc_chain_schedule *s, sc_chain_action_kind kind, int seg);
void chain_schedule_free(sc_chain_schedule *s);

/* Checks the action list is a valid reversal of the chain (every segment's BWD exactly once, in
 * order k-1 .. 0, each after its FWD_ALL, every FWD from a resident cut). Returns a status naming
 * the first bad action. The strategies' tests run it on every schedule they produce. */
sc_status chain_schedule_validate(const sc_chain *c, const sc_chain_schedule *s);

/* Estimates from the chain numbers alone, under the memory model of schedule/strategies.h: peak bytes
 * (fixed + resident cuts + held segments + the action's transient) and time (sum of fwd_time over
 * forward actions + bwd_time over BWD actions; the recompute cost is the forward part minus
 * sum(fwd_time)). */
void chain_schedule_estimate(const sc_chain *c, const sc_chain_schedule *s, int64_t *peak, double *time);

#endif
