/* libFuzzer target: the ONNX importer and the passes that follow it.
 *
 * Contract under test: any byte string given to sc_model_load_buffer either loads or is rejected with
 * a non-empty status, and a loaded model then either prepares (dims bound with batch 1, seq 4, shapes
 * inferred, constants folded, dead code removed) or is rejected with a status. Nothing crashes, leaks
 * (LeakSanitizer runs at exit and on -detect_leaks), reads out of bounds, overflows a signed integer
 * (UBSan, no recovery) or hangs (-timeout). The model folder is NULL, so external data is always
 * refused and the fuzzer never touches the file system.
 *
 * Built by tests/fuzz.cmake with -fsanitize=fuzzer,address,undefined (SCORCH_FUZZ=ON, clang).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "tools/stages.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    sc_log_set_level(SC_LOG_ERROR); /* warnings about odd models would flood the fuzzer's output */
    return 0;
}

/* A rejection must carry a message: an empty one would leave the user with nothing to act on. */
static void check_rejection(sc_status st, const char *stage) {
    const char *msg = sc_status_message(st);
    if (!msg || !*msg) {
        fprintf(stderr, "fuzz_import: %s returned a status without a message\n", stage);
        abort();
    }
    sc_status_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sc_model *m = (sc_model *)1;
    sc_status st = sc_model_load_buffer(data, size, "fuzz.onnx", NULL, &m);
    if (st) {
        if (m) {
            fprintf(stderr, "fuzz_import: failed load left a model behind\n");
            abort();
        }
        check_rejection(st, "sc_model_load_buffer");
        return 0;
    }
    if (!m) abort();
    sc_bind_options opt = {.batch = 1, .seq = 4, .eval = cpu_evaluator()};
    st = graph_prepare(&m->graph, &opt);
    if (st) check_rejection(st, "graph_prepare");
    sc_model_free(m);
    return 0;
}
