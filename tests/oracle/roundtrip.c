/* roundtrip: loads an ONNX model and saves it again (sc_model_load + sc_model_save), for the oracle
 * test that checks the saved file gives onnxruntime bit-identical outputs (tests/oracle/oracle.py).
 *
 *   roundtrip IN.onnx OUT.onnx [EXTERNAL_THRESHOLD_BYTES]
 *
 * A threshold > 0 sends initializers larger than it to external data ("OUT.onnx.data").
 */
#include <stdio.h>
#include <stdlib.h>

#include "import/onnx.h"

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s IN.onnx OUT.onnx [EXTERNAL_THRESHOLD_BYTES]\n", argv[0]);
        return 2;
    }
    int64_t threshold = argc == 4 ? strtoll(argv[3], NULL, 10) : 0;
    sc_model *m = NULL;
    sc_status st = sc_model_load(argv[1], &m);
    if (!st) st = sc_model_save(m, argv[2], threshold);
    if (m) sc_model_free(m);
    if (st) {
        fprintf(stderr, "roundtrip: %s\n", sc_status_message(st));
        sc_status_free(st);
        return 1;
    }
    return 0;
}
