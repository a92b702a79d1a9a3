/* Checkpointing strategies over the chain view (schedule/chain.h): each turns an sc_chain into a
 * list of chain actions whose estimate (chain_schedule_estimate) is the strategy's prediction.
 * They see only per-segment numbers, never the graph.
 *
 *   strategy_none     store everything: FWD_ALL 0..k-1, BWD k-1..0.
 *   strategy_sqrt     Chen et al. 2016: keep every g-th cut during one forward sweep (g ~ sqrt(k)),
 *                     then per group, last first: re-run it with FWD_ALL and reverse it.
 *   strategy_dc       slots == 0: Siskind-Pearlmutter bisection (middle by forward time), O(log k)
 *                     pinned cuts, O(k log k) forward work. slots > 0: binomial (revolve) placement
 *                     with `slots` snapshot slots, cut 0 counted as one as in revolve (Griewank-
 *                     Walther 2000), so slots = 1 re-runs from the inputs for every segment.
 *   strategy_optimal  rotor-like dynamic program (Herrmann et al. 2019) minimising the estimated
 *                     time under peak <= budget; long chains are coarsened, and dc competes.
 *   strategy_auto_pick the cheapest of the above that fits the budget.
 * budget is device bytes including fixed_bytes; 0 = unlimited. A strategy that cannot fit returns
 * a status naming the smallest budget it found feasible and what dominates it.
 * All strategy_* functions are defined in strategy_simple.c / strategy_dc.c / strategy_optimal.c /
 * strategy_auto.c.
 *
 * Memory model the strategies (strategy_optimal's dynamic program in particular) assume; it is the
 * one chain_schedule_estimate computes (tests/test_strategies.c checks that they agree):
 *   resident = fixed_bytes (cut 0 included: the inputs) + sum cut_bytes[i] over resident cuts i > 0
 *              + sum fwd_all_bytes[i] over held segments i (FWD_ALL(i) done, BWD(i) not yet).
 *   A cut i > 0 is resident while it is pinned (KEEP..DROP), or current (produced by the latest
 *   FWD and not yet consumed), or segment i is held (its backward may read its inputs).
 *   The current cut is dropped at the start of every action but a KEEP of it or a FWD from it.
 *   FWD_*(i) (cut i resident): peak max(before + fwd_peak_bytes[i], after); after it cut i+1 is
 *     current, and FWD_ALL also holds segment i.
 *   BWD(i): peak (after dropping the current cut) + bwd_peak_bytes[i]; then segment i is released.
 *   time = sum fwd_time over FWD actions + sum bwd_time over BWD actions.
 */
#ifndef SC_STRATEGIES_H
#define SC_STRATEGIES_H

#include <stddef.h>
#include <stdint.h>

#include "schedule/chain.h"
#include "schedule/plan.h"

sc_status strategy_none(const sc_chain *c, sc_chain_schedule *out);
sc_status strategy_sqrt(const sc_chain *c, sc_chain_schedule *out);
sc_status strategy_dc(const sc_chain *c, int slots, int64_t budget, sc_chain_schedule *out);
sc_status strategy_optimal(const sc_chain *c, int64_t budget, sc_chain_schedule *out);
/* Fills *chosen with the concrete strategy used (never SC_STRATEGY_AUTO). */
sc_status strategy_auto_pick(const sc_chain *c, int64_t budget, sc_chain_schedule *out, sc_strategy *chosen);

/* Revolve's minimal count of FWD_DISCARDs to reverse l uniform segments with s slots (cut 0's slot
 * included): t l - C(s + t, s + 1), t least with l <= C(s + t, s); what strategy_dc(slots = s) emits. */
int64_t strategy_binomial_forwards(int64_t l, int64_t s);
/* The smallest budget any schedule fits in under the model above (dc with one slot reaches it),
 * with a sentence on what dominates it written to why. */
int64_t strategy_min_budget(const sc_chain *c, char *why, size_t why_len);
/* Segment i's own need on top of fixed bytes; *what names its dominant part. */
int64_t strategy_segment_need(const sc_chain *c, int i, const char **what);

#endif
