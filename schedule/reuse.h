/* Which of a training step's operand accesses find their storage still in the last-level cache:
 * what picks a node's warm or cold kernel time (train/cost_profile.h, the kernel-shape table).
 *
 * The reuse distance of an access is the number of distinct bytes touched (read or written) between
 * it and the previous touch of the same storage: the LRU stack distance (Mattson et al., 1970). Under
 * an LRU cache of C bytes the access hits when distance + its own bytes <= C. A node's input just
 * written by its producer hits; a forward activation read again by backward, or a weight read once
 * per step, usually does not. Writes count as well as reads: a write to a line not in the cache
 * reads it from memory first (write-allocate). An output's storage is taken to be its own, last
 * touched when the same value was a step before, as in a store-everything plan whose arena gives
 * each activation its own block; a plan that reuses blocks under a budget writes warmer.
 *
 * The step is the graph's node order (the store-everything plan's), run twice, so that a weight read
 * first in a step sees the previous step's update as its last touch. Views and in-place outputs are
 * their input's storage, and view nodes touch nothing (they copy nothing). A storage a node reads
 * twice, or reads and writes in place, counts once. */
#ifndef SC_REUSE_H
#define SC_REUSE_H

#include <stdint.h>

#include "core/status.h"
#include "graph/graph.h"

/* cold[i] = the share (0..1) of node i's operand bytes (inputs and outputs, each storage once) that
 * miss a cache of cache_bytes, by the reuse distance of each in a repeated step; 0 for nodes without
 * operands and for views. */
sc_status sc_reuse_cold_share(const sc_graph *g, int64_t cache_bytes, double *cold);

#endif
