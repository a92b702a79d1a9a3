/* Convolution weights into oneDNN's blocked layouts by our own loops (backends/cpu/cpu_weight_reorder.c),
 * byte for byte against oneDNN's reorder of the same data into the same layout.
 *
 * The layouts are the ones oneDNN's convolutions pick for W (forward and backward data, f32 and
 * bf16, on this CPU), over 1-D, 2-D and 3-D kernels, 1x1 and 3x3 and the 7x7 stem (whose 3 input
 * channels pad to a whole block), strided, grouped and depthwise; and a few blocked tags named
 * outright, so that layouts this CPU's kernels do not pick are checked too. The destination starts
 * as garbage, so a byte left unwritten (padding included) fails.
 *
 * Every layout that splits O and I (or O/G and I/G, or G) into blocks must be covered: the test fails
 * if one of them falls back to oneDNN, and if fewer than 8 distinct layouts were compared. The
 * kernels take the loops only where they beat oneDNN's reorder: that choice is checked on named
 * layouts, with SCORCH_CPU_WEIGHT_REORDER=dnnl turning it off. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "tests/check.h"

static dnnl_engine_t eng;
static dnnl_stream_t strm;
static int compared, distinct;
static char seen[64][64];

/* A blocked layout's name as oneDNN's tags spell it: the dims outermost first (blocked ones in
 * capitals), then the inner blocks (AcdB32a2b). */
static void layout_name(const dnnl_memory_desc_t *md, char *s, size_t n) {
    const dnnl_blocking_desc_t *bk = &md->format_desc.blocking;
    int order[DNNL_MAX_NDIMS], nd = md->ndims;
    for (int d = 0; d < nd; d++) order[d] = d;
    for (int i = 0; i < nd; i++)
        for (int j = i + 1; j < nd; j++)
            if (bk->strides[order[j]] > bk->strides[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    size_t at = 0;
    for (int i = 0; i < nd && at + 1 < n; i++) {
        bool blocked = false;
        for (int k = 0; k < bk->inner_nblks; k++) blocked = blocked || bk->inner_idxs[k] == order[i];
        s[at++] = (char)((blocked ? 'A' : 'a') + order[i]);
    }
    s[at] = 0;
    for (int k = 0; k < bk->inner_nblks && at + 8 < n; k++)
        at += (size_t)snprintf(s + at, n - at, "%lld%c", (long long)bk->inner_blks[k], (char)('a' + bk->inner_idxs[k]));
    if (md->data_type == dnnl_bf16 && at + 6 < n) snprintf(s + at, n - at, " bf16");
}

/* Records a layout's name the first time it is compared. */
static void note_layout(const dnnl_memory_desc_t *md) {
    char s[64];
    layout_name(md, s, sizeof s);
    for (int i = 0; i < distinct; i++)
        if (!strcmp(seen[i], s)) return;
    if (distinct < 64) snprintf(seen[distinct++], sizeof seen[0], "%s", s);
}

/* Whether oneDNN's blocked layout md is one the loops must cover: inner blocks on at most two
 * adjacent dims among the first two, no extra flags. */
static bool must_cover(const dnnl_memory_desc_t *md) {
    const dnnl_blocking_desc_t *bk = &md->format_desc.blocking;
    if (md->format_kind != dnnl_blocked || !bk->inner_nblks || md->extra.flags) return false;
    for (int k = 0; k < bk->inner_nblks; k++)
        if (bk->inner_idxs[k] > 2) return false;
    int lo = 9, hi = -1;
    for (int k = 0; k < bk->inner_nblks; k++) {
        lo = bk->inner_idxs[k] < lo ? (int)bk->inner_idxs[k] : lo;
        hi = bk->inner_idxs[k] > hi ? (int)bk->inner_idxs[k] : hi;
    }
    return lo <= 1 && hi - lo <= 1;
}

/* The plain data reordered into blocked by oneDNN and by the loops, on 1 and on all threads. */
static void compare(const char *what, const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *blocked) {
    if (dnnl_memory_desc_equal(plain, blocked)) return;
    cpu_weight_reorder *r = cpu_weight_reorder_new(plain, blocked, false);
    char fmt[64];
    layout_name(blocked, fmt, sizeof fmt);
    if (!r) {
        CHECK(!must_cover(blocked), "%s: layout %s fell back to oneDNN", what, fmt);
        return;
    }
    size_t in_bytes = dnnl_memory_desc_get_size(plain), out_bytes = dnnl_memory_desc_get_size(blocked);
    unsigned char *src = malloc(in_bytes), *want = malloc(out_bytes), *got = malloc(out_bytes);
    /* Random bits, kept finite and not NaN for either type (bf16 and f32 share the exponent's
     * position in the high half, so clearing its top bit does for both). */
    uint32_t x = 12345;
    for (size_t i = 0; i < in_bytes; i++) {
        x = x * 1664525u + 1013904223u;
        src[i] = (unsigned char)(x >> 24);
    }
    size_t esz = plain->data_type == dnnl_f32 ? 4 : 2;
    for (size_t i = esz - 1; i < in_bytes; i += esz) src[i] &= 0x3f;
    memset(want, 0xa5, out_bytes);
    dnnl_memory_t mi, mo;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    dnnl_memory_create(&mi, plain, eng, src);
    dnnl_memory_create(&mo, blocked, eng, want);
    EXPECT(dnnl_reorder_primitive_desc_create(&pd, plain, eng, blocked, eng, NULL) == dnnl_success);
    EXPECT(dnnl_primitive_create(&p, pd) == dnnl_success);
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, mi}, {DNNL_ARG_TO, mo}};
    EXPECT(dnnl_primitive_execute(p, strm, 2, a) == dnnl_success);
    dnnl_stream_wait(strm);
    for (int parallel = 0; parallel < 2; parallel++) {
        memset(got, 0x5a, out_bytes);
        cpu_weight_reorder_to_blocked(r, src, got, parallel);
        size_t bad = 0;
        while (bad < out_bytes && got[bad] == want[bad]) bad++;
        CHECK(bad == out_bytes, "%s: %s %s, first differing byte %zu of %zu", what, fmt,
              parallel ? "parallel" : "one thread", bad, out_bytes);
    }
    compared++;
    note_layout(blocked);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(mi);
    dnnl_memory_destroy(mo);
    cpu_weight_reorder_free(r);
    free(src);
    free(want);
    free(got);
}

