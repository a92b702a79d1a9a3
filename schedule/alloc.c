/* Static offsets for every interval of a plan (docs/DESIGN.md, schedule/: "every device-resident value
 * interval gets a static offset").
 *
 * The first n_fixed_intervals intervals (resident persistent values) are packed from 0 in value
 * order: the fixed region [0, fixed_bytes). Streamed persistent values are placed like the rest. The
 * others are placed by simulating the steps in order with a best-fit allocator over
 * [fixed_bytes, ...): RUN (and PREFETCH) open intervals, FREE closes the value's current one.
 * Blocks form a list in address order (so a freed block merges with free neighbours in O(1)); free
 * blocks also sit in a treap keyed by (size, address), so best fit (smallest block that fits, lowest
 * address among equals) is O(log n). A request no free block fits takes the top of the arena,
 * extending a free block that ends there. Sizes are multiples of 64, so every offset is 64-byte
 * aligned. arena_bytes is the high-water mark. O(n log n) for n intervals.
 *
 * In-place outputs (iv_from): when a RUN's output may overwrite input k (sc_op_donor_pair_ok: an
 * element-wise kernel's output 0, a view op's (Reshape..) output, or AllReduce's output k), that input has the output's dtype
 * and shape (bytes for a view op), is read at no other input
 * position, and its interval ends before the next RUN with no transfer of it in between (so none
 * is pending: an OFFLOAD's WAIT comes before its FREE), the output takes the input's block instead
 * of a new one,
 * and the input's FREE gives nothing back. Gradient sums Add(partial, contribution), ReluGrad and
 * the like then need one buffer less: the tied embedding's [vocab, dim] gradient sum holds two
 * copies at its peak instead of three.
 */
#include <stdlib.h>
#include <string.h>

#include "core/free_all.h"
#include "schedule/sched_internal.h"

typedef struct {
    int64_t addr, size;
    int prev, next; /* address order, -1 at the ends */
    int l, r;       /* treap children (free blocks only) */
    uint32_t pri;
    bool free;
} blk;

typedef struct {
    blk *b;
    int n, cap;
    int *spare, n_spare; /* recycled block slots */
    int root, tail;
    int64_t base, high;
    uint64_t rng;
} allocator;

static bool key_less(const blk *a, int64_t size, int64_t addr) {
    return a->size < size || (a->size == size && a->addr < addr);
}

static int treap_merge(allocator *A, int x, int y) {
    if (x < 0) return y;
    if (y < 0) return x;
    if (A->b[x].pri > A->b[y].pri) {
        A->b[x].r = treap_merge(A, A->b[x].r, y);
        return x;
    }
    A->b[y].l = treap_merge(A, x, A->b[y].l);
    return y;
}

/* Splits t into keys < (size, addr) and the rest. */
static void treap_split(allocator *A, int t, int64_t size, int64_t addr, int *lo, int *hi) {
    if (t < 0) {
        *lo = *hi = -1;
        return;
    }
    if (key_less(&A->b[t], size, addr)) {
        treap_split(A, A->b[t].r, size, addr, &A->b[t].r, hi);
        *lo = t;
    } else {
        treap_split(A, A->b[t].l, size, addr, lo, &A->b[t].l);
        *hi = t;
    }
}

static void treap_insert(allocator *A, int x) {
    int lo, hi;
    A->b[x].l = A->b[x].r = -1;
    treap_split(A, A->root, A->b[x].size, A->b[x].addr, &lo, &hi);
    A->root = treap_merge(A, treap_merge(A, lo, x), hi);
}

static int treap_erase_at(allocator *A, int t, int x) {
    if (t == x) return treap_merge(A, A->b[t].l, A->b[t].r);
    if (key_less(&A->b[x], A->b[t].size, A->b[t].addr)) A->b[t].l = treap_erase_at(A, A->b[t].l, x);
    else A->b[t].r = treap_erase_at(A, A->b[t].r, x);
    return t;
}

static void treap_erase(allocator *A, int x) { A->root = treap_erase_at(A, A->root, x); }

static int treap_best_fit(const allocator *A, int64_t size) {
    int t = A->root, best = -1;
    while (t >= 0) {
        if (A->b[t].size >= size) {
            best = t;
            t = A->b[t].l;
        } else {
            t = A->b[t].r;
        }
    }
    return best;
}

