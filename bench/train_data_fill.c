/* Synthetic training data (train/train_data.c): the time to open the source and to draw one batch
 * of a 1000-class image model, per thread count, best of 5 fills of distinct batches.
 *
 *     ninja -C build bench_train_data && ./build/bench_train_data [BATCH [SIZE]]   (default 64 224)
 *
 * The graph holds only what the data side reads: input x f32 [B, 3, S, S], labels i64 [B] and the
 * logits [B, 1000] that make it a classifier. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "graph/graph.h"
#include "train/train_data.h"

static int add(sc_graph *g, const char *name, sc_value_kind kind, sc_dtype t, int rank, const int64_t *dims) {
    sc_desc d = sc_desc_make(t, rank, dims);
    sc_status st = SC_OK;
    int id = graph_add_value(g, name, kind, &d, &st);
    if (st) {
        fprintf(stderr, "%s\n", sc_status_message(st));
        exit(1);
    }
    return id;
}

int main(int argc, char **argv) {
    int64_t B = argc > 1 ? atoll(argv[1]) : 64, S = argc > 2 ? atoll(argv[2]) : 224;
    if (B < 1 || S < 1) {
        fprintf(stderr, "usage: bench_train_data [BATCH [SIZE]]\n");
        return 2;
    }
    sc_graph g;
    graph_init(&g);
    sc_training_graph tg;
    memset(&tg, 0, sizeof tg);
    int x = add(&g, "x", SC_VALUE_INPUT, SC_F32, 4, (int64_t[]){B, 3, S, S});
    int y = add(&g, "labels", SC_VALUE_INPUT, SC_I64, 1, (int64_t[]){B});
    tg.output = add(&g, "logits", SC_VALUE_ACT, SC_F32, 2, (int64_t[]){B, 1000});
    g.inputs = sc_arena_alloc_array(&g.arena, 2, sizeof(int));
    g.inputs[0] = x;
    g.inputs[1] = y;
    g.n_inputs = 2;
    tg.labels = y;
    tg.lr = tg.step = tg.loss_scale = tg.inv_loss_scale = -1;
    sc_tensor feeds[2];
    for (int i = 0; i < 2; i++) {
        feeds[i].desc = g.values[g.inputs[i]].desc;
        feeds[i].data = malloc((size_t)sc_desc_bytes(&feeds[i].desc));
    }
    sc_trainer_config cfg;
    sc_trainer_config_default(&cfg);
    cfg.batch = B;
    train_data d;
    double t0 = sc_clock_seconds();
    sc_status st = train_data_open(&d, &g, &tg, &cfg);
    double open_ms = (sc_clock_seconds() - t0) * 1e3;
    if (st) {
        fprintf(stderr, "%s\n", sc_status_message(st));
        return 1;
    }
    double values = (double)B * 3 * S * S;
    printf("batch %lld x 3x%lldx%lld (%.1fM values), 1000 classes: open %.1f ms\n", (long long)B, (long long)S,
           (long long)S, values * 1e-6, open_ms);
    int max = omp_get_max_threads();
    for (int th = 1;; th = th * 2 > max && th < max ? max : th * 2) {
        omp_set_num_threads(th);
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            double a = sc_clock_seconds();
            st = train_data_fill(&d, &g, (uint64_t)r * (uint64_t)B, feeds);
            double s = sc_clock_seconds() - a;
            if (st) {
                fprintf(stderr, "%s\n", sc_status_message(st));
                return 1;
            }
            if (s < best) best = s;
        }
        printf("  fill on %2d threads: %7.1f ms (%.2f ns per value and thread)\n", th, best * 1e3,
               best * 1e9 * th / values);
        if (th >= max) break;
    }
    train_data_close(&d);
    for (int i = 0; i < 2; i++) free(feeds[i].data);
    graph_free(&g);
    return 0;
}