typedef struct {
    const char *name;
    int ns;            /* spatial dims */
    int64_t N, C, M, G; /* batch, input and output channels, groups */
    int64_t in, k, stride;
} conv_case;

/* W's layouts for the forward and the backward-data primitives of c in type dt, compared. */
static void conv_layouts(const conv_case *c, dnnl_data_type_t dt) {
    int nd = c->ns + 2, wnd = c->G > 1 ? nd + 1 : nd;
    dnnl_dims_t src = {c->N, c->C}, dst = {c->N, c->M}, wei = {0}, strides, dil = {0}, pl, pr;
    int64_t out = (c->in + 2 * (c->k / 2) - c->k) / c->stride + 1;
    for (int i = 0; i < c->ns; i++) {
        src[2 + i] = c->in;
        dst[2 + i] = out;
        strides[i] = c->stride;
        pl[i] = pr[i] = c->k / 2;
    }
    int wi = 0;
    if (c->G > 1) wei[wi++] = c->G;
    wei[wi++] = c->M / c->G;
    wei[wi++] = c->C / c->G;
    for (int i = 0; i < c->ns; i++) wei[wi++] = c->k;
    dnnl_memory_desc_t src_md, dst_md, wei_md, wei_user;
    dnnl_memory_desc_init_by_tag(&src_md, nd, src, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&dst_md, nd, dst, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei_md, wnd, wei, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei_user, wnd, wei, dt, cpu_dnnl_plain_tag(wnd));
    const char *type = dt == dnnl_bf16 ? "bf16" : "f32";
    char what[128];
    /* Inference: brgconv's layouts (AcdB32a2b, ...), which Scorch's forward Conv runs; training: the
     * forward that the backward-data primitive takes as its hint. */
    for (int training = 0; training < 2; training++) {
        dnnl_convolution_desc_t fd, bd;
        dnnl_primitive_desc_t fpd, bpd;
        if (dnnl_dilated_convolution_forward_desc_init(&fd, training ? dnnl_forward_training : dnnl_forward_inference,
                                                       dnnl_convolution_direct, &src_md, &wei_md, NULL, &dst_md,
                                                       strides, dil, pl, pr) != dnnl_success ||
            dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL) != dnnl_success) {
            printf("  %s %s: no forward primitive on this CPU, skipped\n", c->name, type);
            return;
        }
        snprintf(what, sizeof what, "%s %s forward %s", c->name, type, training ? "training" : "inference");
        compare(what, &wei_user, dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0));
        if (training &&
            dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_md, &wei_md, &dst_md,
                                                             strides, dil, pl, pr) == dnnl_success &&
            dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd) == dnnl_success) {
            snprintf(what, sizeof what, "%s %s backward data", c->name, type);
            compare(what, &wei_user, dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0));
            dnnl_primitive_desc_destroy(bpd);
        }
        dnnl_primitive_desc_destroy(fpd);
    }
}