static int blk_new(allocator *A, int64_t addr, int64_t size) {
    int x;
    if (A->n_spare) {
        x = A->spare[--A->n_spare];
    } else {
        if (A->n == A->cap) {
            int cap = A->cap ? 2 * A->cap : 1024;
            blk *nb = realloc(A->b, sizeof *nb * (size_t)cap);
            int *ns = realloc(A->spare, sizeof *ns * (size_t)cap);
            if (nb) A->b = nb;
            if (ns) A->spare = ns;
            if (!nb || !ns) return -1;
            A->cap = cap;
        }
        x = A->n++;
    }
    A->rng ^= A->rng << 13;
    A->rng ^= A->rng >> 7;
    A->rng ^= A->rng << 17;
    A->b[x] = (blk){addr, size, -1, -1, -1, -1, (uint32_t)(A->rng >> 32), false};
    return x;
}

static void blk_unlink(allocator *A, int x) {
    blk *b = &A->b[x];
    if (b->prev >= 0) A->b[b->prev].next = b->next;
    if (b->next >= 0) A->b[b->next].prev = b->prev;
    if (A->tail == x) A->tail = b->prev;
    A->spare[A->n_spare++] = x;
}

static void blk_link_after(allocator *A, int x, int after) {
    A->b[x].prev = after;
    A->b[x].next = after >= 0 ? A->b[after].next : -1;
    if (after >= 0) {
        if (A->b[after].next >= 0) A->b[A->b[after].next].prev = x;
        A->b[after].next = x;
    }
    if (A->tail == after) A->tail = x;
}

/* Returns the block holding the allocation, -1 when out of memory. */
static int alloc_take(allocator *A, int64_t size) {
    int x = treap_best_fit(A, size);
    if (x >= 0) {
        treap_erase(A, x);
        A->b[x].free = false;
        if (A->b[x].size > size) {
            int rest = blk_new(A, A->b[x].addr + size, A->b[x].size - size);
            if (rest < 0) return -1;
            A->b[rest].free = true;
            A->b[x].size = size;
            blk_link_after(A, rest, x);
            treap_insert(A, rest);
        }
        return x;
    }
    if (A->tail >= 0 && A->b[A->tail].free) { /* grow the free block at the top */
        x = A->tail;
        treap_erase(A, x);
        A->b[x].free = false;
        A->b[x].size = size;
    } else {
        int64_t top = A->tail >= 0 ? A->b[A->tail].addr + A->b[A->tail].size : A->base;
        x = blk_new(A, top, size);
        if (x < 0) return -1;
        blk_link_after(A, x, A->tail);
    }
    if (A->b[x].addr + size > A->high) A->high = A->b[x].addr + size;
    return x;
}

static void alloc_give(allocator *A, int x) {
    A->b[x].free = true;
    int nx = A->b[x].next, pv = A->b[x].prev;
    if (nx >= 0 && A->b[nx].free) {
        treap_erase(A, nx);
        A->b[x].size += A->b[nx].size;
        blk_unlink(A, nx);
    }
    if (pv >= 0 && A->b[pv].free) {
        treap_erase(A, pv);
        A->b[pv].size += A->b[x].size;
        blk_unlink(A, x);
        x = pv;
    }
    treap_insert(A, x);
}

/* The open interval of an input of the RUN at step s whose block the output interval out_iv may
 * take over, or -1 (rules above). */
