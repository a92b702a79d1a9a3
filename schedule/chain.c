/* Chain action lists: growth, validation and the strategies' own peak/time estimate (chain.h).
 *
 * Both follow the memory model of schedule/strategies.h (the strategies' dynamic program assumes it):
 * cut 0 is part of fixed_bytes and always available; a cut i > 0 is resident while it is pinned
 * (KEEP..DROP), current (made by the latest FWD) or segment i is held (FWD_ALL(i) done, BWD(i) not
 * yet: its backward may read its inputs). The current cut is dropped at the start of a BWD or of a
 * FWD from another cut (strategies.h says "every action but a KEEP of it or a FWD from it"; KEEP and
 * DROP of other cuts are left out here so that sqrt's DROP(p) between FWD_ALL(p) and FWD_ALL(p+1)
 * is valid; peaks are the same either way, since dropping can only lower bytes already counted).
 *   FWD_*(i): needs cut i resident and BWD(i) not done; peak max(before + fwd_peak_bytes[i], after);
 *             cut i+1 becomes current; FWD_ALL also holds segment i.
 *   BWD(i):   needs BWD(k-1 .. i+1) done and segment i held; peak before + bwd_peak_bytes[i].
 *   resident bytes = fixed + resident cuts + fwd_all_bytes of held segments; time = sum fwd_time
 *   over FWD actions + sum bwd_time over BWD actions. Overlapping cuts count twice, so the estimate
 *   errs high; the lowered plan's peak is exact.
 */
#include "schedule/chain.h"

#include "core/free_all.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *action_name(sc_chain_action_kind k) {
    switch (k) {
    case SC_CHAIN_FWD_DISCARD: return "FWD_DISCARD";
    case SC_CHAIN_FWD_ALL: return "FWD_ALL";
    case SC_CHAIN_BWD: return "BWD";
    case SC_CHAIN_KEEP: return "KEEP";
    case SC_CHAIN_DROP: return "DROP";
    }
    return "?";
}

bool chain_alloc(sc_chain *c, int k) {
    memset(c, 0, sizeof *c);
    c->k = k;
    c->pos = calloc((size_t)k + 1, sizeof(int));
    c->cut_bytes = calloc((size_t)k + 1, sizeof(int64_t));
    c->fwd_all_bytes = calloc((size_t)k, sizeof(int64_t));
    c->fwd_peak_bytes = calloc((size_t)k, sizeof(int64_t));
    c->bwd_peak_bytes = calloc((size_t)k, sizeof(int64_t));
    c->fwd_time = calloc((size_t)k, sizeof(double));
    c->bwd_time = calloc((size_t)k, sizeof(double));
    if (c->pos && c->cut_bytes && c->fwd_all_bytes && c->fwd_peak_bytes && c->bwd_peak_bytes && c->fwd_time &&
        c->bwd_time)
        return true;
    chain_free(c);
    return false;
}

void chain_free(sc_chain *c) {
    SC_FREE_ALL(c->pos, c->cut_bytes, c->fwd_all_bytes, c->fwd_peak_bytes, c->bwd_peak_bytes, c->fwd_time, c->bwd_time);
    memset(c, 0, sizeof *c);
}

sc_status chain_schedule_push(sc_chain_schedule *s, sc_chain_action_kind kind, int seg) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        sc_chain_action *a = realloc(s->a, sizeof *a * (size_t)cap);
        if (!a) return sc_errorf("out of memory growing a chain schedule (%d actions)", s->n);
        s->a = a;
        s->cap = cap;
    }
    s->a[s->n++] = (sc_chain_action){kind, seg};
    return SC_OK;
}

void chain_schedule_free(sc_chain_schedule *s) {
    free(s->a);
    s->a = NULL;
    s->n = s->cap = 0;
}

typedef struct {
    const sc_chain *c;
    bool *pinned, *held;
    int cur;
    int64_t bytes; /* resident, fixed included */
} chain_sim;

static bool cut_resident(const chain_sim *m, int i) {
    return i == 0 || m->pinned[i] || m->cur == i || (i < m->c->k && m->held[i]);
}

/* Applies a change to cut i's flags through f, keeping bytes in step. */
#define CUT_UPDATE(m, i, stmt)                                                                    \
    do {                                                                                          \
        bool was_ = (i) > 0 && cut_resident(m, i);                                                \
        stmt;                                                                                     \
        bool now_ = (i) > 0 && cut_resident(m, i);                                                \
        if (was_ != now_) (m)->bytes += (now_ ? 1 : -1) * (m)->c->cut_bytes[i];                   \
    } while (0)

static sc_status sim_init(chain_sim *m, const sc_chain *c) {
    m->c = c;
    m->pinned = calloc((size_t)c->k + 2, 1);
    m->held = calloc((size_t)c->k + 2, 1);
    m->cur = -1;
    m->bytes = c->fixed_bytes;
    if (!m->pinned || !m->held) return sc_errorf("out of memory simulating a chain schedule");
    return SC_OK;
}

static void sim_free(chain_sim *m) {
    free(m->pinned);
    free(m->held);
}

