/* Choosing a schedule by its lowered plan, not only by the chain estimate (docs/DESIGN.md, schedule/ 3).
 *
 * The chain numbers (schedule/chain.h) are estimates: cuts that share values count them twice, and
 * the allocator adds fragmentation, so a schedule can lower to more or less than its estimate.
 * plan_search therefore lowers candidate schedules and judges them by the exact arena:
 *   none / sqrt / dc:  the strategy's one schedule (they do not depend on the budget).
 *   optimal:           strategy_optimal run at estimate budgets calibrated against the lowered
 *                      plans (the budget scaled by estimate / exact activation bytes, a few rounds),
 *                      plus a fixed set of frugal schedules (dc bisection and binomial slot counts,
 *                      sqrt, none, the program at the estimate's smallest feasible budget; with
 *                      calibrated node times also dc bisected by the cost model's times and by
 *                      segment count, so calibration cannot lose a frugal schedule).
 *   auto:              all of the above, each labelled with the strategy that made it.
 * The fastest candidate (predicted time, then arena) whose arena fits wins. When none fits, the
 * error names the smallest exact arena among the budget-independent candidates: planning again at
 * that number lowers the same schedule, so the named minimum always plans.
 */
#ifndef SC_SEARCH_H
#define SC_SEARCH_H

#include "schedule/sched_internal.h"

sc_status plan_search(const sc_graph *g, const sc_training_graph *tg, const sc_chain *c, const sc_plan_options *opt,
                      const sc_cost_model *m, sc_plan *plan);

#endif
