/* Gradient rules of MatMul and Gemm (contract in autodiff/grad.h).
 *
 * MatMul (numpy matmul): Y[..., M, N] = A[..., M, K] @ B[..., K, N], batch dims broadcast.
 *   dA = dY @ B^T, dB = A^T @ dY, each summed over the batch dims its operand was broadcast along.
 *   A 1-D A is [1, K] with the M dim dropped from Y, a 1-D B is [K, 1] with N dropped; the rule
 *   reshapes to those 2-D forms, differentiates, and reshapes back.
 *   When B is a plain matrix shared by every batch row (a linear layer, A [B, T, K]), the batch is
 *   folded into M and both gradients are one Gemm each (no [B, K, N] partial products). When that
 *   B is itself Transpose(W) of a 2-D W (a tied LM head: logits = h @ wte^T), dA reads W with the
 *   flag flipped, so the transposed copy is not kept for backward (154 MB for GPT-2's vocabulary);
 *   backward.c folds the Transpose's own gradient into the dB Gemm likewise.
 * Gemm: Y = alpha * A' @ B' + beta * C, A' = transA ? A^T : A, B' likewise, C broadcast to [M, N].
 *   dA' = alpha dY B'^T, dB' = alpha A'^T dY, dC = beta dY summed to C's shape; the transposes fold
 *   into the emitted Gemms' own transA/transB flags.
 */
#include <string.h>

#include "autodiff/grad_rules.h"

static int gemm(sc_grad_ctx *c, int a, int b, bool ta, bool tb, double alpha) {
    sc_attrs at;
    memset(&at, 0, sizeof at);
    at.gemm.alpha = (float)alpha;
    at.gemm.beta = 1.0f;
    at.gemm.trans_a = ta;
    at.gemm.trans_b = tb;
    int in[2] = {a, b};
    return ad_emit(c, SC_OP_GEMM, in, 2, 1, NULL, &at);
}

/* Swaps the last two dims. */
static int swap_last(sc_grad_ctx *c, int x) {
    int r = ad_desc(c, x)->rank;
    int64_t perm[SC_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    return ad_transpose(c, x, perm, r);
}

static sc_desc desc_with(const sc_desc *d, int rank, const int64_t *dims) {
    sc_desc r = *d;
    r.rank = rank;
    for (int i = 0; i < rank; i++) r.dims[i] = dims[i];
    return r;
}

void grad_matmul(sc_grad_ctx *c) {
    int a = I(c, 0), b = I(c, 1), dy = GO(c, 0);
    sc_desc ad = *ad_desc(c, a), bd = *ad_desc(c, b), yd = *ad_desc(c, dy);
    /* 2-D (or more) views: A2 [..., M, K], B2 [..., K, N], dY2 [..., M, N]. */
    sc_desc a2 = ad, b2 = bd, y2 = yd;
    if (ad.rank == 1) a2 = desc_with(&ad, 2, (int64_t[]){1, ad.dims[0]});
    if (bd.rank == 1) b2 = desc_with(&bd, 2, (int64_t[]){bd.dims[0], 1});
    if (ad.rank == 1) { /* Y lost the M dim: insert it before the last (or only) dim */
        y2.rank++;
        int at = bd.rank == 1 ? y2.rank - 1 : y2.rank - 2;
        for (int i = y2.rank - 1; i > at; i--) y2.dims[i] = y2.dims[i - 1];
        y2.dims[at] = 1;
    }
    if (bd.rank == 1) { /* Y lost the N dim */
        y2.dims[y2.rank++] = 1;
    }
    int A = ad_reshape(c, a, &a2), B = ad_reshape(c, b, &b2), DY = ad_reshape(c, dy, &y2);
    if (c->st) return;
    int64_t M = a2.dims[a2.rank - 2], K = a2.dims[a2.rank - 1], N = b2.dims[b2.rank - 1];
    if (b2.rank == 2 && a2.rank > 2) {
        /* Shared weight: fold the batch of A into M. */
        int64_t P = sc_desc_numel(&a2) / K;
        sc_desc af = desc_with(&a2, 2, (int64_t[]){P, K}), yf = desc_with(&y2, 2, (int64_t[]){P, N});
        int Af = ad_reshape(c, A, &af), DYf = ad_reshape(c, DY, &yf);
        int w = graph_transposed_matrix(c->g, b); /* dY B^T = dY W when B = W^T */
        if (NEED_GI(c, 0))
            set_GI(c, 0, ad_reshape(c, w >= 0 ? gemm(c, DYf, w, false, false, 1.0) : gemm(c, DYf, B, false, true, 1.0), &ad));
        if (NEED_GI(c, 1)) set_GI(c, 1, ad_reshape(c, gemm(c, Af, DYf, true, false, 1.0), &bd));
        (void)M;
        return;
    }
    if (NEED_GI(c, 0)) {
        int g = ad_binary(c, SC_OP_MATMUL, DY, swap_last(c, B));
        set_GI(c, 0, ad_reshape(c, ad_reduce_to_shape(c, g, &a2), &ad));
    }
    if (NEED_GI(c, 1)) {
        int g = ad_binary(c, SC_OP_MATMUL, swap_last(c, A), DY);
        set_GI(c, 1, ad_reshape(c, ad_reduce_to_shape(c, g, &b2), &bd));
    }
}

void grad_gemm(sc_grad_ctx *c) {
    int a = I(c, 0), b = I(c, 1), dy = GO(c, 0);
    const sc_gemm_attrs *g = &c->fwd.attrs->gemm;
    bool ta = g->trans_a, tb = g->trans_b;
    double alpha = g->alpha;
    if (NEED_GI(c, 0)) {
        /* dA' = alpha dY B'^T; with transA, dA = dA'^T = alpha B' dY^T. */
        int r;
        if (!ta) r = tb ? gemm(c, dy, b, false, false, alpha) : gemm(c, dy, b, false, true, alpha);
        else r = tb ? gemm(c, b, dy, true, true, alpha) : gemm(c, b, dy, false, true, alpha);
        set_GI(c, 0, r);
    }
    if (NEED_GI(c, 1)) {
        /* dB' = alpha A'^T dY; with transB, dB = dB'^T = alpha dY^T A'. */
        int r;
        if (!tb) r = ta ? gemm(c, a, dy, false, false, alpha) : gemm(c, a, dy, true, false, alpha);
        else r = ta ? gemm(c, dy, a, true, true, alpha) : gemm(c, dy, a, true, false, alpha);
        set_GI(c, 1, r);
    }
    if (NEED_GI(c, 2)) set_GI(c, 2, ad_reduce_to_shape(c, ad_scale(c, dy, g->beta), ad_desc(c, I(c, 2))));
}