static void sim_set_cur(chain_sim *m, int cur) {
    int old = m->cur;
    if (old == cur) return;
    CUT_UPDATE(m, old, m->cur = -1);
    CUT_UPDATE(m, cur, m->cur = cur);
}

static void sim_hold(chain_sim *m, int i, bool on) {
    if (m->held[i] == on) return;
    m->bytes += (on ? 1 : -1) * m->c->fwd_all_bytes[i];
    CUT_UPDATE(m, i, m->held[i] = on);
}

/* Runs one action, checking it when err is given; updates peak and time. */
static sc_status sim_step(chain_sim *m, int idx, sc_chain_action a, int *next_bwd, int64_t *peak, double *time) {
    const sc_chain *c = m->c;
    int k = c->k;
    bool is_fwd = a.kind == SC_CHAIN_FWD_ALL || a.kind == SC_CHAIN_FWD_DISCARD;
    int lim = a.kind == SC_CHAIN_KEEP || a.kind == SC_CHAIN_DROP ? k : k - 1;
    if (a.seg < 0 || a.seg > lim)
        return sc_errorf("action %d: %s(%d) is out of range (k = %d)", idx, action_name(a.kind), a.seg, k);
    /* KEEP / DROP never touch the current cut (dropping it there could only lower a peak that was
     * already counted before the action); a BWD or a FWD from another cut consumes it */
    if (a.kind == SC_CHAIN_BWD || (is_fwd && a.seg != m->cur)) sim_set_cur(m, -1);
    switch (a.kind) {
    case SC_CHAIN_FWD_DISCARD:
    case SC_CHAIN_FWD_ALL:
        if (!cut_resident(m, a.seg))
            return sc_errorf("action %d: %s(%d) starts from cut %d, which is not resident (neither kept, just "
                             "computed nor held)", idx, action_name(a.kind), a.seg, a.seg);
        if (a.seg > *next_bwd)
            return sc_errorf("action %d: %s(%d) after BWD(%d) already ran", idx, action_name(a.kind), a.seg, a.seg);
        if (m->bytes + c->fwd_peak_bytes[a.seg] > *peak) *peak = m->bytes + c->fwd_peak_bytes[a.seg];
        *time += c->fwd_time[a.seg];
        if (a.kind == SC_CHAIN_FWD_ALL) sim_hold(m, a.seg, true);
        sim_set_cur(m, a.seg + 1);
        break;
    case SC_CHAIN_BWD:
        if (a.seg != *next_bwd)
            return sc_errorf("action %d: BWD(%d) out of order (expected BWD(%d))", idx, a.seg, *next_bwd);
        if (!m->held[a.seg]) return sc_errorf("action %d: BWD(%d) without FWD_ALL(%d) before it", idx, a.seg, a.seg);
        if (m->bytes + c->bwd_peak_bytes[a.seg] > *peak) *peak = m->bytes + c->bwd_peak_bytes[a.seg];
        *time += c->bwd_time[a.seg];
        sim_hold(m, a.seg, false);
        (*next_bwd)--;
        break;
    case SC_CHAIN_KEEP:
        if (m->pinned[a.seg]) return sc_errorf("action %d: KEEP(%d) of a cut already kept", idx, a.seg);
        if (!cut_resident(m, a.seg)) return sc_errorf("action %d: KEEP(%d) of a cut not resident", idx, a.seg);
        CUT_UPDATE(m, a.seg, m->pinned[a.seg] = true);
        break;
    case SC_CHAIN_DROP:
        if (!m->pinned[a.seg]) return sc_errorf("action %d: DROP(%d) of a cut not kept", idx, a.seg);
        CUT_UPDATE(m, a.seg, m->pinned[a.seg] = false);
        break;
    }
    if (m->bytes > *peak) *peak = m->bytes;
    return SC_OK;
}

sc_status chain_schedule_validate(const sc_chain *c, const sc_chain_schedule *s) {
    if (c->k < 1) return sc_errorf("the chain has no segment (k = %d)", c->k);
    chain_sim m;
    sc_status st = sim_init(&m, c);
    int next_bwd = c->k - 1;
    int64_t peak = 0;
    double t = 0;
    for (int i = 0; i < s->n && !st; i++) st = sim_step(&m, i, s->a[i], &next_bwd, &peak, &t);
    if (!st && next_bwd >= 0) st = sc_errorf("schedule ends before BWD(%d) (of %d segments)", next_bwd, c->k);
    sim_free(&m);
    return st;
}

void chain_schedule_estimate(const sc_chain *c, const sc_chain_schedule *s, int64_t *peak, double *time) {
    chain_sim m;
    int next_bwd = c->k - 1;
    int64_t pk = c->fixed_bytes;
    double t = 0;
    sc_status st = sim_init(&m, c);
    /* an invalid schedule is estimated up to its first bad action */
    for (int i = 0; i < s->n && !st; i++) st = sim_step(&m, i, s->a[i], &next_bwd, &pk, &t);
    sc_status_free(st);
    sim_free(&m);
    if (peak) *peak = pk;
    if (time) *time = t;
}