static int donor_interval(const sc_graph *g, const sc_plan *plan, int s, int out_iv, const int *cur, const bool *taken) {
    const sc_node *n = &g->nodes[plan->steps[s].node];
    const sc_value *y = &g->values[plan->intervals[out_iv].value];
    int o = 0;
    while (o < n->n_out && n->out[o] != plan->intervals[out_iv].value) o++;
    if (o == n->n_out) return -1;
    for (int k = 0; k < n->n_in; k++) {
        int d = n->in[k];
        if (d < 0 || !sc_op_donor_pair_ok(n->op, o, k) || cur[d] < plan->n_fixed_intervals || taken[cur[d]]) continue;
        const sc_value *x = &g->values[d];
        if (x->desc.dtype != y->desc.dtype || !(sc_desc_same_shape(&x->desc, &y->desc) || sc_op_is_view(n->op))) continue;
        bool alone = true;
        for (int j = 0; j < n->n_in; j++) alone &= j == k || n->in[j] != d;
        int end = plan->intervals[cur[d]].end;
        bool dies = end > s && end < plan->n_steps;
        for (int t = s + 1; dies && t <= end; t++) {
            const sc_step *u = &plan->steps[t];
            dies = u->kind != SC_STEP_RUN && (u->kind == SC_STEP_FREE || u->kind == SC_STEP_HOST_RUN || u->value != d);
        }
        if (alone && dies && plan->intervals[cur[d]].bytes == plan->intervals[out_iv].bytes) return cur[d];
    }
    return -1;
}

/* Offline placement, greedy by size (Pisarchyk & Lee, "Efficient memory management for deep neural
 * net inference", 2020, as in TFLite): with every lifetime known, place the largest block first at
 * the lowest offset that no time-overlapping block already placed occupies. An in-place chain
 * (iv_from links) is one block living from its first interval's begin to its last one's end. The
 * online best fit above sees blocks in time order and fragments: on GPT-2 small's store-everything
 * plan it used 1.59x the live peak. The offline result is kept only when it is smaller, so a plan
 * never gets worse. The scan is O(n^2), so graphs with more than OFFLINE_MAX blocks keep the online
 * offsets (deep chains, which the online allocator places well). */
enum { OFFLINE_MAX = 20000 };

typedef struct {
    int64_t bytes, offset;
    int begin, end, head; /* head: the chain's first interval */
} group;

static int group_by_size(const void *pa, const void *pb) {
    const group *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return a->begin != b->begin ? (a->begin < b->begin ? -1 : 1) : (a->head > b->head) - (a->head < b->head);
}

/* Lowest offset >= base where x fits beside the placed groups (sorted by offset) that overlap it in
 * time. */
static int64_t lowest_gap(const group *x, group *const *placed, int n_placed, int64_t base) {
    int64_t at = base;
    for (int k = 0; k < n_placed; k++) {
        const group *p = placed[k];
        if (p->begin > x->end || x->begin > p->end) continue;
        if (p->offset >= at + x->bytes) break;
        if (p->offset + p->bytes > at) at = p->offset + p->bytes;
    }
    return at;
}

static sc_status place_offline(sc_plan *plan, const bool *opened) {
    int n = plan->n_intervals, n_groups = 0;
    int *head = malloc(sizeof(int) * ((size_t)n + 1)); /* interval -> its group */
    group *gr = malloc(sizeof(group) * ((size_t)n + 1));
    group **placed = malloc(sizeof(group *) * ((size_t)n + 1));
    if (!head || !gr || !placed) {
        free(head), free(gr), free(placed);
        return sc_errorf("out of memory placing intervals");
    }
    for (int i = 0; i < n; i++) { /* iv_from points backwards, so a chain's head is seen first */
        head[i] = -1;
        if (!opened[i]) continue;
        const sc_interval *iv = &plan->intervals[i];
        int from = plan->iv_from[i];
        if (from >= 0) {
            group *c = &gr[head[i] = head[from]];
            if (iv->begin < c->begin) c->begin = iv->begin;
            if (iv->end > c->end) c->end = iv->end;
            continue;
        }
        if (n_groups == OFFLINE_MAX) break;
        head[i] = n_groups;
        gr[n_groups++] = (group){.bytes = iv->bytes, .begin = iv->begin, .end = iv->end, .head = i};
    }
    bool small = n_groups < OFFLINE_MAX;
    if (small) qsort(gr, (size_t)n_groups, sizeof *gr, group_by_size);
    int64_t high = plan->fixed_bytes;
    for (int k = 0; small && k < n_groups; k++) {
        group *x = &gr[k];
        x->offset = lowest_gap(x, placed, k, plan->fixed_bytes);
        if (x->offset + x->bytes > high) high = x->offset + x->bytes;
        int at = k;
        while (at > 0 && placed[at - 1]->offset > x->offset) placed[at] = placed[at - 1], at--;
        placed[at] = x;
    }
    if (small && high < plan->arena_bytes) {
        int64_t *at = malloc(sizeof(int64_t) * ((size_t)n + 1)); /* chain head -> offset */
        if (!at) {
            free(head), free(gr), free(placed);
            return sc_errorf("out of memory placing intervals");
        }
        for (int k = 0; k < n_groups; k++) at[gr[k].head] = gr[k].offset;
        for (int i = 0; i < n; i++) {
            if (!opened[i]) continue;
            int h = i;
            while (plan->iv_from[h] >= 0) h = plan->iv_from[h];
            plan->intervals[i].offset = at[h];
        }
        plan->arena_bytes = high;
        free(at);
    }
    free(head), free(gr), free(placed);
    return SC_OK;
}

