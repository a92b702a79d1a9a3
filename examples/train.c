/* Trains an ONNX model through libscorch's public API and writes the trained model.
 *
 *   cc train.c $(pkg-config --cflags --libs scorch) -o train
 *   ./train model.onnx trained.onnx steps=20 optimizer=adamw memory=512MiB
 *
 * Each KEY=VALUE is an option of `scorch-run train` without the dashes (include/scorch.h). */
#include <stdio.h>
#include <string.h>

#include <scorch.h>

static int fail(scorch_error *e) {
    fprintf(stderr, "train: %s\n", scorch_error_message(e));
    scorch_error_free(e);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx OUT.onnx [KEY=VALUE ...]   (libscorch %s)\n", argv[0], scorch_version());
        return 2;
    }
    scorch_options *opts;
    scorch_error *e = scorch_options_new(&opts);
    for (int i = 3; !e && i < argc; i++) {
        char key[64], *eq = strchr(argv[i], '=');
        if (!eq || eq - argv[i] >= (int)sizeof key) return fprintf(stderr, "train: '%s' is not KEY=VALUE\n", argv[i]), 2;
        snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
        e = scorch_options_set(opts, key, eq + 1);
    }
    scorch_trainer *t = NULL;
    if (!e) e = scorch_trainer_create(argv[1], opts, &t);
    scorch_options_free(opts);
    scorch_metrics m;
    while (!e && !scorch_trainer_done(t)) {
        e = scorch_trainer_step(t, &m);
        if (!e) printf("step %lld/%lld  loss %.4f  lr %.3g  %.3f s  device peak %lld bytes\n", (long long)m.step,
                       (long long)scorch_trainer_total_steps(t), m.loss, m.lr, m.seconds, (long long)m.peak_bytes);
    }
    if (!e) e = scorch_trainer_save_model(t, argv[2]);
    scorch_trainer_free(t);
    if (e) return fail(e);
    printf("wrote %s\n", argv[2]);
    return 0;
}
