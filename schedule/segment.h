/* Building the chain view (schedule/chain.h) of a training graph (docs/DESIGN.md, schedule/ 2).
 *
 * For every position p of the forward order the cut is the set of computed values produced before p
 * and read by forward nodes at or after p; persistent values (parameters, constants, optimizer
 * state, graph inputs) are excluded and counted in fixed_bytes, so cut 0 is empty (0 bytes), and so
 * are forward values resident most of any step: those read across more than a third of the forward
 * pass (GPT's transposed tied embedding) and forward-made graph outputs no forward node reads
 * (BatchNorm running statistics, the loss), which would otherwise count once per cut or held segment. All cut
 * sizes come from one sweep over value lifetimes (O(n)). Cut positions are chosen near equal shares
 * of forward time, each at the smallest cut inside a window of +-30% of a segment around its ideal
 * place, so checkpoints land on narrow points (block boundaries) by themselves.
 *
 * Per-segment numbers: fwd_all_bytes = values produced in the segment that backward nodes read (or
 * graph outputs); fwd_peak_bytes = the largest live set of values produced in the segment while it
 * runs with FWD_DISCARD; bwd_time / bwd_peak_bytes = time and largest live set of non-forward values
 * of the segment's backward phase (schedule/sched_internal.h, sched_phases). Everything is
 * O(n log n) or better, so a 1.75M-node graph is segmented in well under a second.
 */
#ifndef SC_SEGMENT_H
#define SC_SEGMENT_H

#include "autodiff/autodiff.h"
#include "graph/graph.h"
#include "schedule/chain.h"
#include "schedule/cost.h"

/* target_segments is clamped to [1, n_forward_nodes]; m may be NULL (default CPU model). */
sc_status chain_build(const sc_graph *g, const sc_training_graph *tg, const sc_cost_model *m, int target_segments,
                      sc_chain *c);

#endif
