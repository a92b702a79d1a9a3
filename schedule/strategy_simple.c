/* The simple strategies.
 *
 * strategy_none: FWD_ALL 0..k-1 then BWD k-1..0 (today's store-everything step).
 * strategy_sqrt: Chen et al. 2016. Groups of g = ceil(sqrt(k)) consecutive segments; one forward
 *   sweep pins each group's first cut and runs the last group with FWD_ALL; then each earlier group,
 *   last first, is re-run with FWD_ALL from its pinned cut and reversed. One extra forward pass at
 *   most, about sqrt(k) pinned cuts plus one group's kept activations.
 */
#include <math.h>

#include "schedule/strategies.h"

sc_status strategy_none(const sc_chain *c, sc_chain_schedule *out) {
    if (c->k < 1) return sc_errorf("strategy none: the chain has no segment (k = %d)", c->k);
    for (int i = 0; i < c->k; i++) SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, i));
    for (int i = c->k - 1; i >= 0; i--) SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, i));
    return SC_OK;
}

sc_status strategy_sqrt(const sc_chain *c, sc_chain_schedule *out) {
    int k = c->k;
    if (k < 1) return sc_errorf("strategy sqrt: the chain has no segment (k = %d)", k);
    int g = (int)ceil(sqrt((double)k));
    int last = (k - 1) / g * g; /* first segment of the last group */
    for (int i = 0; i < last; i++) {
        SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_DISCARD, i));
        if ((i + 1) % g == 0) SC_TRY(chain_schedule_push(out, SC_CHAIN_KEEP, i + 1));
    }
    for (int p = last; p >= 0; p -= g) {
        int q = p + g < k ? p + g : k;
        for (int i = p; i < q; i++) SC_TRY(chain_schedule_push(out, SC_CHAIN_FWD_ALL, i));
        for (int i = q - 1; i >= p; i--) SC_TRY(chain_schedule_push(out, SC_CHAIN_BWD, i));
        if (p > 0) SC_TRY(chain_schedule_push(out, SC_CHAIN_DROP, p)); /* held until BWD(p) anyway */
    }
    return SC_OK;
}