/* Blocked tags named outright: layouts of other CPUs' kernels (AVX2's 8-blocks, VNNI pairs). */
static void named_layouts(void) {
    const struct {
        dnnl_format_tag_t tag;
        int nd;
        dnnl_dims_t dims;
    } named[] = {
        {dnnl_ABcd8b8a, 4, {24, 40, 3, 3}},  {dnnl_ABcd16b16a, 4, {40, 24, 1, 1}}, {dnnl_Acdb16a, 4, {20, 3, 7, 7}},
        {dnnl_ABcd8a16b2a, 4, {32, 48, 3, 3}}, {dnnl_aBcd16b, 4, {2, 20, 5, 5}},   {dnnl_ABc16b16a, 3, {16, 16, 5}},
        {dnnl_ABcde8b8a, 5, {8, 16, 3, 3, 3}}, {dnnl_aBCde8b8c, 5, {2, 16, 8, 3, 3}},
        {dnnl_AcdB32a2b, 4, {64, 20, 3, 3}},  {dnnl_AcdB64a2b, 4, {64, 3, 7, 7}},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        for (int t = 0; t < 2; t++) {
            dnnl_data_type_t dt = t ? dnnl_bf16 : dnnl_f32;
            dnnl_memory_desc_t plain, blocked;
            dnnl_memory_desc_init_by_tag(&plain, named[i].nd, named[i].dims, dt, cpu_dnnl_plain_tag(named[i].nd));
            dnnl_memory_desc_init_by_tag(&blocked, named[i].nd, named[i].dims, dt, named[i].tag);
            char what[64];
            snprintf(what, sizeof what, "named tag %zu %s", i, t ? "bf16" : "f32");
            compare(what, &plain, &blocked);
        }
}

/* Which layouts the kernels take the loops for (only_faster): bf16 into VNNI pairs with the spatial
 * dims outside them (AcdB32a2b, AcdB16a2b on 3x3), and none of oneDNN's faster cases (1x1 kernels,
 * the stem's padded AcdB64a2b, ABcd8a16b2a, f32); none with SCORCH_CPU_WEIGHT_REORDER=dnnl. */
static void policy(void) {
    const struct {
        dnnl_format_tag_t tag;
        dnnl_data_type_t dt;
        dnnl_dims_t dims;
        bool taken;
    } cases[] = {
        {dnnl_AcdB32a2b, dnnl_bf16, {512, 512, 3, 3}, true}, {dnnl_AcdB64a2b, dnnl_bf16, {64, 3, 7, 7}, false},
        {dnnl_AcdB16a2b, dnnl_bf16, {64, 64, 3, 3}, true},   {dnnl_AcdB32a2b, dnnl_bf16, {512, 256, 1, 1}, false},
        {dnnl_ABcd8a16b2a, dnnl_bf16, {512, 512, 3, 3}, false}, {dnnl_ABcd16b16a, dnnl_f32, {64, 64, 3, 3}, false},
        {dnnl_Acdb16a, dnnl_f32, {64, 64, 3, 3}, false},
    };
    for (int forced = 0; forced < 2; forced++) {
        if (forced) setenv("SCORCH_CPU_WEIGHT_REORDER", "dnnl", 1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            dnnl_memory_desc_t plain, blocked;
            dnnl_memory_desc_init_by_tag(&plain, 4, cases[i].dims, cases[i].dt, dnnl_abcd);
            dnnl_memory_desc_init_by_tag(&blocked, 4, cases[i].dims, cases[i].dt, cases[i].tag);
            cpu_weight_reorder *r = cpu_weight_reorder_new(&plain, &blocked, true);
            char fmt[64];
            layout_name(&blocked, fmt, sizeof fmt);
            bool want = cases[i].taken && !forced;
            CHECK((r != NULL) == want, "%s %lldx%lldx%lldx%lld: loops %s, expected %s%s", fmt,
                  (long long)cases[i].dims[0], (long long)cases[i].dims[1], (long long)cases[i].dims[2],
                  (long long)cases[i].dims[3], r ? "taken" : "not taken", want ? "taken" : "not taken",
                  forced ? " (SCORCH_CPU_WEIGHT_REORDER=dnnl)" : "");
            cpu_weight_reorder_free(r);
        }
    }
    unsetenv("SCORCH_CPU_WEIGHT_REORDER");
}

int main(void) {
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        printf("FAIL: no oneDNN CPU engine\n");
        return 1;
    }
    const conv_case cases[] = {
        {"3x3 512->512", 2, 2, 512, 512, 1, 4, 3, 1},  {"3x3 64->64", 2, 2, 64, 64, 1, 16, 3, 1},
        {"3x3 s2 128->256", 2, 2, 128, 256, 1, 8, 3, 2}, {"1x1 s2 256->512", 2, 2, 256, 512, 1, 8, 1, 2},
        {"1x1 64->256", 2, 2, 64, 256, 1, 8, 1, 1},    {"7x7 s2 stem 3->64", 2, 2, 3, 64, 1, 32, 7, 2},
        {"3x3 20->24 (ragged)", 2, 2, 20, 24, 1, 8, 3, 1}, {"grouped 3x3 64->64 g4", 2, 2, 64, 64, 4, 8, 3, 1},
        {"depthwise 3x3 32", 2, 2, 32, 32, 32, 8, 3, 1}, {"1-D k5 32->48", 1, 2, 32, 48, 1, 16, 5, 1},
        {"3-D 3x3x3 16->32", 3, 2, 16, 32, 1, 6, 3, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        conv_layouts(&cases[i], dnnl_f32);
        conv_layouts(&cases[i], dnnl_bf16);
    }
    named_layouts();
    policy();
    printf("%d reorders compared over %d layouts:", compared, distinct);
    for (int i = 0; i < distinct; i++) printf(" %s", seen[i]);
    printf("\n");
    CHECK(distinct >= 8, "only %d distinct layouts compared", distinct);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    if (failures) printf("%d failures\n", failures);
    return failures != 0;
}