sc_status plan_alloc(const sc_graph *g, sc_plan *plan) {
    int64_t fixed = 0;
    int iv = 0;
    for (; iv < plan->n_fixed_intervals; iv++) {
        SC_ASSERT(sched_persistent(g, plan->intervals[iv].value));
        plan->intervals[iv].offset = fixed;
        fixed += plan->intervals[iv].bytes;
    }
    plan->fixed_bytes = fixed;
    allocator A;
    memset(&A, 0, sizeof A);
    A.root = A.tail = -1;
    A.base = A.high = fixed;
    A.rng = 0x9E3779B97F4A7C15ull;
    int *cur = malloc(sizeof(int) * ((size_t)g->n_values + 1));     /* value -> open interval */
    int *iv_blk = malloc(sizeof(int) * ((size_t)plan->n_intervals + 1)); /* interval -> block */
    bool *taken = calloc((size_t)plan->n_intervals + 1, sizeof(bool)); /* its block went to a later interval */
    bool *opened = calloc((size_t)plan->n_intervals + 1, sizeof(bool)); /* placed by this simulation */
    free(plan->iv_from);
    plan->iv_from = malloc(sizeof(int) * ((size_t)plan->n_intervals + 1));
    sc_status st = (!cur || !iv_blk || !taken || !opened || !plan->iv_from) ? sc_errorf("out of memory placing intervals") : SC_OK;
    for (int v = 0; !st && v < g->n_values; v++) cur[v] = -1;
    for (int i = 0; !st && i < plan->n_intervals; i++) plan->iv_from[i] = -1;
    for (int s = 0; !st && s < plan->n_steps; s++) {
        const sc_step *sp = &plan->steps[s];
        if (sp->kind == SC_STEP_FREE || sp->kind == SC_STEP_OFFLOAD) {
            if (sp->kind == SC_STEP_OFFLOAD) continue; /* the copy keeps its interval until FREE */
            int i = cur[sp->value];
            SC_ASSERT(i >= 0);
            if (!taken[i]) alloc_give(&A, iv_blk[i]);
            cur[sp->value] = -1;
            continue;
        }
        if (sp->kind != SC_STEP_RUN && sp->kind != SC_STEP_PREFETCH) continue;
        if (sp->interval < 0) continue;
        int n_open = 1;
        if (sp->kind == SC_STEP_RUN) { /* one interval per present output opened here */
            n_open = 0;
            for (int i = sp->interval; i < plan->n_intervals && plan->intervals[i].begin == s; i++) n_open++;
        }
        for (int i = sp->interval; i < sp->interval + n_open; i++) {
            opened[i] = true;
            int from = sp->kind == SC_STEP_RUN ? donor_interval(g, plan, s, i, cur, taken) : -1;
            if (from >= 0) {
                taken[from] = true;
                plan->iv_from[i] = from;
                iv_blk[i] = iv_blk[from];
                plan->intervals[i].offset = plan->intervals[from].offset;
                cur[plan->intervals[i].value] = i;
                continue;
            }
            int x = alloc_take(&A, plan->intervals[i].bytes);
            if (x < 0) {
                st = sc_errorf("out of memory placing intervals");
                break;
            }
            iv_blk[i] = x;
            plan->intervals[i].offset = A.b[x].addr;
            cur[plan->intervals[i].value] = i;
        }
    }
    plan->arena_bytes = A.high;
    if (!st) st = place_offline(plan, opened);
    SC_FREE_ALL(cur, iv_blk, taken, opened, A.b, A.spare);
    return st;
}
