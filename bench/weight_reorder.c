/* Convolution weights into the layouts oneDNN's conv kernels pick: oneDNN's own reorder against
 * Scorch's loops (backends/cpu/cpu_weight_reorder.c), same data, same threads, same run.
 *
 *     cc -O3 -march=native -fno-tree-vectorize -fopenmp -I. -Iinclude bench/weight_reorder.c \
 *        backends/cpu/cpu_weight_reorder.c -o weight_reorder -ldnnl && OMP_NUM_THREADS=2 ./weight_reorder
 *
 * For each of ResNet-18's weight shapes (batch 8 at 64x64), f32 and bf16: W as the forward
 * (inference, what Scorch's Conv runs) and the backward-data primitive read it. Each side is timed
 * in turn, 7 rounds of 10, best round each, so a slow phase of a shared machine hits both. */
#include <dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_dnnl.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* Stand-in for backends/cpu/cpu_dnnl.c's, so this links without the library. */
dnnl_format_tag_t cpu_dnnl_plain_tag(int nd) { return nd == 3 ? dnnl_abc : nd == 4 ? dnnl_abcd : dnnl_abcde; }

static dnnl_engine_t eng;
static dnnl_stream_t strm;

static void time_one(const char *what, const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *blocked) {
    cpu_weight_reorder *r = cpu_weight_reorder_new(plain, blocked, false);
    if (!r) {
        printf("%-34s not covered\n", what);
        return;
    }
    size_t in = dnnl_memory_desc_get_size(plain), out = dnnl_memory_desc_get_size(blocked);
    void *src = calloc(1, in), *a = calloc(1, out), *b = calloc(1, out);
    dnnl_memory_t mi, mo;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    dnnl_memory_create(&mi, plain, eng, src);
    dnnl_memory_create(&mo, blocked, eng, a);
    dnnl_reorder_primitive_desc_create(&pd, plain, eng, blocked, eng, NULL);
    dnnl_primitive_create(&p, pd);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, mi}, {DNNL_ARG_TO, mo}};
    double best_d = 1e30, best_s = 1e30;
    for (int round = 0; round < 7; round++) {
        double t0 = now_ms();
        for (int i = 0; i < 10; i++) dnnl_primitive_execute(p, strm, 2, args);
        dnnl_stream_wait(strm);
        double t1 = now_ms();
        for (int i = 0; i < 10; i++) cpu_weight_reorder_to_blocked(r, src, b, true);
        double t2 = now_ms();
        best_d = (t1 - t0) / 10 < best_d ? (t1 - t0) / 10 : best_d;
        best_s = (t2 - t1) / 10 < best_s ? (t2 - t1) / 10 : best_s;
    }
    printf("%-34s %9.3f %9.3f %7.2f\n", what, best_d, best_s, best_s / best_d);
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(mi);
    dnnl_memory_destroy(mo);
    cpu_weight_reorder_free(r);
    free(src);
    free(a);
    free(b);
}

/* W of an (N, C, H, H) -> (N, M, H/s, H/s) convolution with a k x k kernel, as the forward
 * inference and the backward-data primitives in type dt read it. */
static void conv(int64_t C, int64_t M, int64_t H, int64_t k, int64_t s, dnnl_data_type_t dt) {
    int64_t out = (H + 2 * (k / 2) - k) / s + 1;
    dnnl_dims_t src = {8, C, H, H}, dst = {8, M, out, out}, wei = {M, C, k, k}, st = {s, s}, dil = {0, 0},
                pad = {k / 2, k / 2};
    dnnl_memory_desc_t sm, dm, wm, wu;
    dnnl_memory_desc_init_by_tag(&sm, 4, src, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&dm, 4, dst, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wm, 4, wei, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wu, 4, wei, dt, dnnl_abcd);
    const char *type = dt == dnnl_bf16 ? "bf16" : "f32";
    for (int prop = 0; prop < 2; prop++) {
        dnnl_convolution_desc_t fd, bd;
        dnnl_primitive_desc_t fpd, bpd = NULL;
        dnnl_dilated_convolution_forward_desc_init(&fd, prop ? dnnl_forward_training : dnnl_forward_inference,
                                                   dnnl_convolution_direct, &sm, &wm, NULL, &dm, st, dil, pad, pad);
        if (dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL) != dnnl_success) return;
        char what[64];
        if (!prop) {
            snprintf(what, sizeof what, "%lldx%lldx%lldx%lld %s forward", (long long)M, (long long)C, (long long)k,
                     (long long)k, type);
            time_one(what, &wu, dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0));
        } else if (dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &sm, &wm, &dm, st,
                                                                    dil, pad, pad) == dnnl_success &&
                   dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd) == dnnl_success) {
            snprintf(what, sizeof what, "%lldx%lldx%lldx%lld %s bwd data", (long long)M, (long long)C, (long long)k,
                     (long long)k, type);
            time_one(what, &wu, dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0));
            dnnl_primitive_desc_destroy(bpd);
        }
        dnnl_primitive_desc_destroy(fpd);
    }
}

int main(void) {
    dnnl_engine_create(&eng, dnnl_cpu, 0);
    dnnl_stream_create(&strm, eng, dnnl_stream_default_flags);
    printf("%d threads; best of 7 rounds of 10, ms per reorder\n", omp_get_max_threads());
    printf("%-34s %9s %9s %7s\n", "W (O x I x k x k), primitive", "oneDNN", "Scorch", "ratio");
    const int64_t shapes[][5] = {{3, 64, 64, 7, 2},   {64, 64, 16, 3, 1},   {64, 128, 16, 3, 2}, {128, 128, 8, 3, 1},
                                 {64, 128, 16, 1, 2}, {128, 256, 8, 3, 2},  {256, 256, 4, 3, 1}, {128, 256, 8, 1, 2},
                                 {256, 512, 4, 3, 2}, {512, 512, 2, 3, 1},  {256, 512, 4, 1, 2}};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            conv(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4], t ? dnnl_bf16 : dnnl_f32);
    return 0;
}
