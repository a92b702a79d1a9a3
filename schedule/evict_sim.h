/* The eviction simulation of per-value eviction plans (schedule/evict.c): a node order run under an
 * activation budget, forward values evicted and brought back (the rules: evict_sim.c). Internal to
 * schedule/. */
#ifndef SC_EVICT_SIM_H
#define SC_EVICT_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule/sched_internal.h"

typedef struct evict_sim evict_sim;

/* A simulation of g (n_forward forward nodes) in node order order_kind (0: graph order; 1: the
 * forward pass, then the backward phases of the chain with every forward node its own segment),
 * evicting by cost per byte, or per byte and distance to the next read (by_distance). */
sc_status evict_sim_create(const sc_graph *g, int n_forward, const sc_cost_model *m, int order_kind, bool by_distance,
                           evict_sim **out);
/* Runs the order with at most cap live computed bytes; *runs (owned by the simulation, valid until
 * the next run) gets the node runs, recomputations included. Fails when a node does not fit. */
sc_status evict_sim_run(evict_sim *x, int64_t cap, const int **runs, int *n_runs);
void evict_sim_destroy(evict_sim *x);

#endif
