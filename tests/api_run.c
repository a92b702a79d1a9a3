/* Inference through the installed public API (tests/api_check.sh): loads MODEL, binds batch and
 * seq, checks the one int64 input, runs it on the token ids of IDS (raw int64), writes output 0's
 * raw bytes to OUT and the model back to SAVED.
 *   api_run MODEL BATCH SEQ IDS OUT SAVED */
#include <stdio.h>
#include <stdlib.h>

#include <scorch.h>

static int fail(scorch_error *e, const char *what) {
    fprintf(stderr, "api_run: %s: %s\n", what, e ? scorch_error_message(e) : "unexpected");
    scorch_error_free(e);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 7) return fprintf(stderr, "usage: api_run MODEL BATCH SEQ IDS OUT SAVED\n"), 2;
    scorch_model *m;
    scorch_error *e = scorch_model_load(argv[1], &m);
    if (e) return fail(e, "load");
    if ((e = scorch_model_set_dim(m, "batch", atoll(argv[2]))) || (e = scorch_model_set_dim(m, "seq", atoll(argv[3]))))
        return fail(e, "set_dim");
    int n_in = 0, n_out = 0;
    scorch_tensor in;
    const char *name;
    if ((e = scorch_model_input_count(m, &n_in)) || (e = scorch_model_output_count(m, &n_out))) return fail(e, "count");
    if (n_in != 1 || n_out < 1) return fail(NULL, "input/output count");
    if ((e = scorch_model_input(m, 0, &name, &in))) return fail(e, "input");
    if (in.dtype != SCORCH_INT64 || in.rank != 2 || in.dims[0] != atoll(argv[2]) || in.dims[1] != atoll(argv[3]))
        return fail(NULL, "input shape");
    if (!(e = scorch_model_set_dim(m, "batch", 3))) return fail(NULL, "dims changed after first use");
    scorch_error_free(e);
    if (!(e = scorch_model_input(m, 1, &name, &in))) return fail(NULL, "input 1 of 1 accepted");
    scorch_error_free(e);
    size_t n = (size_t)(in.dims[0] * in.dims[1]);
    in.data = malloc(n * sizeof(int64_t));
    FILE *f = fopen(argv[4], "rb");
    if (!f || fread(in.data, sizeof(int64_t), n, f) != n) return fail(NULL, "reading ids");
    fclose(f);
    scorch_tensor *outs = calloc((size_t)n_out, sizeof *outs);
    if ((e = scorch_model_run(m, &in, outs))) return fail(e, "run");
    size_t bytes = 4;
    for (int k = 0; k < outs[0].rank; k++) bytes *= (size_t)outs[0].dims[k];
    f = fopen(argv[5], "wb");
    if (outs[0].dtype != SCORCH_FLOAT32 || !f || fwrite(outs[0].data, 1, bytes, f) != bytes) return fail(NULL, "output");
    fclose(f);
    if ((e = scorch_model_save(m, argv[6]))) return fail(e, "save");
    for (int i = 0; i < n_out; i++) scorch_tensor_free(&outs[i]);
    free(outs);
    free(in.data);
    scorch_model_free(m);
    return 0;
}
